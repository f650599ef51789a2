"""Disruption-aware headroom against the test API server (real kubernetes client): a node of the pool
tainted for removal or cordoned raises the plan by the room its pods need within one reconcile, the
room goes when the node does, without the pod-list permission the allocatable estimate is used and
said, and on spot capacity a reserve for interruptions within the lead time is held."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families

from predictive_headroom.core.disruption import (
    in_placeholders,
    node_slots,
    poisson_quantile,
    spot_reserve,
)
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.disruption import DisruptionSettings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.disruption import parse_rate
from predictive_headroom.policy.load import ConfigError, load_policy

NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
NOW = datetime(2026, 11, 23, 8, 52, tzinfo=UTC).timestamp()
GI = 2**30


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class NoForecaster:
    def fit(self, *args: object) -> None:  # pragma: no cover - no pool forecasts here
        raise AssertionError("no pool forecasts in these tests")


def write_policy(path: Path, disruption: dict | None = None, labels: dict | None = None) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 20,
        "leadTime": "5m",
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}, "nodeSelector": {"pool": "web"}},
    }
    if disruption is not None:
        pool["disruption"] = disruption
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, "web-placeholder", 0)
        for node in ("n-1", "n-2", "n-3"):
            fake.add_node(node, cpu="8", labels={"pool": "web"}, allocatable={"memory": "32Gi"})
        fake.add_node("b-1", cpu="8", labels={"pool": "batch"})
        # n-1: 6 placeholders' worth of workload (cpu 2+2+2), in two namespaces ...
        fake.add_pod("shop", "cart-1", "n-1", {"cpu": "2", "memory": "1Gi"}, "ReplicaSet")
        fake.add_pod("shop", "cart-2", "n-1", {"cpu": "2", "memory": "1Gi"}, "ReplicaSet")
        fake.add_pod("api", "api-1", "n-1", {"cpu": "1500m", "memory": "2Gi"}, "StatefulSet")
        fake.add_pod("api", "api-2", "n-1", {"cpu": "500m", "memory": "512Mi"}, "ReplicaSet")
        # ... and pods that do not count: a DaemonSet's, a mirror pod, a placeholder, a finished job
        fake.add_pod("kube-system", "agent-x", "n-1", {"cpu": "2"}, "DaemonSet")
        fake.add_pod(
            "kube-system",
            "etcd-n-1",
            "n-1",
            {"cpu": "2"},
            "Node",
            annotations={"kubernetes.io/config.mirror": "abc"},
        )
        fake.add_pod(
            NS,
            "web-placeholder-1",
            "n-1",
            {"cpu": "1"},
            "ReplicaSet",
            labels={"predictive-headroom.io/pool": "web"},
        )
        fake.add_pod("jobs", "done-1", "n-1", {"cpu": "4"}, "Job", phase="Succeeded")
        # n-2: 3 placeholders' worth; b-1 belongs to another pool
        fake.add_pod("shop", "cart-3", "n-2", {"cpu": "3", "memory": "1Gi"}, "ReplicaSet")
        fake.add_pod("batch", "etl-1", "b-1", {"cpu": "7"}, "ReplicaSet")
        yield fake


def make_daemon(
    config: Path, server: FakeApiServer, clock: Clock, read_pods: bool = True
) -> Daemon:
    api = server.api_client()
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        pods=KubePodReader(api, FAST),
        loop=LoopSettings(observe_placeholders=False, read_node_pods=read_pods),
    )


def gauge(daemon: Daemon, name: str, **labels: str) -> float | None:
    text = daemon.metrics.exposition().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


def test_a_tainted_node_raises_the_plan_within_one_reconcile_until_it_is_gone(
    tmp_path, server
) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock)
    calm = daemon.reconcile().pools[0].plan
    assert calm is not None and calm.desired == 0 and calm.components["disruption"] == 0
    assert calm.reason == "min"  # nothing disrupted: disruption does not name a plan of 0

    server.taint_node("n-1", "karpenter.sh/disrupted")
    clock.now += 60
    plan = daemon.reconcile().pools[0].plan
    assert plan is not None
    assert plan.desired >= 6 and plan.reason == "disruption"
    assert plan.components["disruption"] == 6
    assert plan.details["leaving"] == {"n-1": "karpenter.sh/disrupted"}
    assert plan.details["disruption_source"] == "pods"
    assert server.replicas(NS, "web-placeholder") == 6
    assert gauge(daemon, "predictive_headroom_nodes_leaving", pool="web") == 1
    assert (
        gauge(daemon, "predictive_headroom_component_replicas", pool="web", component="disruption")
        == 6
    )
    lists = server.requests("GET", "/api/v1/pods")  # one list of bound pods, across namespaces
    assert [r.query["fieldSelector"].split(",")[0] for r in lists] == ["spec.nodeName!="]

    # an evicted pod still needs its room until it runs elsewhere (at most a lead time)
    server.delete_pod("shop", "cart-1")
    clock.now += 60
    assert daemon.reconcile().pools[0].plan.components["disruption"] == 6
    clock.now += 300
    assert daemon.reconcile().pools[0].plan.components["disruption"] == 4

    server.delete_node("n-1")
    clock.now += 60
    gone = daemon.reconcile().pools[0].plan
    assert gone is not None and gone.components["disruption"] == 0
    assert gone.reason == "hold:scale-down-stabilization"  # the count comes down as usual
    assert gauge(daemon, "predictive_headroom_nodes_leaving", pool="web") == 0
    status = daemon.status()["disruption"]["web"]
    assert status["nodes_leaving"] == 0 and status["interruptions_seen"] == 1


def test_a_cordoned_node_counts_too_and_other_pools_nodes_do_not(tmp_path, server) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock)
    server.cordon_node("n-2")
    server.taint_node("b-1", "ToBeDeletedByClusterAutoscaler")  # another pool's node
    plan = daemon.reconcile().pools[0].plan
    assert plan is not None and plan.components["disruption"] == 3
    assert plan.reason == "disruption" and plan.details["leaving"] == {"n-2": "cordoned"}

    server.cordon_node("n-2", False)  # uncordoned: not leaving any more, and no interruption
    clock.now += 60
    plan = daemon.reconcile().pools[0].plan
    assert plan.components["disruption"] == 0
    assert daemon.status()["disruption"]["web"]["interruptions_seen"] == 0


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/disruption",
        "ToBeDeletedByClusterAutoscaler",
        "aws-node-termination-handler/spot-itn",
        "aws-node-termination-handler/scheduled-maintenance",
        "aws-node-termination-handler/asg-lifecycle-termination",
        "aws-node-termination-handler/rebalance-recommendation",
    ],
)
def test_every_default_removal_taint_counts(tmp_path, server, key) -> None:
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, Clock(NOW))
    server.taint_node("n-2", key)
    assert daemon.reconcile().pools[0].plan.details["leaving"] == {"n-2": key}


def test_the_taint_list_is_per_pool_and_disruption_can_be_turned_off(tmp_path, server) -> None:
    server.taint_node("n-1", "example.com/retiring")
    server.taint_node("n-2", "karpenter.sh/disrupted")
    own = write_policy(tmp_path / "own.yaml", {"taints": ["example.com/retiring"]})
    plan = make_daemon(own, server, Clock(NOW)).reconcile().pools[0].plan
    assert plan.details["leaving"] == {"n-1": "example.com/retiring"}

    off = write_policy(tmp_path / "off.yaml", {"enabled": False})
    before = len(server.requests("GET", "/api/v1/pods"))
    plan = make_daemon(off, server, Clock(NOW)).reconcile().pools[0].plan
    assert "disruption" not in plan.components and plan.desired == 0
    assert len(server.requests("GET", "/api/v1/pods")) == before


def test_without_the_pod_list_permission_the_estimate_is_used_and_said(tmp_path, server) -> None:
    server.taint_node("n-1", "karpenter.sh/disrupted")
    # not allowed by the settings: no pod list is even tried
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, Clock(NOW), read_pods=False)
    plan = daemon.reconcile().pools[0].plan
    assert plan.components["disruption"] == 8  # 8 cores, 32Gi: 8 placeholders of 1 cpu, 1Gi
    assert plan.details["disruption_source"] == "allocatable-estimate"
    assert "disruption.readPods" in plan.details["disruption_note"]
    assert not server.requests("GET", "/api/v1/pods")

    # allowed by the settings but the ServiceAccount is not: the 403 is said, the estimate used
    server.fail("GET", r"^/api/v1/pods$", 403, times=None)
    daemon = make_daemon(write_policy(tmp_path / "q.yaml"), server, Clock(NOW), read_pods=True)
    result = daemon.reconcile()
    plan = result.pools[0].plan
    assert result.pools[0].error is None
    assert plan.components["disruption"] == 8 and plan.reason == "disruption"
    assert plan.details["disruption_source"] == "allocatable-estimate"
    assert "forbidden" in plan.details["disruption_note"]
    assert "'list' on pods" in plan.details["disruption_note"]


def test_a_refused_pod_read_is_logged_once_naming_the_verb_and_resource(
    tmp_path, server, caplog
) -> None:
    """Found on a real API server (tests/e2e/test_rbac.py): the 403 went only into the plan's
    details, so a chart without disruption.readPods was silent in the log."""
    server.taint_node("n-1", "karpenter.sh/disrupted")
    server.fail("GET", r"^/api/v1/pods$", 403, times=None)
    daemon = make_daemon(write_policy(tmp_path / "q.yaml"), server, Clock(NOW), read_pods=True)
    with caplog.at_level(logging.WARNING, logger="predictive_headroom.daemon.disruption"):
        daemon.reconcile()
        daemon.reconcile()
    refused = [r.getMessage() for r in caplog.records if "needs 'list' on pods" in r.getMessage()]
    assert len(refused) == 1, refused
    assert "forbidden" in refused[0] and "cluster-wide" in refused[0]


def test_spot_pools_hold_a_reserve_from_the_given_or_measured_interruption_rate(
    tmp_path, server
) -> None:
    for node in ("n-1", "n-2", "n-3"):
        server.delete_node(node)
    for i in range(40):
        server.add_node(
            f"s-{i}",
            cpu="8",
            labels={"pool": "web", "karpenter.sh/capacity-type": "spot"},
            allocatable={"memory": "32Gi"},
        )
    # 40 nodes at 25%/day for 5 min: 0.035 interruptions expected (3.4% chance of any); at the
    # default protection (95%) none is held
    calm = write_policy(tmp_path / "calm.yaml", {"interruptionRate": "25%/day"})
    plan = make_daemon(calm, server, Clock(NOW)).reconcile().pools[0].plan
    assert plan.details["spot"] is True and plan.details["spot_reserve"] == 0
    # at 5%/hour: 0.17 expected, 15% chance of one or more: one node's worth (8) is held
    stormy = write_policy(tmp_path / "stormy.yaml", {"interruptionRate": "5%/hour"})
    plan = make_daemon(stormy, server, Clock(NOW)).reconcile().pools[0].plan
    assert plan.components["disruption"] == 8 and plan.details["spot_reserve"] == 8
    assert plan.details["interruption_rate_source"] == "configured"

    # measured: the closed loop counts nodes that left with a removal taint, per node-hour
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "m.yaml"), server, clock)
    daemon.disruption.settings = DisruptionSettings(read_pods=True, min_node_hours=1.0)
    daemon.reconcile()
    for i in range(4):
        server.taint_node(f"s-{i}", "aws-node-termination-handler/spot-itn")
    clock.now += 60
    daemon.reconcile()
    for i in range(4):
        server.delete_node(f"s-{i}")
    clock.now += 60
    plan = daemon.reconcile().pools[0].plan
    status = daemon.status()["disruption"]["web"]
    assert status["interruptions_seen"] == 4
    # 40 nodes for a minute, then 36 for a minute: 76 node-minutes, 4 interruptions
    rate = status["measured_interruption_rate_per_node_hour"]
    assert rate == pytest.approx(4 / (76 / 60))
    assert plan.details["interruption_rate_source"] == "measured"
    assert plan.details["spot_reserve"] > 0
    assert (plan.desired, plan.reason) == (20, "max")  # such a storm asks for more than the cap


def test_not_spot_means_no_reserve_and_spot_can_be_set_in_the_policy(tmp_path, server) -> None:
    plan = (
        make_daemon(
            write_policy(tmp_path / "a.yaml", {"interruptionRate": "5%/hour"}), server, Clock(NOW)
        )
        .reconcile()
        .pools[0]
        .plan
    )
    assert plan.details["spot"] is False and plan.details["spot_reserve"] == 0
    plan = (
        make_daemon(
            write_policy(tmp_path / "b.yaml", {"spot": True, "interruptionRate": "30%/hour"}),
            server,
            Clock(NOW),
        )
        .reconcile()
        .pools[0]
        .plan
    )
    assert plan.details["spot"] is True and plan.details["spot_reserve"] == 8


@pytest.mark.parametrize(
    ("requests", "placeholder", "expected"),
    [
        ({"cpu": 6.0, "memory": 3 * GI}, {"cpu": 1.0, "memory": GI}, 6),
        ({"cpu": 1.0, "memory": 5.5 * GI}, {"cpu": 1.0, "memory": GI}, 6),
        ({"cpu": 0.1}, {"cpu": 1.0, "memory": GI}, 1),
        ({}, {"cpu": 1.0}, 0),
        ({"nvidia.com/gpu": 2.0}, {"cpu": 1.0, "nvidia.com/gpu": 1.0}, 2),
    ],
)
def test_room_in_placeholders_is_the_largest_ratio_rounded_up(
    requests, placeholder, expected
) -> None:
    assert in_placeholders(requests, placeholder) == expected


@pytest.mark.parametrize(
    ("allocatable", "expected"),
    [
        ({"cpu": 8.0, "memory": 32 * GI}, 8),
        ({"cpu": 8.0, "memory": 4.5 * GI}, 4),
        ({"cpu": 8.0}, 0),
    ],
)
def test_node_slots_is_the_smallest_ratio_rounded_down(allocatable, expected) -> None:
    assert node_slots(allocatable, {"cpu": 1.0, "memory": GI}) == expected


@pytest.mark.parametrize(
    ("mean", "quantile", "expected"),
    [(0.0, 0.95, 0), (0.03, 0.95, 0), (0.06, 0.95, 1), (1.0, 0.95, 3), (1.0, 0.5, 1)],
)
def test_poisson_quantile(mean, quantile, expected) -> None:
    assert poisson_quantile(mean, quantile) == expected


def test_spot_reserve_is_interruptions_in_the_lead_time_in_node_slots() -> None:
    # 100 nodes, 5%/day (per node-hour 0.05/24), lead 10 min: 0.035 expected -> 1 node at 99%
    reserve, expected = spot_reserve(parse_rate("5%/day"), 100, 600, 8, 0.99)
    assert expected == pytest.approx(100 * 0.05 / 24 / 6)
    assert reserve == 8
    assert spot_reserve(0.0, 100, 600, 8, 0.99) == (0, 0.0)


@pytest.mark.parametrize(
    ("text", "per_hour"),
    [
        ("5%/day", 0.05 / 24),
        ("0.05/day", 0.05 / 24),
        ("0.2%/hour", 0.002),
        ("1 % / h", 0.01),
        (0.01, 0.01),
    ],
)
def test_interruption_rates_are_read_per_node_hour(text, per_hour) -> None:
    assert parse_rate(text) == pytest.approx(per_hour)


def test_a_bad_taint_key_or_rate_is_named_in_the_policy_file(tmp_path) -> None:
    with pytest.raises(ConfigError) as bad:
        load_policy(
            write_policy(
                tmp_path / "p.yaml", {"taints": ["not a key"], "interruptionRate": "often"}
            )
        )
    text = str(bad.value)
    assert "disruption.taints" in text and "not a key" in text
    assert "disruption.interruptionRate" in text and "5%/day" in text


@pytest.mark.slow
def test_the_report_plans_now_with_the_component_and_the_horizon_with_the_reserve(tmp_path) -> None:
    from test_report import report_of

    from predictive_headroom.core.disruption import DisruptionPart
    from predictive_headroom.core.vocabulary import DisruptionSource
    from predictive_headroom.report.html import render_html

    policy = load_policy(write_policy(tmp_path / "p.yaml"))
    part = DisruptionPart(6, 2, 1, DisruptionSource.PODS, {"leaving": {"n-1": "cordoned"}})
    report = report_of(policy, {}, {}, {}, NOW, parts={"web": {"disruption": part}})
    (pool,) = report.pools
    assert (pool.now.desired, pool.now.reason) == (8, "disruption")
    later = pool.plan_reasons[1:]
    assert later and set(later) == {"hold:scale-down-stabilization", "disruption"}
    assert pool.plan_desired[-1] == 2  # the reserve stays, the room went with the node
    page = render_html(report)
    assert "Disruption: 6 placeholders for the pods of 1 node on their way out" in page
    assert "2 as a spot reserve" in page and ">disruption<" in page


@pytest.mark.parametrize(
    ("pod", "requests", "excluded"),
    [
        (  # containers add up; the largest init container counts when larger; overhead is added
            {
                "metadata": {"name": "a", "uid": "1"},
                "spec": {
                    "containers": [
                        {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                        {"resources": {"requests": {"cpu": "250m"}}},
                    ],
                    "initContainers": [
                        {"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}
                    ],
                    "overhead": {"cpu": "100m"},
                },
            },
            {"cpu": 2.1, "memory": float(GI)},
            False,
        ),
        (  # a DaemonSet's pod goes with the node
            {"metadata": {"name": "b", "ownerReferences": [{"kind": "DaemonSet"}]}, "spec": {}},
            {},
            True,
        ),
        (  # a mirror pod (static, node-bound)
            {"metadata": {"name": "c", "annotations": {"kubernetes.io/config.mirror": "x"}}},
            {},
            True,
        ),
        (  # a placeholder of any pool is headroom, not a workload
            {"metadata": {"name": "d", "labels": {"predictive-headroom.io/pool": "gpu"}}},
            {},
            True,
        ),
    ],
)
def test_a_pods_effective_requests_and_what_is_left_out(pod, requests, excluded) -> None:
    from predictive_headroom.kube.pods import pod_on_node

    seen = pod_on_node(pod)
    assert dict(seen.requests) == pytest.approx(requests)
    assert seen.excluded is excluded


def test_the_node_list_carries_taints_cordon_spot_and_allocatable(server) -> None:
    server.add_node(
        "s-1",
        cpu="4",
        labels={"pool": "web", "eks.amazonaws.com/capacityType": "SPOT"},
        unschedulable=True,
        taints=[{"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}],
    )
    nodes = {
        n.name: n for n in KubeClusterReader(server.api_client(), FAST).read_nodes("pool=web").nodes
    }
    assert set(nodes) == {"n-1", "n-2", "n-3", "s-1"}
    spot = nodes["s-1"]
    assert spot.taints == ("aws-node-termination-handler/spot-itn",)
    assert spot.unschedulable and spot.spot
    assert dict(spot.allocatable)["cpu"] == 4.0 and dict(spot.allocatable)["memory"] == 15 * GI
    calm = nodes["n-1"]
    assert (calm.taints, calm.unschedulable, calm.spot) == ((), False, False)
