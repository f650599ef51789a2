"""The claim measured in the real stack: a real trace drives an app Deployment on a real
control plane (kube-apiserver, scheduler, controller-manager, kwok nodes with a boot delay, a node
provisioner with Cluster Autoscaler's defaults), with and without placeholders; the product's
simulator runs on the same trace and cluster settings; the ratios simulator / real are printed.

The trace is the demo's (NYC taxi pickups, `predictive_headroom/data/demo.yaml`'s pool and
policy: schedule and forecast). The product's backtest replays the last `--days` days walk-forward
and gives, per minute, the app pods W (an HPA at demandPerReplica) and the placeholders P of the
`forecast` strategy (what the daemon would set). A window of `--hours` hours of the last day is
replayed here with time compressed (`--seconds-per-minute`, 1: one trace minute per second): at
each trace minute the app Deployment is scaled to W and the placeholder Deployment (the chart's,
at its PriorityClass) to P, and the cluster is sampled every quarter of a trace minute:

- waiting pod-minutes: at the end of each trace minute, the app pods asked for and not yet
  bound (W less the app pods with a node), summed: the simulator's minute resolution, where a
  pod placed within the minute it was asked for is served. Printed beside: the same integrated
  continuously (it adds the control plane's own sub-second latency per new pod, a trace
  minute's worth at this compression), and the waits read from each pod's `PodScheduled`
  condition (creation to bind, beyond one trace minute, 1 s resolution);
- node-hours: Ready kwok nodes integrated over time, in trace hours.

The simulator (`replay/simulator.py`) runs the same W and P with the same 8 slots per node, boot
lag and scale-down delay, from the same warm start. Needs `make e2e-bins`; takes about twice
`--hours` x 60 x `--seconds-per-minute` seconds plus the backtest.

    .venv/bin/python bench/e2e_trace_bench.py [--hours 12] [--seconds-per-minute 1]
"""

from __future__ import annotations

import argparse
import importlib.resources
import logging
import math
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "e2e")]

import kubernetes.client  # noqa: E402
from apps import create_app  # noqa: E402
from cluster import Cluster, bins_dir, missing_binaries  # noqa: E402
from install import install, set_replicas  # noqa: E402
from kube import wait_for  # noqa: E402
from provisioner import Provisioner, node_ready  # noqa: E402

from predictive_headroom.backtest.results import BacktestSettings  # noqa: E402
from predictive_headroom.backtest.run import run_backtest  # noqa: E402
from predictive_headroom.core.series import History  # noqa: E402
from predictive_headroom.policy.load import load_policy  # noqa: E402
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf  # noqa: E402
from predictive_headroom.replay.simulator import ClusterSpec, score, simulate  # noqa: E402
from predictive_headroom.sources.csvsource import read_csv_history  # noqa: E402

DATA = REPO.parent / "shared" / "datasets" / "nab_nyc_taxi_30min.csv"
SLOTS, LAG, SCALE_DOWN = 8, 3, 10
APPS = "trace-apps"


