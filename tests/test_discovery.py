"""Which CapacityBuffer API version is used: the pure choice (table-driven), and the actuator against
the fake apiserver serving only v1beta1, only v1alpha1, a cluster-scoped v1, or no such group."""

from __future__ import annotations

import logging

import pytest
from fake_apiserver import FakeApiServer

from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.discovery import (
    NOT_INSTALLED,
    BufferApi,
    CapacityBufferDiscovery,
    Served,
    choose_api,
)
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ActuatorError

NS = "apps"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")
ALPHA_BETA = {"v1alpha1": True, "v1beta1": True}


def buffer_pool(
    api_version: str | None = None, name: str = "gpu", target: str = "gpu-buffer"
) -> Pool:
    spec: dict[str, object] = {"kind": "CapacityBuffer", "namespace": NS, "name": target}
    if api_version:
        spec["apiVersion"] = api_version
    return Pool.model_validate({"name": name, "target": spec, "maxReplicas": 20})


@pytest.mark.parametrize(
    "served,pinned,expected",
    [
        (
            Served(("v1beta1", "v1alpha1"), "v1beta1", ALPHA_BETA),
            None,
            BufferApi("v1beta1", True, "server-preferred"),
        ),
        (
            Served(("v1alpha1",), "v1alpha1", {"v1alpha1": True}),
            None,
            BufferApi("v1alpha1", True, "server-preferred"),
        ),
        (
            Served(("v1beta1", "v1alpha1"), "v1beta1", ALPHA_BETA),
            "v1alpha1",
            BufferApi("v1alpha1", True, "target.apiVersion"),
        ),
        (Served(("v1",), "v1", {"v1": False}), None, BufferApi("v1", False, "server-preferred")),
        # The group's preferred version may not serve capacitybuffers (ProvisioningRequest is in the group too).
        (
            Served(("v1", "v1beta1"), "v1", {"v1beta1": True}),
            None,
            BufferApi("v1beta1", True, "newest-supported"),
        ),
        # A preferred version this code does not know: the newest supported one that is served.
        (
            Served(("v2", "v1beta1", "v1alpha1"), "v2", {"v2": True, **ALPHA_BETA}),
            None,
            BufferApi("v1beta1", True, "newest-supported"),
        ),
    ],
)
def test_the_version_is_the_pinned_one_else_the_preferred_one_else_the_newest(
    served, pinned, expected
) -> None:
    assert choose_api(served, pinned) == expected


@pytest.mark.parametrize(
    "served,pinned,words",
    [
        (Served(), None, [NOT_INSTALLED]),
        (Served(), "v1beta1", [NOT_INSTALLED]),
        (
            Served(("v1", "v1beta1"), "v1", {}),
            None,
            [NOT_INSTALLED],
        ),  # only ProvisioningRequests in the group
        (
            Served(("v1beta1",), "v1beta1", {"v1beta1": True}),
            "v1alpha1",
            [
                "autoscaling.x-k8s.io/v1alpha1, pinned by target.apiVersion, is not served",
                "it serves autoscaling.x-k8s.io/v1beta1",
                "remove it",
            ],
        ),
        (
            Served(("v2",), "v2", {"v2": True}),
            None,
            ["only as autoscaling.x-k8s.io/v2", "upgrade predictive-headroom"],
        ),
    ],
)
def test_no_usable_version_says_why_in_the_users_terms(served, pinned, words) -> None:
    message = choose_api(served, pinned)
    assert isinstance(message, str)
    for word in words:
        assert word in message


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="predictive_headroom")
    return caplog


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_a_namespaced_buffer_is_read_and_written_in_the_one_version_served(
    version: str, logs
) -> None:
    with FakeApiServer(capacity_buffer_versions=(version,)) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 2)
        actuator = TargetActuator(server.api_client(), FAST)

        assert actuator.read(buffer_pool()).replicas == 2
        actuator.scale(buffer_pool(), 5, "forecast", dry_run=False)

        assert server.capacity_buffer(NS, "gpu-buffer")["spec"]["replicas"] == 5
        [write] = server.writes("/capacitybuffers/")
        assert (
            write.path
            == f"/apis/autoscaling.x-k8s.io/{version}/namespaces/{NS}/capacitybuffers/gpu-buffer"
        )
        assert write.body["spec"] == {"replicas": 5}
        [event] = server.events(NS)
        assert event["involvedObject"]["apiVersion"] == f"autoscaling.x-k8s.io/{version}"
        assert event["involvedObject"]["namespace"] == NS
        # No request ever went to a version the server does not serve.
        assert all(version in r.path for r in server.requests(path_contains="/capacitybuffers"))


