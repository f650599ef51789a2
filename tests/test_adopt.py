"""Issue 54 item 1, the daemon's part: a placeholder Deployment declared existing
(`placeholder.existing: true`, e.g. the cluster-overprovisioner chart's) is taken over from its
current replicas through /scale only, never its selector or pod template; one that is not a pause
placeholder is refused, saying what was found, as an unlabelled target is (log, Event, metric,
/last-run). Against the API stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from test_disruption import Clock, NoForecaster

from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.kube.watch_options import WatchOptions
from predictive_headroom.kube.watched import Caches, WatchedTargets
from predictive_headroom.policy.adopt import PodTemplate, is_pause_image, pause_problem
from predictive_headroom.policy.load import ConfigError, load_policy
from predictive_headroom.policy.target import Target

FAST = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
NOW = datetime(2026, 11, 27, 18, 0, tzinfo=UTC).timestamp()
LABEL = "predictive-headroom.io/pool"
NS, NAME = "overprov", "overprov-cluster-overprovisioner-default"
CHART_LABELS = {
    "app.kubernetes.io/name": "cluster-overprovisioner",
    "app.kubernetes.io/instance": "overprov",
    "app.cluster-overprovisioner/deployment": "default",
}
"""The selector the cluster-overprovisioner chart gives its Deployment (release `overprov`)."""
SELECTOR_OF_POD = {**CHART_LABELS, "helm.sh/chart": "cluster-overprovisioner-0.7.14"}
"""An adopted pod's labels: the chart's, not the pool label."""


def _overprovisioner_pod(image: str = "registry.k8s.io/pause:3.9", **extra: Any) -> dict[str, Any]:
    """The pod spec the cluster-overprovisioner chart renders with its defaults."""
    return {
        "serviceAccountName": "overprov-cluster-overprovisioner",
        "priorityClassName": "overprovisioning",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "cluster-overprovisioner",
                "image": image,
                "resources": {"requests": {"cpu": "1000m", "memory": "1000Mi"}},
            }
        ],
        **extra,
    }


def _existing(server: FakeApiServer, replicas: int = 20, **pod: Any) -> None:
    deployment = server.add_deployment(NS, NAME, replicas, pool="web", pod=pod or None)
    server.edit_deployment(
        NS,
        NAME,
        {
            "spec": {
                "selector": {"matchLabels": CHART_LABELS},
                "template": {"metadata": {"labels": CHART_LABELS}},
            }
        },
    )
    assert deployment["metadata"]["labels"][LABEL] == "web"


def _policy(path: Path, min_replicas: int = 3) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": NAME},
        "minReplicas": min_replicas,
        "maxReplicas": 40,
        "scaleDownStabilization": "10m",
        "placeholder": {"existing": True, "requests": {"cpu": "1000m", "memory": "1000Mi"}},
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


def _daemon(config: Path, server: FakeApiServer, clock: Clock, actuator: Any = None) -> Daemon:
    api = server.api_client()
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=actuator or TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        monotonic=clock,
        dry_run=False,
    )


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_priority_class("overprovisioning", -1)
        yield fake


def _metric(daemon: Daemon, line_start: str) -> float:
    text = daemon.metrics.exposition().decode()
    line = next(x for x in text.splitlines() if x.startswith(line_start))
    return float(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize("watched", [False, True])
def test_an_existing_pause_deployment_is_taken_over_from_its_count_through_scale_only(
    tmp_path, server, watched
):
    """The overprovisioner's Deployment at 20, a plan of 3: the daemon holds the 20 it found for
    scaleDownStabilization (10 min here), then lowers it, writing only /scale; its selector and
    pod template (so its pods) stay as they were."""
    _existing(server, 20, **_overprovisioner_pod())
    before = server.deployment(NS, NAME)
    assert before is not None
    api = server.api_client()
    caches = Caches(WatchOptions(sync_wait=5.0), FAST) if watched else None
    actuator = WatchedTargets(TargetActuator(api, FAST), caches, api) if caches else None
    clock = Clock(NOW)
    try:
        daemon = _daemon(_policy(tmp_path / "p.yaml"), server, clock, actuator)
        outcomes = []
        for _ in range(11):  # one a minute: 0 .. 10 min after the takeover
            outcomes.append(daemon.reconcile().to_dict()["pools"][0])
            clock.now += 60
    finally:
        if caches is not None:
            caches.stop()
    held = outcomes[:10]
    assert all(o["action"] == "unchanged" and o["reason"] == "hold:takeover" for o in held), held
    assert [o["desired_replicas"] for o in held] == [20] * 10 and outcomes[0][
        "unstabilized_replicas"
    ] == 3
    assert outcomes[10]["action"] == "scaled" and outcomes[10]["current_replicas"] == 20
    after = server.deployment(NS, NAME)
    assert after is not None and after["spec"]["replicas"] == 3
    assert after["spec"]["selector"] == before["spec"]["selector"]
    assert after["spec"]["template"] == before["spec"]["template"]
    writes = [w.path for w in server.writes() if "/events" not in w.path]
    assert writes == [f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}/scale"]


def test_a_plan_above_the_count_found_applies_at_once(tmp_path, server):
    _existing(server, 2, **_overprovisioner_pod())
    daemon = _daemon(_policy(tmp_path / "p.yaml", min_replicas=6), server, Clock(NOW))
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "scaled" and server.replicas(NS, NAME) == 6


@pytest.mark.parametrize(
    ("pod", "found"),
    [
        (
            _overprovisioner_pod(image="nginx:1.27"),
            "container cluster-overprovisioner runs nginx:1.27 (not a pause image)",
        ),
        (
            _overprovisioner_pod(
                initContainers=[{"name": "warm", "image": "busybox:1.36", "command": ["sleep"]}]
            ),
            "container warm runs busybox:1.36 (not a pause image)",
        ),
        (
            {k: v for k, v in _overprovisioner_pod().items() if k != "priorityClassName"},
            "its pods name no priorityClassName",
        ),
        (
            _overprovisioner_pod(priorityClassName="default"),
            "its PriorityClass default has value 0, not below 0",
        ),
        (
            _overprovisioner_pod(priorityClassName="gone"),
            "there is no PriorityClass gone",
        ),
    ],
)
def test_an_existing_deployment_that_is_not_a_pause_placeholder_is_refused(
    tmp_path, server, pod, found
):
    server.add_priority_class("default", 0)
    _existing(server, 7, **pod)
    clock = Clock(NOW)
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, clock)
    for _ in range(2):
        result = daemon.reconcile()
        clock.now += 60
        outcome = result.to_dict()["pools"][0]
        assert outcome["action"] == "refused" and outcome["current_replicas"] == 7
        assert found in outcome["error"], outcome["error"]
        assert (
            f"Deployment {NS}/{NAME} (placeholder.existing) is not a pause placeholder"
            in (outcome["error"])
        )
    print("/last-run error:", outcome["error"])
    assert server.replicas(NS, NAME) == 7
    assert server.writes(f"{NAME}/scale") == []
    status = json.loads(json.dumps(daemon.status()))
    assert status["reconcile"]["errors"] == [outcome["error"]]
    assert _metric(daemon, 'predictive_headroom_target_refused{pool="web"}') == 1
    warnings = [e for e in server.events(NS) if e.get("reason") == "NotOwned"]
    assert len(warnings) == 1 and found in warnings[0]["message"]


def test_a_priority_class_the_daemon_may_not_read_is_refused_naming_the_permission(
    tmp_path, server
):
    _existing(server, 5, **_overprovisioner_pod())
    server.fail("GET", r"/priorityclasses/overprovisioning$", 403, times=None)
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, Clock(NOW))
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "refused"
    assert "forbidden: the daemon may not get priorityclasses/overprovisioning" in (
        outcome.error or ""
    )
    assert "set the chart's priorityClass.name to overprovisioning (create: false)" in (
        outcome.error or ""
    )
    assert server.replicas(NS, NAME) == 5


def test_removing_the_label_hands_the_deployment_back(tmp_path, server):
    _existing(server, 20, **_overprovisioner_pod())
    clock = Clock(NOW)
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, clock)
    assert daemon.reconcile().to_dict()["pools"][0]["reason"] == "hold:takeover"
    clock.now += 600
    assert daemon.reconcile().pools[0].action == "scaled"
    assert server.replicas(NS, NAME) == 3
    server.edit_deployment(NS, NAME, {"metadata": {"labels": {LABEL: None}}})
    server.edit_deployment(NS, NAME, {"spec": {"replicas": 20}})  # the user's own count again
    written = len(server.writes(f"{NAME}/scale"))
    for _ in range(2):
        clock.now += 60
        outcome = daemon.reconcile().pools[0]
        assert outcome.action == "refused" and "lacks the label" in (outcome.error or "")
    assert server.replicas(NS, NAME) == 20
    assert len(server.writes(f"{NAME}/scale")) == written


def test_without_a_watch_the_priority_class_value_is_read_at_every_reconcile(tmp_path, server):
    """A class can be deleted and re-created at another value (issue 64): nothing is kept; with
    caches it comes from a watch (tests/test_faults_64.py)."""
    _existing(server, 4, **_overprovisioner_pod())
    clock = Clock(NOW)
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, clock)
    for _ in range(3):
        daemon.reconcile()
        clock.now += 60
    assert len(server.requests("GET", "/priorityclasses/overprovisioning")) == 3


@pytest.mark.parametrize(
    ("image", "pause"),
    [
        ("registry.k8s.io/pause:3.10", True),
        ("registry.k8s.io/pause:3.9", True),
        ("k8s.gcr.io/pause", True),
        ("gcr.io/google-containers/pause-amd64:3.1", True),
        ("mirror.example.com:5000/pause:3.10", True),
        ("public.ecr.aws/eks-distro/kubernetes/pause:3.9", True),
        ("rancher/mirrored-pause:3.6", True),
        ("registry.k8s.io/pause@sha256:" + "a" * 64, True),
        ("nginx:1.27", False),
        ("busybox", False),
        ("example.com/pause/app:1", False),
        ("example.com/paused:1", False),
    ],
)
def test_pause_images_are_told_by_their_repository_name(image, pause):
    assert is_pause_image(image) is pause


def test_a_pause_placeholder_has_no_problem():
    target = Target(namespace=NS, name=NAME)
    good = PodTemplate((("pause", "registry.k8s.io/pause:3.9"),), "overprovisioning", -1)
    assert pause_problem(target, "web", good) is None
    empty = PodTemplate((), "overprovisioning", -1)
    assert "no containers" in (pause_problem(target, "web", empty) or "")


@pytest.mark.parametrize(
    ("placeholder", "target", "field", "said"),
    [
        (
            {"existing": True},
            {"kind": "CapacityBuffer", "namespace": NS, "name": "buffer"},
            "pools[0].placeholder.existing",
            "existing: true adopts a placeholder Deployment, and the target is a CapacityBuffer",
        ),
        (
            {"existing": True, "nodeSelector": {"pool": "spot"}},
            {"namespace": NS, "name": NAME},
            "pools[0].placeholder.nodeSelector",
            "nodeSelector is ignored with existing: true",
        ),
        (
            {"existing": True, "limits": {"cpu": "2"}},
            {"namespace": NS, "name": NAME},
            "pools[0].placeholder.limits",
            "limits is ignored with existing: true",
        ),
    ],
)
def test_the_policy_refuses_what_an_existing_placeholder_cannot_mean(
    tmp_path, placeholder, target, field, said
):
    pool = {"name": "web", "target": target, "maxReplicas": 3, "placeholder": placeholder}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"pools": [pool]}))
    with pytest.raises(ConfigError) as exc:
        load_policy(path)
    assert field in str(exc.value) and said in str(exc.value), str(exc.value)


def test_requests_stay_allowed_for_an_existing_placeholder(tmp_path):
    """The daemon prices headroom and counts shares with the requests: they describe the pods."""
    policy = load_policy(_policy(tmp_path / "p.yaml"))
    assert policy.pools[0].placeholder.existing
    assert policy.pools[0].placeholder.requests == {"cpu": "1000m", "memory": "1000Mi"}


def test_the_closed_loop_tells_the_adopted_pods_by_name(tmp_path, server):
    """The adopted pods lack the pool label (their template is left as it is): the closed loop
    lists the namespace's pods and keeps those named after the Deployment; another pod there,
    started and preempted too, is not this pool's."""
    from test_closedloop import iso, samples

    from predictive_headroom.kube.pods import KubePodReader

    _existing(server, 2, **_overprovisioner_pod())
    for i, name in enumerate((f"{NAME}-6d4cf56db6-aaaaa", "web-api-6d4cf56db6-bbbbb")):
        server.add_scheduling_pod(
            NS, name, labels=SELECTOR_OF_POD if i == 0 else {"app": "api"},
            created=iso(NOW - 301), scheduled_at=iso(NOW - 300), ready_at=iso(NOW - 297),
            node="n-0", priority=-1,
        )  # fmt: skip
    api = server.api_client()
    clock = Clock(NOW)
    daemon = new_daemon(
        _policy(tmp_path / "p.yaml"),
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        monotonic=clock,
        pods=KubePodReader(api, FAST),
    )
    daemon.reconcile()
    for name in (f"{NAME}-6d4cf56db6-aaaaa", "web-api-6d4cf56db6-bbbbb"):
        server.preempt_pod(NS, name, iso(NOW + 10))
    clock.now += 60
    daemon.reconcile()
    summary = daemon.status()["closed_loop"]["web"]
    assert (summary["placeholder_starts"], summary["headroom_used"]) == (1, 1), summary
    got = samples(daemon, "predictive_headroom_headroom_used")
    assert got[("predictive_headroom_headroom_used_total", (("pool", "web"),))] == 1


