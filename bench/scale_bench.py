"""Scale benchmark: 30 pools against 1,000 nodes on the fake kube-apiserver, floors only.

Every pool has a minimum, a schedule window and a proportional rule; the pools share three node
selectors (all nodes, `pool=a`, `pool=b`), like teams sizing their placeholders from the same node
groups. Nodes carry 50 `status.images` entries each, about the size of a real node object. Each
answer of the fake apiserver is held `--latency` seconds, a round trip to a real apiserver.

It prints, for the first reconcile (every pool scaled) and the median of `--runs` steady-state
reconciles: the wall time, the API requests sent and the bytes the client read. With `--watch`
the nodes and the targets are read through list-and-watch caches (`kube.watched`, the daemon's
default) instead of a LIST per selector and a GET per target per reconcile; the watches' bytes
(events and bookmarks) count as read.

    .venv/bin/python bench/scale_bench.py [--pools 30] [--nodes 1000] [--runs 5] [--latency 0.01] [--watch]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_apiserver import FakeApiServer  # noqa: E402

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

NS = "placeholders"
SELECTORS = ({}, {"pool": "a"}, {"pool": "b"})


class NoForecaster:
    """The pools have no forecast; the daemon still wants a forecaster."""

    def fit(self, *args: object) -> None:
        raise AssertionError("no pool forecasts")


def bench_pool(name: str, linear: dict[str, int], selector: dict[str, str]) -> dict[str, Any]:
    """One bench pool: a minimum, a schedule window always open, a linear proportional rule over
    the nodes `selector` picks (all nodes when empty)."""
    return {
        "name": name,
        "target": {"namespace": NS, "name": f"{name}-placeholder"},
        "minReplicas": 1,
        "maxReplicas": 500,
        "schedules": [
            {
                "name": "always",
                "timezone": "UTC",
                "start": "0 0 * * *",
                "end": "59 23 * * *",
                "desiredReplicas": 2,
            }
        ],
        "proportional": {"linear": linear, **({"nodeSelector": selector} if selector else {})},
    }


def write_policy(path: Path, pools: int) -> Path:
    linear = {"coresPerReplica": 64}
    body = [
        bench_pool(f"pool-{i}", {"nodesPerReplica": 20 + i, **linear}, SELECTORS[i % 3])
        for i in range(pools)
    ]
    path.write_text(yaml.safe_dump({"pools": body}))
    return path


def measure(daemon: Daemon, server: FakeApiServer) -> tuple[float, int, int, bool]:
    """(milliseconds, requests, bytes read, every pool ok) of one reconcile."""
    requests, read = len(server.requests()), server.bytes_sent
    started = time.perf_counter()
    result = daemon.reconcile()
    ms = (time.perf_counter() - started) * 1000
    return ms, len(server.requests()) - requests, server.bytes_sent - read, result.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--latency", type=float, default=0.01, help="seconds each API answer is held"
    )
    parser.add_argument("--watch", action="store_true", help="read nodes through watched caches")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    caches = Caches() if args.watch else None
    with tempfile.TemporaryDirectory() as tmp, FakeApiServer() as server:
        for n in range(args.nodes):
            server.add_node(f"node-{n}", cpu="8", labels={"pool": "ab"[n % 2]}, images=50)
        for i in range(args.pools):
            server.add_deployment(NS, f"pool-{i}-placeholder", 0)
        if args.latency > 0:
            server.delay("*", ".*", args.latency)
        api = server.api_client()
        options = CallOptions(timeout=30.0, instance="bench", events=False)
        path = write_policy(Path(tmp) / "policy.yaml", args.pools)
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
        first = measure(daemon, server)
        steady = [measure(daemon, server) for _ in range(args.runs)]
        if caches is not None:
            caches.stop()
    ok = first[3] and all(s[3] for s in steady)
    median = statistics.median(s[0] for s in steady)
    print(
        f"{args.pools} pools (3 node selectors), {args.nodes} nodes of ~13 KB, "
        f"{args.latency * 1000:g} ms per API answer, "
        + ("nodes read through watched caches" if args.watch else "nodes LISTed every reconcile")
    )
    print(
        f"  first reconcile: {first[0]:.0f} ms, {first[1]} API requests, "
        f"{first[2] / 1e6:.1f} MB read"
    )
    print(
        f"  steady state over {args.runs} runs: median {median:.0f} ms, "
        f"{statistics.median(s[1] for s in steady):.0f} API requests, "
        f"{statistics.median(s[2] for s in steady) / 1e6:.1f} MB read per reconcile"
    )
    print(f"  every pool served: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