def test_the_server_preferred_version_wins_when_several_are_served() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1", "v1alpha1")) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 1)
        actuator = TargetActuator(server.api_client(), FAST)

        actuator.scale(buffer_pool(), 3, "min", dry_run=False)

        assert [r.path.split("/")[3] for r in server.writes("/capacitybuffers/")] == ["v1beta1"]


def test_target_api_version_pins_one_of_the_served_versions() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1", "v1alpha1")) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 1)
        actuator = TargetActuator(server.api_client(), FAST)

        actuator.scale(buffer_pool("autoscaling.x-k8s.io/v1alpha1"), 3, "min", dry_run=False)

        assert [r.path.split("/")[3] for r in server.writes("/capacitybuffers/")] == ["v1alpha1"]


def test_a_pinned_version_the_server_does_not_serve_is_an_error_naming_what_it_serves() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 1)
        actuator = TargetActuator(server.api_client(), FAST)

        with pytest.raises(ActuatorError) as err:
            actuator.read(buffer_pool("autoscaling.x-k8s.io/v1alpha1"))

        assert (
            "pool gpu: CapacityBuffer autoscaling.x-k8s.io/v1alpha1, pinned by target.apiVersion, is not served"
            in str(err.value)
        )
        assert "autoscaling.x-k8s.io/v1beta1" in str(err.value)
        assert server.requests(path_contains="/capacitybuffers/") == []


def test_a_cluster_scoped_version_is_written_at_the_cluster_path() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1",), capacity_buffer_scope="Cluster") as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 0)
        actuator = TargetActuator(server.api_client(), FAST)

        actuator.scale(buffer_pool(), 4, "schedule:peak", dry_run=False)

        [write] = server.writes("/capacitybuffers/")
        assert write.path == "/apis/autoscaling.x-k8s.io/v1/capacitybuffers/gpu-buffer"
        assert server.capacity_buffer(NS, "gpu-buffer")["spec"]["replicas"] == 4
        [event] = (
            server.events()
        )  # in `default`, naming no namespace, as for any cluster-scoped object
        assert event["metadata"]["namespace"] == "default"
        assert event["involvedObject"]["apiVersion"] == "autoscaling.x-k8s.io/v1"
        assert "namespace" not in event["involvedObject"]


def test_forbidden_on_a_cluster_scoped_buffer_asks_for_a_cluster_role() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1",), capacity_buffer_scope="Cluster") as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 0)
        server.fail("GET", r"/capacitybuffers/gpu-buffer$", 403, times=None)

        with pytest.raises(ActuatorError) as err:
            TargetActuator(server.api_client(), FAST).read(buffer_pool())

        message = str(err.value)
        assert "pool gpu: get capacitybuffers gpu-buffer (cluster-scoped): forbidden" in message
        assert (
            "ClusterRole with resourceNames" in message
            and "capacityBuffer.scope: Cluster" in message
        )


@pytest.mark.parametrize(
    "provisioning_requests", [False, True], ids=["no-group", "group-without-buffers"]
)
def test_no_capacity_buffers_on_the_cluster_says_it_is_not_installed(
    provisioning_requests: bool,
) -> None:
    with FakeApiServer(
        capacity_buffer_crd=False, provisioning_requests=provisioning_requests
    ) as server:
        with pytest.raises(ActuatorError) as err:
            TargetActuator(server.api_client(), FAST).read(buffer_pool())

        assert str(err.value) == f"pool gpu: {NOT_INSTALLED}"
        assert server.requests(path_contains="/capacitybuffers") == []