def test_requests_other_than_the_pods_are_warned_about_once(tmp_path, server, caplog):
    """The policy says 1000m / 1000Mi; the adopted pods request 2 CPU: one warning naming both
    (headroom is priced with the policy's), not one per reconcile; the pods are still served."""
    pod = _overprovisioner_pod()
    pod["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "1000Mi"}}
    _existing(server, 3, **pod)
    clock = Clock(NOW)
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, clock)
    with caplog.at_level("WARNING", logger="predictive_headroom.daemon.writes"):
        for _ in range(3):
            assert daemon.reconcile().pools[0].action in ("unchanged", "scaled")
            clock.now += 60
    said = [r.getMessage() for r in caplog.records if "placeholder.requests say" in r.getMessage()]
    assert said == [
        "pool web: placeholder.requests say cpu 1, the adopted Deployment's pods request cpu 2 "
        "(cpu in cores, memory in bytes): the cost of headroom and any share: are counted with "
        "placeholder.requests; set them to what the pods request"
    ], said


def test_requests_that_match_are_not_warned_about(tmp_path, server, caplog):
    _existing(server, 3, **_overprovisioner_pod())
    daemon = _daemon(_policy(tmp_path / "p.yaml"), server, Clock(NOW))
    with caplog.at_level("WARNING", logger="predictive_headroom.daemon.writes"):
        daemon.reconcile()
    assert not [r for r in caplog.records if "placeholder.requests say" in r.getMessage()]
