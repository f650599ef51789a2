"""The claim measured on a real autoscaler: a real trace drives an app Deployment on a real
control plane (kube-apiserver, scheduler, controller-manager, kwok) whose nodes Karpenter (kwok
provider) adds and consolidates, with and without placeholders; the product's simulator runs on
the same trace and cluster settings; the ratios simulator / real are printed.

Series (`--series`): `taxi`, the demo's (NYC taxi pickups, `predictive_headroom/data/demo.yaml`'s
pool and policy: schedule and forecast), or `twitter`, a bursty shared one (nab_twitter_fb_5min,
the demo pool with a 5-minute step and demandPerReplica set so the window peaks near 100 pods).
The product's backtest replays the last `--days` days walk-forward and gives, per minute, the app
pods W (an HPA at demandPerReplica) and the placeholders P of the `forecast` strategy (what the
daemon would set). The busiest `--hours` of the last day are replayed with time compressed
(`--seconds-per-minute`, default 10): at each trace minute the app Deployment is scaled to W and
the chart's placeholder Deployment (at its PriorityClass) to P, on a NodePool of its own
(7-slot kwok nodes: c-8x-amd64-linux, 8 CPU less Karpenter's 100m kube-reserved, 1-CPU pods).
A new node boots in 3 trace minutes (the KWOKNodeClass's nodeRegistrationDelay plus kwok's 1 s
to Ready); consolidation (WhenEmptyOrUnderutilized) after 10 trace minutes. The cluster is sampled
every quarter of a trace minute:

- waiting pod-minutes: at the end of each trace minute, the app pods asked for and not yet bound
  (the simulator's minute resolution); beside it, each app pod's wait from its `PodScheduled`
  condition (creation to bind; still pending at the end: to the end), summed in trace minutes;
- node-hours: Ready nodes of the NodePool integrated over time (the simulator counts ready
  nodes), and NodeClaim-hours (from launch to deletion, booting included), in trace hours.

At 10 s per trace minute the control plane's own latency (well under a second from Deployment
scale to bind) is under a tenth of the 30 s boot, so what is measured is the autoscaler and the
placeholders, not the compression. The simulator (`replay/simulator.py`) runs the same W and P
with the same 7 slots, 3-minute lag and 10-minute scale-down from the same warm start. Needs
`make e2e-bins`; takes about twice `--hours` x 60 x `--seconds-per-minute` seconds plus the
backtest and the warm starts.

    nice -n 5 .venv/bin/python bench/e2e_trace_bench.py --series taxi --hours 2
"""

from __future__ import annotations

import argparse
import importlib.resources
import logging
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "e2e")]

import kubernetes.client  # noqa: E402
from apps import create_app, pod_waits  # noqa: E402
from cluster import Cluster, bins_dir, missing_binaries  # noqa: E402
from install import install, set_replicas  # noqa: E402
from karpenter import Karpenter, karpenter_missing, placement  # noqa: E402
from kube import wait_for  # noqa: E402

from predictive_headroom.backtest.results import BacktestSettings  # noqa: E402
from predictive_headroom.backtest.run import run_backtest  # noqa: E402
from predictive_headroom.core.series import History  # noqa: E402
from predictive_headroom.policy.load import load_policy  # noqa: E402
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf  # noqa: E402
from predictive_headroom.replay.simulator import ClusterSpec, score, simulate  # noqa: E402
from predictive_headroom.sources.csvsource import read_csv_history  # noqa: E402

DATASETS = REPO.parent / "shared" / "datasets"
SERIES = {"taxi": "nab_nyc_taxi_30min.csv", "twitter": "nab_twitter_fb_5min.csv"}
SLOTS, LAG, SCALE_DOWN = 7, 3, 10
APPS = "trace-apps"
PEAK_PODS = 100


