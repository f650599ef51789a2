"""Reconcile benchmark: one reconcile (no refit) of 10 pools against the fake kube-apiserver.

Each pool has a schedule window, a proportional rule over a labelled node set and a fitted
forecast, so every reconcile lists nodes, reads the Deployment and its /scale, and plans with
all three components, through the real `kubernetes` client over loopback HTTP. It times the
first reconcile (every pool is scaled: re-read, PATCH, Event) and then `--runs` steady-state
reconciles (nothing to change), and prints the medians. Target: median under 200 ms.

    .venv/bin/python bench/reconcile_bench.py [--runs 50] [--pools 10]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_apiserver import FakeApiServer  # noqa: E402

from predictive_headroom.core.series import Forecast, History, NoForecast  # noqa: E402
from predictive_headroom.daemon.loop import Daemon  # noqa: E402
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader  # noqa: E402
from predictive_headroom.kube.targets import TargetActuator  # noqa: E402
from predictive_headroom.policy.config import ForecastSpec  # noqa: E402
from predictive_headroom.policy.load import load_policy  # noqa: E402

TARGET_MS = 200.0
NS = "placeholders"


class FlatSource:
    """A day of 5-minute demand; the bench times reconcile, not fetching."""

    def history(self, spec: ForecastSpec, end: float) -> History:
        times = end - np.arange(288)[::-1] * 300.0
        return History(times, 50 + 10 * np.sin(times / 3600.0), "bench")


class RisingForecaster:
    """A forecast rising 4 demand units per lead time, over the spec's horizon."""

    def fit(self, history: History, spec: ForecastSpec, lead_seconds: float, now: float) -> Forecast | NoForecast:
        times = now + np.arange(0.0, spec.horizon.total_seconds() + 1, spec.step.total_seconds())
        yhat = 50 + 4 * (times - now) / lead_seconds
        return Forecast(times, yhat, yhat - 5, yhat + 5, "bench", history.end)


def write_policy(path: Path, pools: int) -> Path:
    path.write_text(yaml.safe_dump({"pools": [{
        "name": f"pool-{i}",
        "target": {"namespace": NS, "name": f"pool-{i}-placeholder"},
        "minReplicas": 1,
        "maxReplicas": 50,
        "leadTime": "10m",
        "schedules": [{"name": "business-hours", "timezone": "Europe/Berlin", "start": "0 8 * * 1-5",
                       "end": "0 18 * * 1-5", "desiredReplicas": 2}],
        "proportional": {"linear": {"nodesPerReplica": 2, "coresPerReplica": 16}, "nodeSelector": {"pool": f"p{i % 3}"}},
        "forecast": {"query": f'sum(rate(http_requests_total{{pool="p{i}"}}[5m]))', "demandPerReplica": 1},
    } for i in range(pools)]}))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pools", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with FakeApiServer() as server:
        for n in range(12):
            server.add_node(f"node-{n}", cpu="8", labels={"pool": f"p{n % 3}"})
        for i in range(args.pools):
            server.add_deployment(NS, f"pool-{i}-placeholder", 0)
        api = server.api_client()
        options = CallOptions(timeout=5.0, instance="bench")
        with tempfile.TemporaryDirectory() as tmp:
            policy_path = write_policy(Path(tmp) / "policy.yaml", args.pools)
            daemon = Daemon(policy_path, load_policy(policy_path), source=FlatSource(), forecaster=RisingForecaster(),
                            actuator=TargetActuator(api, options), cluster=KubeClusterReader(api, options))
            daemon.refit()  # not timed: the bench measures reconcile alone
            started = time.perf_counter()
            first = daemon.reconcile()
            first_ms = (time.perf_counter() - started) * 1000
            assert first.ok and all(o.action == "scaled" for o in first.pools), first.summary()
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                result = daemon.reconcile()
                times.append((time.perf_counter() - started) * 1000)
                assert result.ok and all(o.action == "unchanged" for o in result.pools), result.summary()
    median = statistics.median(times)
    p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
    requests = len(server.requests())
    print(f"reconcile of {args.pools} pools against the fake apiserver ({requests} API requests in all)")
    print(f"  first reconcile (every pool scaled): {first_ms:.1f} ms")
    print(f"  steady state over {args.runs} runs: median {median:.1f} ms, p95 {p95:.1f} ms "
          f"(target: median < {TARGET_MS:.0f} ms) -> {'OK' if median < TARGET_MS else 'TOO SLOW'}")
    return 0 if median < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
