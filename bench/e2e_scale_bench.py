"""Scale in the real stack: 30 pools against 1,000 kwok nodes and 10,000 running pods on a real
kube-apiserver (etcd, scheduler, controller-manager, kwok from `make e2e-bins`), the same policy
as `bench/scale_bench.py` (its stand-in figures are printed beside for comparison).

It prints, for the first reconcile (every pool scaled) and the median of `--runs` steady-state
reconciles: the wall time, the API requests sent and the bytes the client read; then the RSS of
this process (the daemon's objects and client, like a daemon's) and how long the cluster took to
build. Needs `make e2e-bins` first.

    .venv/bin/python bench/e2e_scale_bench.py [--pools 30] [--nodes 1000] [--pods 10000] [--runs 5]
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
from scale_bench import NS, NoForecaster, write_policy  # noqa: E402

from predictive_headroom.daemon.loop import Daemon  # noqa: E402
from predictive_headroom.daemon.wiring import Edges  # noqa: E402
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader  # noqa: E402
from predictive_headroom.kube.targets import TargetActuator  # noqa: E402
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
            self.bytes += len(response.data or b"")
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


def measure(daemon: Daemon, counter: Counting) -> tuple[float, int, int, bool]:
    requests, read = counter.requests, counter.bytes
    started = time.perf_counter()
    result = daemon.reconcile()
    ms = (time.perf_counter() - started) * 1000
    return ms, counter.requests - requests, counter.bytes - read, result.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bins = bins_dir()
    if missing_binaries(bins):
        print(f"missing {missing_binaries(bins)} in {bins}: run make e2e-bins", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory() as tmp,
        Cluster(Path(tmp) / "cluster", bins, node_ready_delay=1.0) as cluster,
    ):
        if True:
            try:
                timings = build_cluster(cluster, args.nodes, args.pods, args.pools)
                api = cluster.api()
                counter = Counting(api)
                options = CallOptions(timeout=30.0, instance="bench", events=False)
                path = write_policy(Path(tmp) / "policy.yaml", args.pools)
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                edges = Edges(
                    forecaster=NoForecaster(),  # type: ignore[arg-type]
                    actuator=TargetActuator(api, options),
                    cluster=KubeClusterReader(api, options),
                )
                daemon = Daemon(path, load_policy(path), edges)
                first = measure(daemon, counter)
                steady = [measure(daemon, counter) for _ in range(args.runs)]
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                node_bytes = len(Kube(api).raw("GET", "/api/v1/nodes/node-0"))
            except BaseException:
                print(cluster.logs(), file=sys.stderr)
                raise
    ok = first[3] and all(s[3] for s in steady)
    median = statistics.median(s[0] for s in steady)
    print(
        f"{args.pools} pools (3 node selectors), {args.nodes} kwok nodes of {node_bytes / 1000:.1f} KB, "
        f"{args.pods} running pods, real kube-apiserver v1.34.9 on loopback"
    )
    print(
        f"  cluster built in {timings['nodes']:.0f} s (nodes Ready) + {timings['pods']:.0f} s "
        "(pods running)"
    )
    print(
        f"  first reconcile: {first[0]:.0f} ms, {first[1]} API requests, "
        f"{first[2] / 1e6:.2f} MB read"
    )
    print(
        f"  steady state over {args.runs} runs: median {median:.0f} ms, "
        f"{statistics.median(s[1] for s in steady):.0f} API requests, "
        f"{statistics.median(s[2] for s in steady) / 1e6:.2f} MB read per reconcile"
    )
    print(f"  RSS: {rss / 1024:.0f} MiB peak ({rss_before / 1024:.0f} MiB before the daemon)")
    print(f"  every pool served: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