def plan(series: str, days: int, hours: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(W, P, first minute's epoch) for the busiest `hours` of the last day, from the backtest."""
    history = read_csv_history(DATASETS / SERIES[series])
    keep = history.times >= history.times[-1] - (days + 14) * 86400
    history = History(history.times[keep], history.values[keep], history.source)
    with importlib.resources.as_file(
        importlib.resources.files("predictive_headroom.data") / "demo.yaml"
    ) as path:
        pool = load_policy(path).pools[0]
    if series != "taxi":  # the demo pool on another series: its step, a peak near PEAK_PODS
        last = history.values[history.times >= history.times[-1] - days * 86400]
        spec = pool.forecast.model_copy(
            update={
                "step": timedelta(seconds=history.step_seconds),
                "demand_per_replica": float(np.quantile(last, 0.99)) / PEAK_PODS,
            }
        )
        pool = pool.model_copy(update={"forecast": spec})
    nodes = SimulatedNodes(SLOTS, LAG * 60.0, SCALE_DOWN * 60.0)
    settings = BacktestSettings(replay=WhatIf(nodes=nodes), burst_view=False)
    result = run_backtest(history, pool, settings)
    pods = np.asarray(result.pods)
    placeholders = np.asarray(result.strategies["forecast"].run.placeholders)
    times = np.asarray(result.times)
    # The window: the last day's busiest `hours` (where the ramps are).
    steps = int(hours * 60)
    last_day = slice(len(times) - 1440, len(times))
    day = pods[last_day]
    best = max(range(0, 1440 - steps + 1, 30), key=lambda s: int(np.ptp(day[s : s + steps])))
    start = len(times) - 1440 + best
    return pods[start : start + steps], placeholders[start : start + steps], float(times[start])


@dataclass
class Sampler:
    """Samples the NodePool's Ready nodes and live NodeClaims every `every` s in a thread."""

    karpenter: Karpenter
    pool: str
    every: float
    node_seconds: float = 0.0
    claim_seconds: float = 0.0
    claims: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            ready = len(self.karpenter.ready_nodes(self.pool))
            claims = [
                c for c in self.karpenter.nodeclaims(self.pool)
                if not c["metadata"].get("deletionTimestamp")
            ]  # fmt: skip
            now = time.monotonic()
            dt, last = now - last, now
            self.node_seconds += ready * dt
            self.claim_seconds += len(claims) * dt
            self.claims.update(c["metadata"]["name"] for c in claims)
            self._stop.wait(self.every)


def replay(
    cluster: Cluster, karpenter: Karpenter, workdir: Path, w: np.ndarray, p: np.ndarray,
    spm: float, name: str,
) -> dict[str, float]:  # fmt: skip
    api = cluster.api()
    pool = f"trace-{name}"
    karpenter.pool(pool, consolidate_after=SCALE_DOWN * spm)
    values = {"pools": [{"name": "general", "maxReplicas": 200, "placeholder": {
        "requests": {"cpu": "1", "memory": "1Gi"}, **placement(pool)}}]}  # fmt: skip
    release = install(cluster, workdir, values, namespace=f"trace-{name}", release=f"trace-{name}")
    create_app(api, APPS, placement=placement(pool))
    core = kubernetes.client.CoreV1Api(api)
    placeholders = p if name == "headroom" else np.zeros_like(p)
    # The warm start: Karpenter adds the nodes the first minute's pods need.
    set_replicas(api, APPS, "app", int(w[0]))
    set_replicas(api, release.namespace, release.placeholder(), int(placeholders[0]))
    wait_for(
        lambda: bound_apps(core) == int(w[0]) and bound_pods(core, release.namespace)
        == int(placeholders[0]),
        karpenter.boot + 300,
        "the warm start's pods bound",
        every=1,
    )  # fmt: skip
    sampler = Sampler(karpenter, pool, spm / 4).start()
    t0, wall0 = time.monotonic(), time.time()
    known = set(pod_waits(api, APPS))
    minute_end = 0  # app pods still unbound at the end of each trace minute, summed
    try:
        for i in range(len(w)):
            if i:
                minute_end += max(0, int(w[i - 1]) - bound_apps(core))
            if i and w[i] != w[i - 1]:
                set_replicas(api, APPS, "app", int(w[i]))
            if i and placeholders[i] != placeholders[i - 1]:
                set_replicas(api, release.namespace, release.placeholder(), int(placeholders[i]))
            wait = t0 + (i + 1) * spm - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        sampler.stop()
    minute_end += max(0, int(w[-1]) - bound_apps(core))
    end = time.time()
    waits = scheduled_waits(core, known, end)
    out = {
        "waiting_pod_minutes": float(minute_end),
        "podscheduled_pod_minutes": sum(waits) / spm,
        "pods_waiting_over_a_minute": sum(1 for x in waits if x > spm),
        "node_hours": sampler.node_seconds / spm / 60,
        "nodeclaim_hours": sampler.claim_seconds / spm / 60,
        "nodeclaims": len(sampler.claims),
        "overrun_seconds": max(0.0, time.monotonic() - t0 - len(w) * spm),
        "wall_seconds": end - wall0,
    }
    # Clean up for the next run: no app pods, no placeholders, the NodePool and its nodes gone.
    set_replicas(api, APPS, "app", 0)
    set_replicas(api, release.namespace, release.placeholder(), 0)
    karpenter.delete_pool(pool, timeout=300)
    wait_for(lambda: not core.list_namespaced_pod(APPS).items, 120, "app pods gone", every=1)
    return out


def bound_pods(core: Any, namespace: str) -> int:
    return sum(
        1
        for p in core.list_namespaced_pod(namespace).items
        if p.spec.node_name and not p.metadata.deletion_timestamp
    )


def bound_apps(core: Any) -> int:
    return bound_pods(core, APPS)


def scheduled_waits(core: Any, known: set[str], end: float) -> list[float]:
    """Each app pod created during the replay: seconds from creation to its PodScheduled=True
    (to `end` when still pending); pods deleted before the end are not listed (their waits are
    lost: only scale-downs delete app pods, and they delete pending ones first)."""
    waits = []
    for pod in core.list_namespaced_pod(APPS, label_selector="app=e2e-app").items:
        if pod.metadata.name in known:
            continue
        created = pod.metadata.creation_timestamp.timestamp()
        bound = next(
            (c.last_transition_time.timestamp() for c in pod.status.conditions or []
             if c.type == "PodScheduled" and c.status == "True"),
            None,
        )  # fmt: skip
        waits.append((bound if bound is not None else end) - created)
    return waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--days", type=int, default=7, help="days the backtest scores (walk-forward)"
    )
    parser.add_argument("--hours", type=float, default=2.0, help="hours of the last day replayed")
    parser.add_argument("--seconds-per-minute", type=float, default=10.0)
    parser.add_argument("--series", choices=sorted(SERIES), default="taxi")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bins = bins_dir()
    missing = missing_binaries(bins) or karpenter_missing(bins)
    if missing:
        print(f"missing {missing} in {bins}: run make e2e-bins", file=sys.stderr)
        return 2
    started = time.monotonic()
    w, p, first = plan(args.series, args.days, args.hours)
    print(
        f"trace: {SERIES[args.series]}, {len(w)} minutes from "
        f"{datetime.fromtimestamp(first, UTC):%Y-%m-%d %H:%M} UTC; app pods {int(w.min())}-{int(w.max())}, "
        f"placeholders {int(p.min())}-{int(p.max())} (backtest {time.monotonic() - started:.0f} s)"
    )
    spec = ClusterSpec(node_slots=SLOTS, lag_minutes=LAG, scale_down_minutes=SCALE_DOWN)
    sim = {
        name: score(simulate(w, pp, spec))
        for name, pp in (("headroom", p), ("none", np.zeros_like(p)))
    }
    spm = args.seconds_per_minute
    real: dict[str, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Cluster(Path(tmp) / "cluster", bins, node_ready_delay=1.0) as cluster,
    ):
        karpenter = Karpenter(cluster, boot_delay=LAG * spm - 1.0).start()
        try:
            for name in ("headroom", "none"):
                real[name] = replay(cluster, karpenter, Path(tmp), w, p, spm, name)
                print(f"  real {name}: {real[name]}", flush=True)
        except BaseException:
            print(cluster.logs(), file=sys.stderr)
            raise
        finally:
            karpenter.stop()
    print(
        f"cluster: Karpenter v1.14.3 (kwok), {SLOTS}-slot nodes, boot {LAG} min, consolidation "
        f"after {SCALE_DOWN} min; {spm:g} s per trace minute"
    )
    print(
        "| run | waiting pod-min sim | real | sim/real | by PodScheduled | node-hours sim | real | sim/real | NodeClaim-hours |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("headroom", "none"):
        s, r = sim[name], real[name]
        ratio_w = (
            s.unserved_pod_minutes / r["waiting_pod_minutes"]
            if r["waiting_pod_minutes"]
            else float("nan")
        )
        ratio_n = s.node_hours / r["node_hours"] if r["node_hours"] else float("nan")
        print(
            f"| {name} | {s.unserved_pod_minutes:.0f} | {r['waiting_pod_minutes']:.0f} | {ratio_w:.2f} "
            f"| {r['podscheduled_pod_minutes']:.0f} | {s.node_hours:.1f} | {r['node_hours']:.1f} "
            f"| {ratio_n:.2f} | {r['nodeclaim_hours']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
