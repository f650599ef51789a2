"""The quota cap in the daemon (issue 65 item 4), against the fake API server: a ResourceQuota that
leaves room for 3 placeholders while the plan asks 8: the daemon writes 3 and says `quota` naming
the quota on `/last-run` and the metric; the quota raised, it writes 8. Read by listing and
through the watch caches (the raise seen by the watch)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from test_disruption import FAST, NOW, Clock, NoForecaster, gauge

from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.kube.watch_options import WatchOptions
from predictive_headroom.kube.watched import Caches, WatchedPodReader

NS = "headroom"
NAME = "web-placeholder"


def write_policy(path: Path, **extra: object) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": NAME},
        "minReplicas": 8,
        "maxReplicas": 20,
        "leadTime": "5m",
        "scaleDownStabilization": "0s",
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}, "nodeSelector": {"pool": "web"}},
        **extra,
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, NAME, 0)
        fake.add_node("n-1", cpu="8", labels={"pool": "web"})
        yield fake


def make_daemon(config: Path, server: FakeApiServer, clock: Clock, caches: Caches | None) -> Daemon:
    api = server.api_client()
    pods = KubePodReader(api, FAST)
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        pods=WatchedPodReader(pods, caches, api) if caches else pods,
        loop=LoopSettings(observe_placeholders=False),
    )


def held_then(daemon: Daemon, clock: Clock, wanted: int, deadline: float = 20.0) -> dict:
    """Reconcile a minute apart until the plan holds `wanted` (a watch may be a moment behind)."""
    ends = time.monotonic() + deadline
    while True:
        outcome = daemon.reconcile().to_dict()["pools"][0]
        if outcome["desired_replicas"] == wanted or time.monotonic() > ends:
            return outcome
        clock.now += 60
        time.sleep(0.05)


@pytest.mark.parametrize("watched", [False, True])
def test_a_quota_with_room_for_3_holds_3_and_raised_8(tmp_path, server, watched) -> None:
    server.add_resource_quota(NS, "compute", {"requests.cpu": "10", "pods": "5"}, {"pods": "2"})
    caches = Caches(WatchOptions(sync_wait=5.0), FAST) if watched else None
    clock = Clock(NOW)
    try:
        daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock, caches)
        outcome = held_then(daemon, clock, 3)
        assert outcome["desired_replicas"] == 3 and outcome["reason"] == "quota", outcome
        assert outcome["details"]["quota_by"] == "compute: pods"
        assert server.replicas(NS, NAME) == 3
        shown = json.loads(json.dumps(daemon.status()))  # what /last-run serves
        assert shown["quota"]["web"]["replicas"] == 3
        assert shown["quota"]["web"]["quota_by"] == "compute: pods"
        replicas = "predictive_headroom_component_replicas"
        assert gauge(daemon, replicas, pool="web", component="quota") == 3

        # the 3 placeholders run (counted in `used`), and the quota is raised
        for i in range(3):
            server.add_pod(
                NS,
                f"{NAME}-abc12-x{i}xyz",
                "n-1",
                {"cpu": "1"},
                "ReplicaSet",
                labels={"predictive-headroom.io/pool": "web"},
            )
        server.add_resource_quota(
            NS, "compute", {"requests.cpu": "10", "pods": "15"}, {"pods": "5", "requests.cpu": "3"}
        )
        clock.now += 60
        outcome = held_then(daemon, clock, 8)
        assert outcome["desired_replicas"] == 8 and outcome["reason"] == "min", outcome
        assert server.replicas(NS, NAME) == 8
        quota = daemon.status()["quota"]["web"]
        # pods: 15 - 5 + its own 3 = 13; requests.cpu: 10 - 3 + its own 3 = 10 sets it
        assert quota["quota_fit"] == {"compute: requests.cpu": 10, "compute: pods": 13}
        assert quota["replicas"] == 10 and quota["quota_by"] == "compute: requests.cpu"
        reads = server.requests("GET", "/resourcequotas")
        assert any(r.query.get("watch") in ("true", "1", "True") for r in reads) == watched
    finally:
        if caches is not None:
            caches.stop()


def test_a_quota_scoped_to_another_priority_class_does_not_cap(tmp_path, server) -> None:
    server.add_resource_quota(
        NS,
        "high-only",
        {"pods": "1"},
        scope_selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}],
    )
    server.add_resource_quota(NS, "best-effort", {"pods": "0"}, scopes=["BestEffort"])
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, Clock(NOW), None)
    outcome = daemon.reconcile().to_dict()["pools"][0]
    assert outcome["desired_replicas"] == 8 and outcome["reason"] == "min", outcome
    assert "quota" not in outcome["components"]


def test_quota_ignore_reads_no_quota(tmp_path, server) -> None:
    server.add_resource_quota(NS, "compute", {"pods": "3"})
    daemon = make_daemon(
        write_policy(tmp_path / "p.yaml", quota="ignore"), server, Clock(NOW), None
    )
    outcome = daemon.reconcile().to_dict()["pools"][0]
    assert outcome["desired_replicas"] == 8 and server.replicas(NS, NAME) == 8
    assert not server.requests("GET", "resourcequotas")


def test_quotas_that_cannot_be_read_leave_the_cap_out_saying_why(tmp_path, server) -> None:
    server.fail("GET", "resourcequotas", 403, times=None)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, Clock(NOW), None)
    outcome = daemon.reconcile().to_dict()["pools"][0]
    assert outcome["desired_replicas"] == 8 and outcome["reason"] == "min", outcome
    why = daemon.status()["quota"]["web"]["left_out"]
    assert "ResourceQuotas could not be read" in why and "resourcequotas" in why, why
