"""The fault table of issue 39, one section per row: faults that used to stop the floors (slow pod
lists, malformed quantities, one outlier sample, a reconnecting slow client) and odd answers.

They run against the test API server (`fake_apiserver`), the daemon's own HTTP server and fake
clocks; each says the figure the issue measured and asserts the behaviour a user sees now."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from fake_apiserver import FakeApiServer

from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.load import load_policy

NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
NOW = datetime(2026, 11, 23, 8, 52, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class NoForecaster:
    def fit(self, *args: object) -> None:  # pragma: no cover - no pool forecasts here
        raise AssertionError("no pool forecasts in these tests")


def write_policy(path: Path, **extra: object) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 2000,
        "leadTime": "5m",
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}, "nodeSelector": {"pool": "web"}},
        **extra,
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


def make_daemon(
    config: Path,
    server: FakeApiServer,
    clock: Clock,
    read_pods: bool = True,
    interval: float = 60.0,
    options: CallOptions = FAST,
) -> Daemon:
    api = server.api_client()
    return Daemon(
        config,
        load_policy(config),
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, options),
        cluster=KubeClusterReader(api, options),
        clock=clock,
        pods=KubePodReader(api, options),
        interval=interval,
        loop_settings=LoopSettings(observe_placeholders=False, read_node_pods=read_pods),
    )


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, "web-placeholder", 0)
        yield fake


# -- 2. one malformed node quantity blocks a pool ----------------------------------------------------

LINEAR = {"linear": {"coresPerReplica": 4, "min": 0}}


@pytest.mark.parametrize("cpu", ["NaN", "Infinity", "1e400", "abc", "-8"])
@pytest.mark.parametrize(
    "case",
    ["coresPerReplica", "spot", "leaving without readPods"],
)
def test_one_node_with_a_malformed_cpu_is_left_out_named_and_the_pool_plans_on_the_rest(
    tmp_path, server, caplog, cpu, case
) -> None:
    """Issue 39 row 2: `NaN`, `Infinity`, `1e400` made every reconcile fail (`cannot convert float
    NaN to integer`, `OverflowError`); `abc` failed the node count with the node unnamed."""
    labels = {"pool": "web"}
    if case == "spot":
        labels["karpenter.sh/capacity-type"] = "spot"
    for i in range(3):
        server.add_node(f"n-{i}", cpu="8", labels=labels, allocatable={"memory": "32Gi"})
    server.add_node("bad-1", cpu=cpu, labels=labels, allocatable={"memory": "32Gi"})
    extra: dict[str, object] = {"minReplicas": 1}
    if case == "coresPerReplica":
        extra["proportional"] = LINEAR
    if case == "spot":
        extra["disruption"] = {"interruptionRate": "5%/hour"}
    if case == "leaving without readPods":
        server.taint_node("bad-1", "karpenter.sh/disrupted")
        server.taint_node("n-0", "karpenter.sh/disrupted")
    daemon = make_daemon(
        write_policy(tmp_path / "p.yaml", **extra), server, Clock(NOW), read_pods=False
    )
    with caplog.at_level(logging.WARNING):
        result = daemon.reconcile()
    (pool,) = result.pools
    assert pool.error is None and pool.action == "scaled", pool.to_dict()
    plan = pool.plan
    assert plan is not None
    warned = [r.getMessage() for r in caplog.records if "bad-1" in r.getMessage()]
    assert warned and "status.allocatable.cpu" in warned[0] and repr(cpu) in warned[0]
    if case == "coresPerReplica":  # 3 good nodes of 8 cores: 24 / 4
        assert plan.components["proportional"] == 6
    if case == "spot":  # the reserve is computed on the good nodes: 8 placeholders a node
        assert plan.details["spot"] is True and plan.components["disruption"] in (0, 8)
    if case == "leaving without readPods":  # n-0 counts as full (8); bad-1 is not counted
        assert plan.details["leaving"] == {"n-0": "karpenter.sh/disrupted"}
        assert plan.components["disruption"] == 8
    assert server.replicas(NS, "web-placeholder") == plan.desired >= 1
    # the warning is said once per node and problem, not at every reconcile
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        daemon.reconcile()
    assert not [r for r in caplog.records if "bad-1" in r.getMessage()]


def test_a_pod_request_of_nan_is_left_out_with_the_pod_and_field_named(
    tmp_path, server, caplog
) -> None:
    server.add_node("n-0", cpu="8", labels={"pool": "web"}, allocatable={"memory": "32Gi"})
    server.add_pod("shop", "cart-1", "n-0", {"cpu": "2", "memory": "1Gi"}, "ReplicaSet")
    server.add_pod("shop", "cart-2", "n-0", {"cpu": "NaN", "memory": "1Gi"}, "ReplicaSet")
    server.taint_node("n-0", "karpenter.sh/disrupted")
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, Clock(NOW))
    with caplog.at_level(logging.WARNING):
        (pool,) = daemon.reconcile().pools
    assert pool.error is None and pool.plan is not None
    assert pool.plan.components["disruption"] == 2  # cart-1's 2 cores; cart-2's memory, 1 slot
    assert any(
        "shop/cart-2" in r.getMessage() and "resources.requests.cpu 'NaN'" in r.getMessage()
        for r in caplog.records
    )
