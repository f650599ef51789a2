"""The Kubernetes actuators and node counter, driven through the real `kubernetes` client
against the fake apiserver in tests/fake_apiserver.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import kubernetes.client
import pytest
import yaml
from fake_apiserver import FakeApiServer

from predictive_headroom.kube.cluster import (
    CONNECTIONS_KEPT,
    PAUSED_ANNOTATION,
    CallOptions,
    ClusterReadError,
    KubeClusterReader,
    load_kube_config,
)
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ActuatorError, ClusterState

NS = "apps"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")
SCALE = r"/deployments/web-placeholder/scale$"


def make_pool(kind: str = "Deployment", name: str = "web", target: str = "web-placeholder") -> Pool:
    return Pool.model_validate(
        {"name": name, "target": {"kind": kind, "namespace": NS, "name": target}, "maxReplicas": 50}
    )


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


@pytest.fixture
def actuator(server: FakeApiServer) -> TargetActuator:
    return TargetActuator(server.api_client(), FAST)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="predictive_headroom.kube.cluster")
    return caplog


def seed(
    server: FakeApiServer, kind: str, replicas: int, annotations: dict[str, str] | None = None
) -> None:
    if kind == "Deployment":
        server.add_deployment(NS, "web-placeholder", replicas, annotations)
    else:
        server.add_capacity_buffer(NS, "web-placeholder", replicas, annotations)


@pytest.mark.parametrize("kind", ["Deployment", "CapacityBuffer"])
@pytest.mark.parametrize("before,after", [(2, 5), (5, 1), (3, 0), (0, 12)])
def test_scale_writes_new_replicas_logs_and_records_an_event(
    server: FakeApiServer,
    actuator: TargetActuator,
    logs: pytest.LogCaptureFixture,
    kind: str,
    before: int,
    after: int,
) -> None:
    seed(server, kind, before)
    pool = make_pool(kind)

    assert actuator.read(pool).replicas == before
    actuator.scale(pool, after, "schedule:business-hours", dry_run=False)

    assert server.replicas(NS, "web-placeholder") == after
    assert actuator.read(pool).replicas == after
    assert (
        f"pool web: apps/web-placeholder replicas {before} -> {after} (schedule:business-hours)"
        in logs.messages
    )
    [event] = server.events(NS)
    assert event["reason"] == "Scaled" and event["type"] == "Normal"
    assert event["message"] == f"pool web: replicas {before} -> {after} (schedule:business-hours)"
    target = server.deployment(NS, "web-placeholder") or server.capacity_buffer(
        NS, "web-placeholder"
    )
    assert event["involvedObject"]["kind"] == kind
    assert event["involvedObject"]["name"] == "web-placeholder"
    assert event["involvedObject"]["uid"] == target["metadata"]["uid"]


def test_deployment_writes_only_the_scale_subresource_with_its_resource_version(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    version = server.deployment(NS, "web-placeholder")["metadata"]["resourceVersion"]

    actuator.scale(make_pool(), 4, "forecast", dry_run=False)

    writes = server.writes("/deployments/")
    assert [(w.method, w.path) for w in writes] == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/web-placeholder/scale")
    ]
    assert writes[0].body == {"metadata": {"resourceVersion": version}, "spec": {"replicas": 4}}


@pytest.mark.parametrize("kind", ["Deployment", "CapacityBuffer"])
def test_no_write_and_no_event_when_the_target_already_has_the_replicas(
    server: FakeApiServer, actuator: TargetActuator, kind: str
) -> None:
    seed(server, kind, 3)
    pool = make_pool(kind)

    state = actuator.read(pool)
    actuator.scale(pool, 3, "proportional", dry_run=False)

    assert state.replicas == 3 and state.resource_version and not state.paused
    assert server.writes() == []
    assert server.events() == []


@pytest.mark.parametrize("kind", ["Deployment", "CapacityBuffer"])
def test_dry_run_asks_the_server_to_validate_and_changes_nothing(
    server: FakeApiServer, actuator: TargetActuator, logs: pytest.LogCaptureFixture, kind: str
) -> None:
    seed(server, kind, 2)

    actuator.scale(make_pool(kind), 6, "forecast", dry_run=True)

    [write] = server.writes()
    assert write.method == "PATCH" and write.query == {"dryRun": "All"}
    assert server.replicas(NS, "web-placeholder") == 2
    assert server.events() == []
    assert (
        "DRY-RUN would scale pool web: apps/web-placeholder replicas 2 -> 6 (forecast)"
        in logs.messages
    )


@pytest.mark.parametrize("kind", ["Deployment", "CapacityBuffer"])
@pytest.mark.parametrize(
    "annotations,paused",
    [
        ({PAUSED_ANNOTATION: "true"}, True),
        ({PAUSED_ANNOTATION: "True"}, True),
        ({PAUSED_ANNOTATION: "false"}, False),
        ({}, False),
        ({"other": "true"}, False),
    ],
)
def test_kill_switch_annotation_reads_as_paused(
    server: FakeApiServer,
    actuator: TargetActuator,
    kind: str,
    annotations: dict[str, str],
    paused: bool,
) -> None:
    seed(server, kind, 4, annotations)

    state = actuator.read(make_pool(kind))

    assert (state.replicas, state.paused) == (4, paused)


def test_kill_switch_set_by_a_person_later_is_seen_on_the_next_read(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 4)
    assert not actuator.read(make_pool()).paused

    server.edit_deployment(
        NS, "web-placeholder", {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}}
    )

    assert actuator.read(make_pool()).paused


def test_manual_scale_by_a_person_is_read_back(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 4)

    server.edit_deployment(NS, "web-placeholder", {"spec": {"replicas": 9}})

    assert actuator.read(make_pool()).replicas == 9


def test_conflict_is_retried_with_a_fresh_read(
    server: FakeApiServer, actuator: TargetActuator, logs: pytest.LogCaptureFixture
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.fail("PATCH", SCALE, 409, times=1)

    actuator.scale(make_pool(), 5, "schedule:peak", dry_run=False)

    assert server.replicas(NS, "web-placeholder") == 5
    assert len(server.requests("PATCH", "/scale")) == 2
    assert len(server.requests("GET", "/scale")) == 2  # re-read before applying again
    assert any("409 Conflict" in m for m in logs.messages)


def test_the_server_rejects_a_write_based_on_a_stale_read(server: FakeApiServer) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    apps = kubernetes.client.AppsV1Api(server.api_client())
    stale = apps.read_namespaced_deployment_scale("web-placeholder", NS).metadata.resource_version
    server.edit_deployment(
        NS, "web-placeholder", {"spec": {"replicas": 7}}
    )  # a person's kubectl scale

    with pytest.raises(kubernetes.client.exceptions.ConflictException):
        apps.patch_namespaced_deployment_scale(
            "web-placeholder", NS, {"metadata": {"resourceVersion": stale}, "spec": {"replicas": 3}}
        )
    assert server.replicas(NS, "web-placeholder") == 7


def test_endless_conflicts_give_up_with_a_clear_error(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.fail("PATCH", SCALE, 409, times=None)

    with pytest.raises(
        ActuatorError, match=r"apps/web-placeholder kept changing while scaling \(5 x 409 Conflict"
    ):
        actuator.scale(make_pool(), 5, "forecast", dry_run=False)
    assert server.replicas(NS, "web-placeholder") == 2


@pytest.mark.parametrize(
    "kind,method,path,verb,resource",
    [
        ("Deployment", "PATCH", SCALE, "patch", "deployments/scale"),
        ("Deployment", "GET", SCALE, "get", "deployments/scale"),
        ("Deployment", "GET", r"/deployments/web-placeholder$", "get", "deployments"),
        (
            "CapacityBuffer",
            "PATCH",
            r"/capacitybuffers/web-placeholder$",
            "patch",
            "capacitybuffers",
        ),
        ("CapacityBuffer", "GET", r"/capacitybuffers/web-placeholder$", "get", "capacitybuffers"),
    ],
)
def test_forbidden_names_the_missing_permission(
    server: FakeApiServer,
    actuator: TargetActuator,
    kind: str,
    method: str,
    path: str,
    verb: str,
    resource: str,
) -> None:
    seed(server, kind, 2)
    server.fail(method, path, 403, times=None)

    with pytest.raises(ActuatorError) as err:
        pool = make_pool(kind)
        actuator.read(pool)
        actuator.scale(pool, 5, "forecast", dry_run=False)

    message = str(err.value)
    assert f"needs '{verb}' on {resource} " in message
    assert "named web-placeholder in namespace apps" in message and "deploy/" in message
    assert "cannot" in message  # the apiserver's own words are kept
    assert (
        len(server.requests(method, path.strip("$").replace("\\", ""))) == 1
    )  # 403 is not retried


@pytest.mark.parametrize("kind", ["Deployment", "CapacityBuffer"])
def test_missing_target_names_the_object_and_the_pool(
    server: FakeApiServer, actuator: TargetActuator, kind: str
) -> None:
    with pytest.raises(ActuatorError) as err:
        actuator.read(make_pool(kind, target="gone"))

    assert (
        f"{kind} apps/gone not found: create the placeholder {kind} or fix the target of pool web"
        in str(err.value)
    )


def test_missing_capacity_buffer_crd_says_to_install_it() -> None:
    with FakeApiServer(capacity_buffer_crd=False) as server:
        actuator = TargetActuator(server.api_client(), FAST)
        with pytest.raises(
            ActuatorError,
            match=r"pool web: CapacityBuffer is not installed: .*Karpenter ≥ 1.14.*Cluster Autoscaler",
        ):
            actuator.read(make_pool("CapacityBuffer"))


def test_server_errors_are_retried_until_success(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.fail("PATCH", SCALE, 500, times=2)
    server.fail("GET", SCALE, 503, times=1)

    actuator.scale(make_pool(), 8, "forecast", dry_run=False)

    assert server.replicas(NS, "web-placeholder") == 8
    assert len(server.requests("PATCH", "/scale")) == 3


def test_persistent_server_errors_give_up_after_the_attempt_budget(
    server: FakeApiServer, actuator: TargetActuator
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.fail("GET", SCALE, 500, times=None)

    with pytest.raises(
        ActuatorError,
        match=r"pool web: get deployments/scale apps/web-placeholder: failed after 3 attempt",
    ):
        actuator.scale(make_pool(), 8, "forecast", dry_run=False)
    assert len(server.requests("GET", "/scale")) == 3
    assert server.writes() == []


def test_a_slow_answer_beyond_the_timeout_is_a_clear_error(server: FakeApiServer) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.delay("GET", SCALE, 30.0)
    actuator = TargetActuator(
        server.api_client(), CallOptions(timeout=0.2, attempts=2, backoff_initial=0.01)
    )

    started = time.monotonic()
    with pytest.raises(ActuatorError) as err:
        actuator.scale(make_pool(), 8, "forecast", dry_run=False)

    # 2 attempts cut at 0.2 s (room for a busy machine), not 2 answers of 30 s
    assert time.monotonic() - started < 15.0
    assert "timeout 0.2s" in str(err.value) and "timed out" in str(err.value).lower()
    assert server.replicas(NS, "web-placeholder") == 2


def test_an_unreachable_api_server_is_a_clear_error() -> None:
    with FakeApiServer() as server:
        client = server.api_client()
    actuator = TargetActuator(client, CallOptions(timeout=0.5, attempts=2, backoff_initial=0.01))

    with pytest.raises(
        ActuatorError,
        match=r"pool web: get deployments apps/web-placeholder: failed after 2 attempt.*Connection refused",
    ):
        actuator.read(make_pool())


def test_a_failed_event_does_not_fail_the_scale(
    server: FakeApiServer, actuator: TargetActuator, logs: pytest.LogCaptureFixture
) -> None:
    server.add_deployment(NS, "web-placeholder", 2)
    server.fail("POST", r"/events$", 403, times=None)

    actuator.scale(make_pool(), 3, "min", dry_run=False)

    assert server.replicas(NS, "web-placeholder") == 3
    assert any(
        "could not record the Event on Deployment apps/web-placeholder" in m for m in logs.messages
    )


@pytest.fixture
def nodes(server: FakeApiServer) -> FakeApiServer:
    server.add_node("a1", "4", {"pool": "web"})
    server.add_node("a2", "3500m", {"pool": "web"})
    server.add_node("a3", "4", {"pool": "web"}, unschedulable=True)  # cordoned
    server.add_node("a4", "2", {"pool": "web", "gpu": "true"}, ready=False)
    server.add_node("b1", "16", {"pool": "batch"})
    return server


@pytest.mark.parametrize(
    "selector,expected",
    [
        ("", ClusterState(5, 29.5, 4, 25.5)),
        ("pool=web", ClusterState(4, 13.5, 3, 9.5)),
        ("pool==web,gpu=true", ClusterState(1, 2.0, 1, 2.0)),
        ("pool!=web", ClusterState(1, 16.0, 1, 16.0)),
        ("gpu", ClusterState(1, 2.0, 1, 2.0)),
        ("!gpu,pool=web", ClusterState(3, 11.5, 2, 7.5)),
        ("pool=none", ClusterState(0, 0.0, 0, 0.0)),
    ],
)
@pytest.mark.parametrize("page_size", [500, 2])
def test_cluster_state_counts_matching_nodes_and_cores(
    nodes: FakeApiServer, selector: str, expected: ClusterState, page_size: int
) -> None:
    reader = KubeClusterReader(nodes.api_client(), FAST, page_size=page_size)

    assert reader.cluster_state(selector) == expected
    lists = nodes.requests("GET", "/api/v1/nodes")
    assert all(r.query.get("labelSelector", "") == selector for r in lists)
    assert len(lists) == max(1, -(-expected.nodes // page_size))  # followed every `continue`


def test_cluster_state_without_permission_names_it(nodes: FakeApiServer) -> None:
    nodes.fail("GET", r"/api/v1/nodes$", 403, times=None)

    with pytest.raises(ClusterReadError, match=r"needs 'list' on nodes cluster-wide"):
        KubeClusterReader(nodes.api_client(), FAST).cluster_state("pool=web")


def _use_kubeconfig(server: FakeApiServer, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "me", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "me"}}],
            }
        )
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))


def test_load_kube_config_uses_kubeconfig_outside_a_cluster(
    server: FakeApiServer, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.add_deployment(NS, "web-placeholder", 6)
    _use_kubeconfig(server, tmp_path, monkeypatch)

    client = load_kube_config()

    assert TargetActuator(client, FAST).read(make_pool()).replicas == 6
    # one connection kept per watch: 30 pools hold 30 (urllib3's default keeps 10)
    assert client.configuration.connection_pool_maxsize == CONNECTIONS_KEPT
    client.close()


def test_load_kube_config_without_any_credentials_says_what_to_do(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))

    with pytest.raises(
        ActuatorError, match=r"no Kubernetes credentials.*set KUBECONFIG or run in-cluster"
    ):
        load_kube_config()