def plan(days: int, hours: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(W, P, first minute's epoch) for the last `hours` of the last day, from the backtest."""
    data = Path(sys.argv[0]).parent  # noqa: F841 (kept for the docstring's path)
    history = read_csv_history(DATA if DATA.exists() else REPO / "shared-missing")
    keep = history.times >= history.times[-1] - (days + 14) * 86400
    history = History(history.times[keep], history.values[keep], history.source)
    with importlib.resources.as_file(
        importlib.resources.files("predictive_headroom.data") / "demo.yaml"
    ) as path:
        pool = load_policy(path).pools[0]
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
    """Samples app pods bound and Ready kwok nodes every `every` s in a thread."""

    api: Any
    every: float
    wanted: list[int] = field(default_factory=lambda: [0])
    pending_seconds: float = 0.0
    node_seconds: float = 0.0
    pods: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        core = kubernetes.client.CoreV1Api(self.api)
        last = time.monotonic()
        while not self._stop.is_set():
            items = core.list_namespaced_pod(APPS).items
            nodes = core.list_node(label_selector="type=kwok").items
            now = time.monotonic()
            dt, last = now - last, now
            bound = sum(1 for p in items if p.spec.node_name and not p.metadata.deletion_timestamp)
            self.pending_seconds += max(0, self.wanted[0] - bound) * dt
            self.node_seconds += sum(1 for n in nodes if node_ready(n) and not n.spec.taints) * dt
            for p in items:
                created = p.metadata.creation_timestamp.timestamp()
                scheduled = next(
                    (
                        c.last_transition_time.timestamp()
                        for c in p.status.conditions or []
                        if c.type == "PodScheduled" and c.status == "True"
                    ),
                    None,
                )
                self.pods[p.metadata.uid] = (created, scheduled)
            self._stop.wait(self.every)


def bound_apps(core: Any) -> int:
    return sum(
        1
        for p in core.list_namespaced_pod(APPS).items
        if p.spec.node_name and not p.metadata.deletion_timestamp
    )


def replay(
    cluster: Cluster, workdir: Path, w: np.ndarray, p: np.ndarray, spm: float, with_headroom: bool
) -> dict[str, float]:
    api = cluster.api()
    release = install(cluster, workdir, {"pools": [{"name": "general", "maxReplicas": 200}]})
    create_app(api, APPS)
    core = kubernetes.client.CoreV1Api(api)
    placeholders = p if with_headroom else np.zeros_like(p)
    first = math.ceil((int(w[0]) + int(placeholders[0])) / SLOTS)
    cluster.add_nodes([f"trace-warm-{i}" for i in range(first)])
    set_replicas(api, APPS, "app", int(w[0]))
    set_replicas(api, release.namespace, release.placeholder(), int(placeholders[0]))
    wait_for(
        lambda: (
            sum(1 for n in core.list_node().items if node_ready(n) and not n.spec.taints) >= first
        ),
        120,
        "the warm start's nodes",
    )
    provisioner = Provisioner(
        api, slots=SLOTS, scan_interval=spm / 6, unneeded_time=SCALE_DOWN * spm, prefix="trace"
    ).start()
    sampler = Sampler(api, spm / 4)
    sampler.wanted[0] = int(w[0])
    time.sleep(2 * spm)
    sampler.start()
    t0, wall0 = time.monotonic(), time.time()
    minute_end = 0  # app pods still unbound at the end of each trace minute, summed
    try:
        for i in range(len(w)):
            if i:
                minute_end += max(0, int(w[i - 1]) - bound_apps(core))
            if i and w[i] != w[i - 1]:
                set_replicas(api, APPS, "app", int(w[i]))
            sampler.wanted[0] = int(w[i])
            if i and placeholders[i] != placeholders[i - 1]:
                set_replicas(api, release.namespace, release.placeholder(), int(placeholders[i]))
            wait = t0 + (i + 1) * spm - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        sampler.stop()
        provisioner.stop()
    minute_end += max(0, int(w[-1]) - bound_apps(core))
    late = sum(
        (s - c) / spm
        for c, s in sampler.pods.values()
        if s is not None and c >= wall0 - 1 and (s - c) > spm
    )
    out = {
        "waiting_pod_minutes": float(minute_end),
        "waiting_pod_minutes_continuous": sampler.pending_seconds / spm,
        "node_hours": sampler.node_seconds / spm / 60,
        "podscheduled_late_pod_minutes": late,
        "nodes_added": provisioner.added,
        "nodes_removed": provisioner.removed,
        "overrun_seconds": max(0.0, time.monotonic() - t0 - len(w) * spm),
    }
    # Clean up for the next run: no app pods, no placeholders, no nodes.
    set_replicas(api, APPS, "app", 0)
    set_replicas(api, release.namespace, release.placeholder(), 0)
    for n in core.list_node(label_selector="type=kwok").items:
        core.delete_node(n.metadata.name)
    wait_for(lambda: not core.list_namespaced_pod(APPS).items, 120, "app pods gone", every=1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--days", type=int, default=7, help="days the backtest scores (walk-forward)"
    )
    parser.add_argument("--hours", type=float, default=12.0, help="hours of the last day replayed")
    parser.add_argument("--seconds-per-minute", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bins = bins_dir()
    if missing_binaries(bins):
        print(f"missing {missing_binaries(bins)} in {bins}: run make e2e-bins", file=sys.stderr)
        return 2
    started = time.monotonic()
    w, p, first = plan(args.days, args.hours)
    print(
        f"trace: {DATA.name}, {len(w)} minutes from "
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
        Cluster(Path(tmp) / "cluster", bins, node_ready_delay=LAG * spm) as cluster,
    ):
        try:
            for name in ("headroom", "none"):
                real[name] = replay(cluster, Path(tmp), w, p, spm, name == "headroom")
                print(f"  real {name}: {real[name]}", flush=True)
        except BaseException:
            print(cluster.logs(), file=sys.stderr)
            raise
    print(
        f"cluster: {SLOTS}-slot nodes, boot {LAG} min, scale-down {SCALE_DOWN} min; {spm:g} s per trace minute"
    )
    print("| run | waiting pod-min sim | real | sim/real | node-hours sim | real | sim/real |")
    print("|---|---|---|---|---|---|---|")
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
            f"| {s.node_hours:.1f} | {r['node_hours']:.1f} | {ratio_n:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
