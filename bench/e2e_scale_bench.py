"""Scale in the real stack: 30 pools against 1,000 kwok nodes and 10,000 running pods on a real
kube-apiserver (etcd, scheduler, controller-manager, kwok from `make e2e-bins`), the same policy
as `bench/scale_bench.py` (its stand-in figures are printed beside for comparison).

It prints, for the first reconcile (every pool scaled) and the median of `--runs` steady-state
reconciles: the wall time, the API requests sent and the bytes the client read; then the RSS of
this process (the daemon's objects and client, like a daemon's) and how long the cluster took to
build. Needs `make e2e-bins` first.

`--design list` reads the nodes with a LIST per selector and each target with GETs per reconcile
(`PH_WATCH=false`), `--design watch` both through list-and-watch caches (the default since issue 47), `--design both` (the
default) runs one daemon of each on the same cluster, one after the other, and prints them side by
side, with the LISTs and WATCHes of nodes the API server itself counted
(`apiserver_request_total`) over the steady-state runs and the bytes the watches streamed.

    .venv/bin/python bench/e2e_scale_bench.py [--pools 30] [--nodes 1000] [--pods 10000] [--runs 5]
                                              [--design list|watch|both] [--interval 5]
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "e2e"), str(REPO / "bench")]

import kubernetes.client  # noqa: E402
from cluster import Cluster, bins_dir, missing_binaries, node_body  # noqa: E402
from kube import Kube, ensure_namespace, wait_for  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from scale_bench import NS, NoForecaster, write_policy  # noqa: E402

from predictive_headroom.daemon.loop import Daemon  # noqa: E402
from predictive_headroom.daemon.wiring import Edges  # noqa: E402
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader  # noqa: E402
from predictive_headroom.kube.targets import TargetActuator  # noqa: E402
from predictive_headroom.kube.watched import (  # noqa: E402
    Caches,
    WatchedClusterReader,
    WatchedTargets,
)
from predictive_headroom.policy.load import load_policy  # noqa: E402

APPS = "scale-apps"


class Counting:
    """Counts the requests an ApiClient sends and the bytes it reads (wraps its urllib3 pool)."""

    def __init__(self, api: Any) -> None:
        self.requests = 0
        self.bytes = 0
        pool = api.rest_client.pool_manager
        original = pool.request

        def request(*args: Any, **kwargs: Any) -> Any:
            response = original(*args, **kwargs)
            self.requests += 1
            if "watch=true" not in str(args[1] if len(args) > 1 else kwargs.get("url", "")):
                self.bytes += len(response.data or b"")  # a watch streams: counted by the server
            return response

        pool.request = request


def deployment(name: str, namespace: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
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


def build_cluster(cluster: Cluster, nodes: int, pods: int, pools: int) -> dict[str, float]:
    """1,000 nodes (labelled pool=a/b), the placeholder Deployments and `pods` app pods, running."""
    api = cluster.api()
    core = kubernetes.client.CoreV1Api(api)
    timings: dict[str, float] = {}
    started = time.monotonic()
    for n in range(nodes):
        core.create_node(node_body(f"node-{n}", 8, "32Gi", {"pool": "ab"[n % 2]}))
    wait_for(
        lambda: sum(1 for x in core.list_node().items if not x.spec.taints) >= nodes,
        600,
        f"{nodes} nodes Ready",
        every=2,
    )
    timings["nodes"] = time.monotonic() - started
    kube = Kube(api)
    ensure_namespace(api, NS)
    ensure_namespace(api, APPS)
    for i in range(pools):
        kube.apply(deployment(f"pool-{i}-placeholder", NS, 0, "1"))
    started = time.monotonic()
    per = pods // 20
    for i in range(20):
        kube.apply(deployment(f"app-{i}", APPS, per, "100m"))

    def running() -> int:
        items = core.list_namespaced_pod(APPS, field_selector="status.phase=Running").items
        return len(items)

    wait_for(lambda: running() >= per * 20, 1800, f"{per * 20} app pods running", every=5)
    timings["pods"] = time.monotonic() - started
    return timings


def node_requests(api: Any) -> dict[str, float]:
    """The API server's own count of LIST and WATCH requests on nodes so far (all clients)."""
    text = Kube(api).raw("GET", "/metrics").decode()
    found = {"LIST": 0.0, "WATCH": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == "apiserver_request_total"
                and labels.get("resource") == "nodes"
                and labels.get("verb") in found
            ):
                found[labels["verb"]] += sample.value
    return found


