"""Preemption for real: app pods at priority 0 beside the chart's placeholders (PriorityClass -1).
The real scheduler preempts placeholders and binds the app pods at once on warm nodes; the
evicted placeholders go pending and the node provisioner (Cluster Autoscaler's kwok provider,
or its stand-in where that could not be built) adds nodes for them; without placeholders the
same app pods wait for the node-ready delay."""

from __future__ import annotations

import time

import kubernetes.client
import pytest
from apps import create_app, pod_waits, running
from cluster import autoscaler_blocked
from install import install, set_replicas
from kube import wait_for
from provisioner import Provisioner, node_ready

APPS = "apps"
PLACEHOLDERS = "app.kubernetes.io/name=predictive-headroom-placeholder"


@pytest.fixture(scope="module")
def setup(cluster, tmp_path_factory):
    release = install(
        cluster,
        tmp_path_factory.mktemp("preempt"),
        {"pools": [{"name": "general", "maxReplicas": 20}]},
        namespace="preempt",
        release="preempt",
    )
    api = cluster.api()
    create_app(api, APPS)
    provisioner = Provisioner(
        api, slots=8, scan_interval=1.0, unneeded_time=3600, prefix="pre",
        namespaces={"preempt", APPS},
    )  # fmt: skip
    provisioner.start()
    yield release, provisioner
    provisioner.stop()
    set_replicas(api, APPS, "app", 0)
    set_replicas(api, "preempt", release.placeholder(), 0)
    core = kubernetes.client.CoreV1Api(api)
    for node in core.list_node(label_selector="type=kwok").items:
        if node.metadata.name.startswith("pre"):
            core.delete_node(node.metadata.name)


def describe_nodes(api) -> list[tuple]:
    core = kubernetes.client.CoreV1Api(api)
    return [
        (n.metadata.name, node_ready(n), [t.key for t in n.spec.taints or []])
        for n in core.list_node(label_selector="type=kwok").items
    ]


def ready_nodes(api, prefix="pre") -> int:
    core = kubernetes.client.CoreV1Api(api)
    return sum(
        1
        for n in core.list_node(label_selector="type=kwok").items
        if n.metadata.name.startswith(prefix) and node_ready(n) and not n.spec.taints
    )


def test_app_pods_preempt_placeholders_and_the_evicted_ones_get_a_new_node(cluster, setup) -> None:
    blocked = autoscaler_blocked(cluster.bins)
    if blocked:
        print(f"cluster-autoscaler not built ({blocked}); the provisioner stand-in adds nodes")
    release, provisioner = setup
    api = cluster.api()
    delay = cluster.node_ready_delay
    # 8 placeholders: the provisioner adds one 8-slot node for them, Ready after the delay.
    set_replicas(api, "preempt", release.placeholder(), 8)
    wait_for(
        lambda: running(api, "preempt", PLACEHOLDERS) == 8, delay + 60, "8 placeholders running"
    )
    assert ready_nodes(api) == 1, describe_nodes(api)
    nodes_before = provisioner.added

    set_replicas(api, APPS, "app", 4)
    waits = wait_for(
        lambda: (
            (w := pod_waits(api, APPS))
            and len(w) == 4
            and all(v is not None for v in w.values())
            and w
        ),
        30,
        "4 app pods bound",
    )
    assert max(waits.values()) < 5, f"app pods waited {waits} (node-ready delay {delay:g}s)"
    # The 4 evicted placeholders are recreated, pending, and get a new node.
    wait_for(lambda: provisioner.added > nodes_before, 30, "a node added for evicted placeholders")
    wait_for(
        lambda: running(api, "preempt", PLACEHOLDERS) == 8, delay + 60, "placeholders rescheduled"
    )
    wait_for(lambda: ready_nodes(api) == 2, 20, f"2 ready nodes: {describe_nodes(api)}")
    events = kubernetes.client.CoreV1Api(api).list_namespaced_event(
        "preempt", field_selector="reason=Preempted"
    )
    assert len(events.items) >= 4


def test_without_placeholders_app_pods_wait_for_the_node_ready_delay(cluster, setup) -> None:
    release, _ = setup
    api = cluster.api()
    delay = cluster.node_ready_delay
    set_replicas(api, "preempt", release.placeholder(), 0)
    wait_for(lambda: running(api, "preempt", PLACEHOLDERS) == 0, 30, "placeholders gone")
    before = set(pod_waits(api, APPS))
    # 4 apps run; 2 nodes hold 16 slots: 12 more fit, 8 beyond that need a new node.
    started = time.time()
    set_replicas(api, APPS, "app", 4 + 12 + 8)
    waits = wait_for(
        lambda: (
            (w := pod_waits(api, APPS))
            and len(w) == 24
            and all(v is not None for v in w.values())
            and w
        ),
        delay + 90,
        "24 app pods bound",
    )
    new = sorted(v for k, v in waits.items() if k not in before)
    slow = [v for v in new if v >= delay - 1]
    assert len(slow) == 8, f"waits {new}, node-ready delay {delay:g}s"
    assert all(v < 5 for v in new[:12]), new
    print(f"without placeholders: 8 pods waited {min(slow):.0f}-{max(slow):.0f}s "
          f"(delay {delay:g}s), took {time.time() - started:.0f}s")  # fmt: skip
