"""Scale in the real stack, the daemon as its own process: 30 pools over three node selectors
against thousands of kwok nodes and tens of thousands of running pods on a real kube-apiserver
(etcd, scheduler, controller-manager and kwok from `make e2e-bins`), the LIST design beside the
watch design on the same cluster (issue 47).

The cluster: `--nodes` kwok nodes (8 CPU, labelled `pool=a|b|c` in turn, created by 16 threads),
then `--pods` app pods in 20 Deployments, waited for at most `--settle-minutes`; the Deployments
are then scaled to the pods that run, so nothing is pending while the daemons are measured.

Each design runs `predictive-headroom run` as a child process (`tests/e2e/daemonproc.py`, the
cluster's admin kubeconfig, no leader election, JSON logs, `/last-run` over plain HTTP) with
`PH_WATCH=false` (a LIST per node selector and GETs per target every reconcile) or `PH_WATCH=true`
(list-and-watch caches), one after the other (with `--design both`, the watch daemon finds the
placeholders the LIST daemon scaled), and measures:

- reconcile time: the `N ms` of each reconcile's log record (the daemon's own wall time of the
  reconcile); the first, then p50 and p95 over `--runs` steady-state reconciles (after five);
- RSS: the daemon's `VmRSS` from `/proc/PID/status`, sampled every 0.5 s (the peak in the steady
  window), and its `VmHWM` (peak since start) before it is stopped;
- API requests per reconcile: the API server's own `apiserver_request_total`, by verb and
  resource (LIST, GET and WATCH of nodes, pods, events, deployments and capacitybuffers), over
  the steady window, divided by the reconciles logged in it. The counter names no client:
  kube-scheduler, kube-controller-manager and kwok read through informers (a LIST at start, then
  WATCH), and kwok writes node and pod status (PATCH/PUT, not counted here). So a baseline window
  of the same length with no daemon running is measured first, and its rate times the window's
  length is subtracted; the baseline is printed too. The daemon paces reconciles start to
  start, so one under way when the counter is read may fall half in the window: the figures are
  within one reconcile's requests over the window;
- a node added and a node cordoned (`spec.unschedulable`, what the proportional rule leaves out)
  after the steady window: the last pool, `probe`, on `pool=c` with `nodesPerReplica` equal to
  the `pool=c` node count, asks for 1 replica by its proportional rule, 2 with one node more
  and 1 again when one is cordoned. `/last-run` is polled every 0.25 s; the figure is how many
  reconciles started after the API server acknowledged the change until `/last-run`'s
  proportional count moved (1: the next one; 0: the reconcile under way already read it).

    .venv/bin/python bench/e2e_scale_bench.py [--pools 30] [--nodes 5000] [--pods 20000]
        [--settle-minutes 20] [--runs 20] [--interval 5] [--design list|watch|both] [--logs DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "e2e"), str(REPO / "bench")]

import kubernetes.client  # noqa: E402
from cluster import Cluster, bins_dir, missing_binaries, node_body  # noqa: E402
from daemonproc import DaemonProc  # noqa: E402
from kube import Kube, ensure_namespace, wait_for  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from scale_bench import NS, bench_pool  # noqa: E402

APPS = "scale-apps"
APP_DEPLOYMENTS = 20
SELECTORS = ("a", "b", "c")
PROBE = "probe"
PROBE_SELECTOR = "c"
CORDONED = "node-2"
"""A `pool=c` node (node-N is labelled SELECTORS[N % 3])."""
RESOURCES = ("nodes", "pods", "events", "deployments", "capacitybuffers")
VERBS = ("LIST", "GET", "WATCH")
WARMUP = 5
"""Reconciles before the steady window opens: the first fills the caches and scales the pools, and
after a write the watch design reads the target directly until its cache shows the write."""
RECONCILE = re.compile(r"^reconcile \((?:DRY-RUN )?\w+, (\d+) ms\)")
Counts = dict[tuple[str, str], float]


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def label_of(n: int) -> str:
    return SELECTORS[n % len(SELECTORS)]


def deployment(
    name: str, namespace: str, replicas: int, cpu: str, pool: str | None = None
) -> dict[str, Any]:
    """A Deployment of pause pods; a pool's placeholder and its pods carry the chart's pool label
    (the daemon writes only a target that has it, and its closed loop reads the pods by it)."""
    labels = {"app": name} | ({"predictive-headroom.io/pool": pool} if pool else {})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "pause",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def pages(kube: Kube, path: str, query: list[tuple[str, str]] | None = None) -> Iterator[Any]:
    """The objects at `path`, read 500 a page (never one list of everything)."""
    token = ""
    while True:
        paging = [("limit", "500")] + ([("continue", token)] if token else [])
        page = kube.call("GET", path, query=(query or []) + paging)
        yield from page["items"]
        token = page["metadata"].get("continue") or ""
        if not token:
            return


def create_nodes(cluster: Cluster, nodes: int) -> float:
    """`nodes` kwok nodes (16 at a time) and the wait until kwok has made them all Ready."""
    started = time.monotonic()
    core = kubernetes.client.CoreV1Api(cluster.api())

    def create(n: int) -> None:
        body = node_body(f"node-{n}", 8, "32Gi", {"pool": label_of(n)})
        core.create_node(body, _preload_content=False)

    with ThreadPoolExecutor(16) as pool:
        for done, _ in enumerate(pool.map(create, range(nodes)), 1):
            if done % 500 == 0 or done == nodes:
                progress(f"{done}/{nodes} nodes created")
    kube = Kube(cluster.api())

    def ready() -> bool:
        count = sum(1 for x in pages(kube, "/api/v1/nodes") if not x["spec"].get("taints"))
        progress(f"{count}/{nodes} nodes Ready")
        return count >= nodes

    wait_for(ready, 1800, f"{nodes} nodes Ready", every=10)
    return time.monotonic() - started


def app_running(kube: Kube) -> Counter[str]:
    """Each app Deployment's running pods, from the pods themselves (a Deployment's
    `readyReplicas` was seen to lag behind its pods for minutes here)."""
    running = [("fieldSelector", "status.phase=Running")]
    path = f"/api/v1/namespaces/{APPS}/pods"
    return Counter(pod["metadata"]["labels"]["app"] for pod in pages(kube, path, running))


def settle_pods(cluster: Cluster, pods: int, minutes: float) -> tuple[int, float]:
    """`pods` app pods in 20 Deployments, waited for at most `minutes`; then each Deployment is
    scaled to the pods it runs (the pending ones go). (running pods, seconds taken)."""
    kube = Kube(cluster.api())
    started = time.monotonic()
    per = -(-pods // APP_DEPLOYMENTS)
    for i in range(APP_DEPLOYMENTS):
        kube.apply(deployment(f"app-{i}", APPS, per, "100m"))
    deadline = started + minutes * 60
    while True:
        ready = app_running(kube)
        running = sum(ready.values())
        progress(f"{running}/{per * APP_DEPLOYMENTS} app pods running")
        if running >= per * APP_DEPLOYMENTS or time.monotonic() > deadline:
            break
        time.sleep(20)
    apps = kubernetes.client.AppsV1Api(cluster.api())
    for i in range(APP_DEPLOYMENTS):
        name, count = f"app-{i}", ready[f"app-{i}"]
        if count < per:
            apps.patch_namespaced_deployment_scale(name, APPS, {"spec": {"replicas": count}})
    return running, time.monotonic() - started


def write_policy(path: Path, pools: int, probe_nodes: int) -> Path:
    """`pools - 1` pools like `bench/scale_bench.py`'s (a minimum, a schedule window, a linear
    proportional rule) over `pool=a|b|c` in turn, and the `probe` pool (see the docstring)."""

    body = [
        bench_pool(
            f"pool-{i}", {"nodesPerReplica": 20 + i, "coresPerReplica": 64}, {"pool": label_of(i)}
        )
        for i in range(pools - 1)
    ]
    body.append(bench_pool(PROBE, {"nodesPerReplica": probe_nodes}, {"pool": PROBE_SELECTOR}))
    path.write_text(yaml.safe_dump({"pools": body}, sort_keys=False))
    return path


def server_counts(kube: Kube) -> Counts:
    """The API server's own `apiserver_request_total` so far, by (verb, resource), all clients;
    a subresource is named after its resource (`deployments/scale`)."""
    found: Counts = {(v, r): 0.0 for v in VERBS for r in RESOURCES}
    text = kube.raw("GET", "/metrics").decode()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            labels = sample.labels
            verb, resource = labels.get("verb", ""), labels.get("resource", "")
            if sample.name != "apiserver_request_total" or (verb, resource) not in found:
                continue
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            found[verb, resource] = found.get((verb, resource), 0.0) + sample.value
    return found


def minus(after: Counts, before: Counts) -> Counts:
    return {k: after[k] - before.get(k, 0.0) for k in after}


@dataclass
class Rss:
    """Samples a process's VmRSS every 0.5 s in a thread; `peak_since(mark)` in MiB."""

    pid: int
    samples: list[tuple[float, int]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def field_kib(self, name: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
        raise LookupError(f"{name} not in /proc/{self.pid}/status")

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                self.samples.append((time.monotonic(), self.field_kib("VmRSS")))
            except (OSError, LookupError):
                return

    def peak_since(self, mark: float) -> float:
        return max((kib for at, kib in self.samples if at >= mark), default=0) / 1024


class Daemon:
    """One `predictive-headroom run` child: its reconcile records and its `/last-run`."""

    def __init__(self, proc: DaemonProc) -> None:
        self.proc = proc
        self.port = 0
        self._read = 0
        self._records: list[dict[str, Any]] = []

    def records(self) -> list[dict[str, Any]]:
        """Its reconcile log records so far, in order (each has `ms` added); the log is read
        from where the last call stopped (its complete lines)."""
        if not self.proc.log.exists():
            return []
        with self.proc.log.open("rb") as log:
            log.seek(self._read)
            text = log.read()
        complete = text[: text.rfind(b"\n") + 1]
        self._read += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            matched = RECONCILE.match(record.get("message", "")) if type(record) is dict else None
            if matched:
                self._records.append({**record, "ms": int(matched[1])})
        return list(self._records)

    def wait_records(self, count: int, timeout: float) -> list[dict[str, Any]]:
        def enough() -> list[dict[str, Any]] | None:
            if not self.proc.alive():
                raise RuntimeError(f"the daemon exited; its log ends:\n{self.proc.text()[-3000:]}")
            found = self.records()
            return found if len(found) >= count else None

        return wait_for(enough, timeout, f"{count} reconciles logged", every=0.2)

    def last_run(self) -> dict[str, Any]:
        if not self.port:
            found = re.search(r"serving [^\"\n]*/last-run[^\"\n]* on port (\d+)", self.proc.text())
            if not found:
                raise RuntimeError(f"no port in the daemon's log:\n{self.proc.text()[-3000:]}")
            self.port = int(found[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/last-run", timeout=10) as got:
            return json.loads(got.read())

    def probe_count(self) -> tuple[float, int | None] | None:
        """(start of the last reconcile, the probe pool's proportional count), None before one."""
        run = self.last_run().get("reconcile")
        if not run:
            return None
        pool = next(p for p in run["pools"] if p["name"] == PROBE)
        return run["at"], (pool.get("components") or {}).get("proportional")

    def reconciles_until(self, change: Callable[[], None], want: int, timeout: float) -> int:
        """Make `change`, then count the reconciles started after the API server acknowledged it
        until one shows the probe's proportional count at `want` (0: the one under way did)."""
        before = self.probe_count()
        if before is None or before[1] == want:
            raise RuntimeError(f"the probe's count is already {want} (or unknown): {before}")
        change()
        acknowledged, seen = time.time(), {before[0]}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.probe_count()
            if now is not None and now[0] not in seen:
                seen.add(now[0])
                after = sum(1 for at in seen if at >= acknowledged)
                if now[1] == want:
                    return after
            time.sleep(0.25)
        raise AssertionError(f"the probe's count did not reach {want} within {timeout:g} s")


@contextmanager
def running(
    cluster: Cluster, workdir: Path, policy: Path, watch: bool, interval: float, keep: Path | None
) -> Iterator[tuple[Daemon, Rss]]:
    """The daemon of the design, its RSS sampled; its log is copied into `keep` when given."""
    name = "watch" if watch else "list"
    proc = DaemonProc(
        name, workdir, policy, cluster.admin_kubeconfig,
        PH_WATCH=str(watch).lower(), PH_LEADER_ELECTION="false", PH_HTTP_AUTH="off",
        PH_LOG_FORMAT="json", PH_RECONCILE_INTERVAL=f"{interval:g}", PH_NAMESPACE=NS,
    )  # fmt: skip
    proc.start()
    assert proc.popen is not None
    rss = Rss(proc.popen.pid)
    sampler = threading.Thread(target=rss.run, daemon=True)
    sampler.start()
    try:
        yield Daemon(proc), rss
    finally:
        rss.stop.set()
        proc.stop()
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(proc.log, keep / proc.log.name)


def steady(
    daemon: Daemon, rss: Rss, kube: Kube, runs: int, interval: float, baseline: Counts
) -> dict[str, Any]:
    """The first reconcile, then `runs` after WARMUP: their times, the daemon's RSS peak and the
    API server's counts over them less `baseline` (the other clients' rate per second)."""
    first = daemon.wait_records(1, 1800)[0]
    mark = daemon.wait_records(WARMUP, 600)
    opened, counted = time.monotonic(), server_counts(kube)
    records = daemon.wait_records(len(mark) + runs, 60 + 60 * runs * interval)[len(mark) :]
    closed, window = time.monotonic(), minus(server_counts(kube), counted)
    others = {k: baseline.get(k, 0.0) * (closed - opened) for k in window}
    times = sorted(r["ms"] for r in records)
    return {
        "first": first["ms"],
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "per": {k: (window[k] - others[k]) / len(records) for k in window},
        "raw": {k: v / len(records) for k, v in window.items()},
        "rss": rss.peak_since(opened),
        "problems": [r["message"] for r in [first, *records] if r.get("level") != "INFO"],
        "writes": sum(p.get("action") == "scaled" for r in records for p in r.get("pools", [])),
    }


def reflected(daemon: Daemon, core: Any, interval: float) -> dict[str, int]:
    """Reconciles until a node added to `pool=c`, then one of its nodes cordoned, showed in the
    probe's count; both are undone afterwards, whatever happened."""
    added = f"probe-{int(time.time())}"
    timeout = 120 + 20 * interval

    def cordon(value: bool | None) -> Callable[[], None]:
        return lambda: core.patch_node(CORDONED, {"spec": {"unschedulable": value}})

    def add() -> None:
        core.create_node(node_body(added, 8, "32Gi", {"pool": PROBE_SELECTOR}))

    try:
        return {
            "added": daemon.reconciles_until(add, 2, timeout),
            "cordoned": daemon.reconciles_until(cordon(True), 1, timeout),
        }
    finally:
        cordon(None)()
        try:
            core.delete_node(added)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise


def measure(
    cluster: Cluster, workdir: Path, policy: Path, watch: bool, args: argparse.Namespace,
    baseline: Counts,
) -> dict[str, Any]:  # fmt: skip
    """One design: see the module docstring. `baseline` is the other clients' rate (per second)."""
    kube = Kube(cluster.api())
    core = kubernetes.client.CoreV1Api(cluster.api())
    with running(cluster, workdir, policy, watch, args.interval, args.logs) as (daemon, rss):
        found = steady(daemon, rss, kube, args.runs, args.interval, baseline)
        found.update(reflected(daemon, core, args.interval))
        found["hwm"] = rss.field_kib("VmHWM") / 1024
        found["caches"] = daemon.last_run().get("caches") or []
    return {"design": "watch" if watch else "list", **found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument(
        "--settle-minutes", type=float, default=20.0, help="the longest wait for the pods to run"
    )
    parser.add_argument("--runs", type=int, default=20, help="steady-state reconciles measured")
    parser.add_argument("--design", choices=("list", "watch", "both"), default="both")
    parser.add_argument(
        "--interval", type=float, default=5.0, help="the daemon's PH_RECONCILE_INTERVAL"
    )
    parser.add_argument("--logs", type=Path, help="a directory to copy the daemons' logs into")
    args = parser.parse_args()
    if args.pools < 2 or args.nodes < 3 or args.runs < 1:
        parser.error("--pools needs 2 or more, --nodes 3 or more and --runs 1 or more")
    bins = bins_dir()
    if missing_binaries(bins):
        print(f"missing {missing_binaries(bins)} in {bins}: run make e2e-bins", file=sys.stderr)
        return 2
    designs = [False, True] if args.design == "both" else [args.design == "watch"]
    with (
        tempfile.TemporaryDirectory() as tmp,
        Cluster(Path(tmp) / "cluster", bins, node_ready_delay=1.0) as cluster,
    ):
        try:
            built = {"nodes": create_nodes(cluster, args.nodes)}
            api = cluster.api()
            for namespace in (NS, APPS):
                ensure_namespace(api, namespace)
            kube = Kube(api)
            for i in range(args.pools - 1):
                kube.apply(deployment(f"pool-{i}-placeholder", NS, 0, "1", f"pool-{i}"))
            kube.apply(deployment(f"{PROBE}-placeholder", NS, 0, "1", PROBE))
            pods, built["pods"] = settle_pods(cluster, args.pods, args.settle_minutes)
            probe_nodes = len(range(SELECTORS.index(PROBE_SELECTOR), args.nodes, len(SELECTORS)))
            policy = write_policy(Path(tmp) / "policy.yaml", args.pools, probe_nodes)
            seconds = WARMUP * args.interval + args.runs * args.interval
            progress(f"baseline: {seconds:g} s with no daemon running")
            before = server_counts(kube)
            time.sleep(seconds)
            baseline = {k: v / seconds for k, v in minus(server_counts(kube), before).items()}
            results = []
            for watch in designs:
                progress(f"measuring the {'watch' if watch else 'list'} design ...")
                results.append(measure(cluster, Path(tmp), policy, watch, args, baseline))
            node_bytes = len(kube.raw("GET", "/api/v1/nodes/node-0"))
        except BaseException:
            print(cluster.logs(), file=sys.stderr)
            raise
    report(args, built, pods, node_bytes, baseline, results)
    return 0 if not any(r["problems"] for r in results) else 1


def named(counts: Counts, scale: float = 1.0) -> str:
    """The non-zero (verb, resource) counts, times `scale`, as text."""
    shown = {k: n * scale for k, n in counts.items()}
    return ", ".join(f"{v} {r} {n:.2f}" for (v, r), n in shown.items() if abs(n) >= 0.005)


def report(
    args: argparse.Namespace, built: dict[str, float], pods: int, node_bytes: int,
    baseline: Counts, results: list[dict[str, Any]],
) -> None:  # fmt: skip
    print(
        f"{args.pools} pools over 3 node selectors, {args.nodes} kwok nodes of "
        f"{node_bytes / 1000:.1f} KB, {pods} running app pods, real kube-apiserver on loopback; "
        f"cluster built in {built['nodes']:.0f} s (nodes Ready) + {built['pods']:.0f} s (pods)"
    )
    print(
        f"  the daemon as its own process, PH_RECONCILE_INTERVAL={args.interval:g}; "
        f"steady window: {args.runs} reconciles after {WARMUP}"
    )
    print(
        f"  {'design':<7} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'RSS MiB':>8} "
        f"{'HWM MiB':>8} {'LIST/rec':>9} {'GET/rec':>8} {'added':>6} {'cordoned':>9} {'served':>7}"
    )
    for r in results:
        lists = sum(v for (verb, _), v in r["per"].items() if verb == "LIST")
        gets = sum(v for (verb, _), v in r["per"].items() if verb == "GET")
        print(
            f"  {r['design']:<7} {r['first']:>9} {r['p50']:>8.0f} {r['p95']:>8.0f} "
            f"{r['rss']:>8.0f} {r['hwm']:>8.0f} {lists:>9.2f} {gets:>8.2f} {r['added']:>6} "
            f"{r['cordoned']:>9} {'NO' if r['problems'] else 'yes':>7}"
        )
    for r in results:
        print(
            f"  {r['design']}: per reconcile, less the baseline: {named(r['per']) or 'none'} "
            f"({r['writes']} target(s) scaled in the window)"
        )
        print(f"  {r['design']}: per reconcile, as counted: {named(r['raw']) or 'none'}")
        for kind in sorted({c["query"].split()[0] for c in r["caches"]}):
            of = [c for c in r["caches"] if c["query"].split()[0] == kind]
            print(
                f"    {len(of)} cache(s) of {kind}: {sum(c['objects'] for c in of)} objects, "
                f"{sum(c['relists'] for c in of)} list(s) in all"
            )
        for problem in r["problems"][:3]:
            print(f"    not served: {problem[:400]}")
    print(f"  baseline (no daemon), per minute: {named(baseline, 60) or 'none'}")
    print(
        "  (requests: the API server's apiserver_request_total over the steady window less the "
        "baseline's rate, per reconcile; added/cordoned: reconciles until /last-run showed it, "
        "1 = the next; RSS: the daemon's VmRSS peak in the steady window, HWM its VmHWM)"
    )


if __name__ == "__main__":
    sys.exit(main())