def measure(daemon: Daemon, counter: Counting) -> tuple[float, int, int, bool]:
    requests, read = counter.requests, counter.bytes
    started = time.perf_counter()
    result = daemon.reconcile()
    ms = (time.perf_counter() - started) * 1000
    return ms, counter.requests - requests, counter.bytes - read, result.ok


def run_design(watch: bool, api: Any, path: Path, runs: int, interval: float) -> dict[str, Any]:
    """One daemon of the design on the cluster: its first and steady-state reconciles (one every
    `interval` seconds, as the daemon runs), and what the API server counted meanwhile."""
    counter = Counting(api)
    options = CallOptions(timeout=30.0, instance="bench", events=False)
    caches = Caches() if watch else None
    edges = Edges(
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, options)
        if caches is None
        else WatchedTargets(TargetActuator(api, options), caches, api),
        cluster=KubeClusterReader(api, options)
        if caches is None
        else WatchedClusterReader(KubeClusterReader(api, options), caches),
        caches=caches,
    )
    daemon = Daemon(path, load_policy(path), edges)
    try:
        first = measure(daemon, counter)
        server_before = node_requests(api)
        steady = []
        for _ in range(runs):
            time.sleep(interval)
            steady.append(measure(daemon, counter))
        server_after = node_requests(api)
        cached = caches.status() if caches is not None else []
    finally:
        if caches is not None:
            caches.stop()
    times = sorted(s[0] for s in steady)
    return {
        "design": "watch" if watch else "list",
        "first": first,
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "requests": statistics.median(s[1] for s in steady),
        "bytes": statistics.median(s[2] for s in steady),
        "server": {v: (server_after[v] - server_before[v]) / runs for v in server_after},
        "ok": first[3] and all(s[3] for s in steady),
        "caches": cached,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--design", choices=("list", "watch", "both"), default="both")
    parser.add_argument(
        "--interval", type=float, default=5.0, help="seconds between steady-state reconciles"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
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
            timings = build_cluster(cluster, args.nodes, args.pods, args.pools)
            api = cluster.api()
            path = write_policy(Path(tmp) / "policy.yaml", args.pools)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            results = []
            for watch in designs:
                print(f"measuring the {'watch' if watch else 'list'} design ...", file=sys.stderr)
                results.append(run_design(watch, api, path, args.runs, args.interval))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            node_bytes = len(Kube(api).raw("GET", "/api/v1/nodes/node-0"))
        except BaseException:
            print(cluster.logs(), file=sys.stderr)
            raise
    report(args, timings, node_bytes, results, rss_before, rss)
    return 0 if all(r["ok"] for r in results) else 1


def report(
    args: argparse.Namespace,
    timings: dict[str, float],
    node_bytes: int,
    results: list[dict[str, Any]],
    rss_before: int,
    rss: int,
) -> None:
    print(
        f"{args.pools} pools (3 node selectors), {args.nodes} kwok nodes of {node_bytes / 1000:.1f} KB, "
        f"{args.pods} running pods, real kube-apiserver v1.34.9 on loopback"
    )
    print(
        f"  cluster built in {timings['nodes']:.0f} s (nodes Ready) + {timings['pods']:.0f} s "
        f"(pods running); steady-state reconciles every {args.interval:g} s, {args.runs} of them"
    )
    print(
        f"  {'design':<7} {'first ms':>9} {'first req':>10} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'req/rec':>8} {'MB/rec':>7} {'LIST nodes/rec':>15} {'WATCH nodes/rec':>16} {'served':>7}"
    )
    for r in results:
        first, server = r["first"], r["server"]
        print(
            f"  {r['design']:<7} {first[0]:>9.0f} {first[1]:>10} {r['p50']:>8.0f} {r['p95']:>8.0f} "
            f"{r['requests']:>8.0f} {r['bytes'] / 1e6:>7.2f} {server['LIST']:>15.1f} "
            f"{server['WATCH']:>16.1f} {'yes' if r['ok'] else 'NO':>7}"
        )
        for cache in r["caches"]:
            print(
                f"    cache {cache['query']}: {cache['objects']} objects, {cache['relists']} list(s), "
                f"age {cache['age_seconds']} s"
            )
    print(
        f"  bench process RSS: {rss / 1024:.0f} MiB peak ({rss_before / 1024:.0f} MiB before the daemons)"
    )
    print(
        "  (requests and MB per reconcile are the daemon client's; the LIST/WATCH columns are the "
        "API server's own counts, every client included)"
    )


if __name__ == "__main__":
    sys.exit(main())