def test_spec_percentage_is_removed_when_replicas_are_written(logs) -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 0)
        server.edit_capacity_buffer(
            NS,
            "gpu-buffer",
            {
                "spec": {
                    "replicas": None,
                    "percentage": 20,
                    "scalableRef": {"kind": "Deployment", "name": "web"},
                }
            },
        )
        actuator = TargetActuator(server.api_client(), FAST)

        actuator.scale(buffer_pool(), 3, "forecast", dry_run=False)

        spec = server.capacity_buffer(NS, "gpu-buffer")["spec"]
        assert spec["replicas"] == 3 and "percentage" not in spec
        assert spec["scalableRef"] == {"kind": "Deployment", "name": "web"}
        assert any("spec.percentage set; removing it" in m for m in logs.messages)
        actuator.scale(buffer_pool(), 4, "forecast", dry_run=False)
        assert server.writes("/capacitybuffers/")[-1].body["spec"] == {
            "replicas": 4
        }  # nothing more to remove


def test_a_version_removed_while_running_is_found_again_on_the_next_call() -> None:
    with FakeApiServer(
        capacity_buffer_versions=("v1beta1", "v1alpha1"), preferred_version="v1alpha1"
    ) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 1)
        actuator = TargetActuator(server.api_client(), FAST)
        assert actuator.read(buffer_pool()).replicas == 1  # through v1alpha1, the preferred version

        server.capacity_buffer_versions, server.preferred_version = (
            ("v1beta1",),
            "v1beta1",
        )  # the autoscaler was upgraded
        with pytest.raises(
            ActuatorError,
            match=r"autoscaling.x-k8s.io/v1alpha1 capacitybuffers is no longer served",
        ):
            actuator.scale(buffer_pool(), 6, "forecast", dry_run=False)
        actuator.scale(buffer_pool(), 6, "forecast", dry_run=False)

        assert server.capacity_buffer(NS, "gpu-buffer")["spec"]["replicas"] == 6
        assert server.writes("/capacitybuffers/")[-1].path.startswith(
            "/apis/autoscaling.x-k8s.io/v1beta1/"
        )


def test_discovery_is_cached_until_refreshed_and_describes_each_pool() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        discovery = CapacityBufferDiscovery(server.api_client(), FAST)
        pools = [
            buffer_pool(),
            buffer_pool("autoscaling.x-k8s.io/v1", name="pinned", target="other"),
            Pool.model_validate(
                {"name": "web", "target": {"namespace": NS, "name": "web"}, "maxReplicas": 3}
            ),
        ]

        described = discovery.describe(pools)
        discovery.describe(pools)
        assert (
            len(server.requests("GET", "/apis")) == 2
        )  # the group list and v1beta1's resources, once
        discovery.refresh()
        discovery.describe(pools)
        assert len(server.requests("GET", "/apis")) == 4

        assert described["gpu"] == {
            "kind": "CapacityBuffer",
            "api_version": "autoscaling.x-k8s.io/v1beta1",
            "scope": "Namespaced",
            "chosen_by": "server-preferred",
            "error": None,
        }
        assert (
            described["pinned"]["api_version"] is None
            and "pool pinned: " in described["pinned"]["error"]
        )
        assert "web" not in described  # Deployments need no discovery


def test_a_failing_discovery_is_retried_then_reported() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        server.fail("GET", r"^/apis/?$", 503, times=2)
        discovery = CapacityBufferDiscovery(server.api_client(), FAST)
        assert (
            discovery.describe([buffer_pool()])["gpu"]["api_version"]
            == "autoscaling.x-k8s.io/v1beta1"
        )

        server.fail("GET", r"^/apis/?$", 500, times=None)
        discovery.refresh()
        with pytest.raises(ActuatorError, match=r"API discovery of the API group list failed: 500"):
            discovery.served()


class BrokenDiscovery:
    """A TargetApis whose answer cannot be understood."""

    def refresh(self) -> None:
        pass

    def describe(self, pools):
        raise ValueError("unexpected discovery document")


def test_an_unexpected_discovery_failure_becomes_each_buffer_pools_error(caplog) -> None:
    from predictive_headroom.daemon.targetapis import TargetApiTracker

    web = Pool.model_validate(
        {"name": "web", "target": {"namespace": NS, "name": "web"}, "maxReplicas": 3}
    )
    found = TargetApiTracker(BrokenDiscovery()).update([buffer_pool(), web])

    assert list(found) == ["gpu"]
    assert (
        found["gpu"]["error"]
        == "pool gpu: API discovery failed: ValueError: unexpected discovery document"
    )
