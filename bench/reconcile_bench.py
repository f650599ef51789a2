"""Reconcile benchmark: 10 forecasting pools against a real Prometheus and the fake kube-apiserver.

A real `prometheus` (Debian's, started by `tests/promfixture.py` with 28+ days of
nab_aws_asg_cpu_5min backfilled) serves the demand; every pool has a schedule window, a
proportional rule over a labelled node set and a Prophet forecast carrying the conditional burst
model. So each reconcile lists nodes, reads each Deployment and its /scale, reads each pool's
latest observations from Prometheus (one short range query) and predicts the burst allowance,
then plans with all three components, through the real clients over loopback HTTP.

It prints: the refit with the burst model next to the same refit with the time-of-day table
(target: at most 2 s more per pool), the first reconcile (every pool scaled), the median of
`--runs` steady-state reconciles (target: under 200 ms), and the peak RSS (target: 400 MiB).

    .venv/bin/python bench/reconcile_bench.py [--runs 50] [--pools 10]
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

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_apiserver import FakeApiServer  # noqa: E402
from promfixture import DEMAND, missing_binaries, prometheus_with_demand  # noqa: E402

from predictive_headroom.daemon.loop import Daemon  # noqa: E402
from predictive_headroom.daemon.wiring import Edges  # noqa: E402
from predictive_headroom.forecast.forecaster import ProphetForecaster  # noqa: E402
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader  # noqa: E402
from predictive_headroom.kube.targets import TargetActuator  # noqa: E402
from predictive_headroom.policy.load import load_policy  # noqa: E402
from predictive_headroom.policy.settings import Settings  # noqa: E402
from predictive_headroom.sources.prometheus import PrometheusSource  # noqa: E402

TARGET_MS = 200.0
NS = "placeholders"


RSS_TARGET_MIB = 400.0
REFIT_DELTA_TARGET_S = 2.0


def write_policy(path: Path, pools: int, burst_model: str = "quantile") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "pools": [
                    {
                        "name": f"pool-{i}",
                        "target": {"namespace": NS, "name": f"pool-{i}-placeholder"},
                        "minReplicas": 1,
                        "maxReplicas": 50,
                        "leadTime": "10m",
                        "schedules": [
                            {
                                "name": "business-hours",
                                "timezone": "Europe/Berlin",
                                "start": "0 8 * * 1-5",
                                "end": "0 18 * * 1-5",
                                "desiredReplicas": 2,
                            }
                        ],
                        "proportional": {
                            "linear": {"nodesPerReplica": 2, "coresPerReplica": 16},
                            "nodeSelector": {"pool": f"p{i % 3}"},
                        },
                        "forecast": {
                            "query": f"{DEMAND} * {1 + i / 10:g}",
                            "demandPerReplica": 5,
                            "burstModel": burst_model,
                        },
                    }
                    for i in range(pools)
                ]
            }
        )
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pools", type=int, default=10)
    args = parser.parse_args()
    if missing := missing_binaries():
        print(
            f"needs {' and '.join(missing)} on PATH (apt-get install -y --no-install-recommends prometheus)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING)
    with (
        tempfile.TemporaryDirectory() as tmp,
        prometheus_with_demand(Path(tmp), time.time()) as prom,
        FakeApiServer() as server,
    ):
        for n in range(12):
            server.add_node(f"node-{n}", cpu="8", labels={"pool": f"p{n % 3}"})
        for i in range(args.pools):
            server.add_deployment(NS, f"pool-{i}-placeholder", 0)
        api = server.api_client()
        options = CallOptions(timeout=5.0, instance="bench")
        source = PrometheusSource(prom.url, Settings())
        refits = {}
        for mode in ("profile", "quantile"):
            path = write_policy(Path(tmp) / f"policy-{mode}.yaml", args.pools, mode)
            edges = Edges(
                forecaster=ProphetForecaster(),
                actuator=TargetActuator(api, options),
                cluster=KubeClusterReader(api, options),
                source=source,
            )
            daemon = Daemon(path, load_policy(path), edges)
            started = time.perf_counter()
            assert daemon.refit(), "refit failed"
            refits[mode] = time.perf_counter() - started
        started = time.perf_counter()
        first = daemon.reconcile()
        first_ms = (time.perf_counter() - started) * 1000
        assert first.ok and all(o.action == "scaled" for o in first.pools), first.summary()
        sources = {o.plan.details.get("burst_source") for o in first.pools if o.plan is not None}
        assert sources == {"model"}, f"the burst model was not used at reconcile: {sources}"
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = daemon.reconcile()
            times.append((time.perf_counter() - started) * 1000)
            assert result.ok, result.summary()
    median = statistics.median(times)
    p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
    delta = (refits["quantile"] - refits["profile"]) / args.pools
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = median < TARGET_MS and delta <= REFIT_DELTA_TARGET_S and rss <= RSS_TARGET_MIB
    print(
        f"{args.pools} forecasting pools, real Prometheus ({prom.url}) and the fake apiserver ({len(server.requests())} API requests in all)"
    )
    print(
        f"  refit: {refits['profile']:.1f} s with the time-of-day table, {refits['quantile']:.1f} s with the burst model "
        f"({delta:+.2f} s per pool; target: at most +{REFIT_DELTA_TARGET_S:g} s)"
    )
    print(f"  first reconcile (every pool scaled, fresh read + predict each): {first_ms:.1f} ms")
    print(
        f"  steady state over {args.runs} runs: median {median:.1f} ms, p95 {p95:.1f} ms (target: median < {TARGET_MS:.0f} ms)"
    )
    print(
        f"  peak RSS: {rss:.0f} MiB (target: {RSS_TARGET_MIB:.0f} MiB) -> {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
