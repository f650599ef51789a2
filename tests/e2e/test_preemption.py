"""Preemption on a real autoscaler: the chart's placeholders (PriorityClass -1), pending, make
Karpenter (kwok provider) launch nodes; app pods at priority 0 preempt them and bind at once on
those nodes; the evicted placeholders go pending and make Karpenter add the next node. Without
placeholders the same app pods wait for a node to boot. Both are measured in the same run and
compared, not held against a fixed number of seconds. Karpenter restarted under its nodes adopts
them again and keeps provisioning."""

from __future__ import annotations

import math
import time
from typing import Any

import kubernetes.client
import pytest
from apps import create_app, pod_waits, running
from install import install, set_replicas
from karpenter import placement
from kube import wait_for

APPS = "apps"
POOL = "preempt"
PLACEHOLDERS = "app.kubernetes.io/name=predictive-headroom-placeholder"
WAITS: dict[str, list[float]] = {}
"""The app pods' waits (seconds to bound) per phase, kept for the comparison."""


@pytest.fixture(scope="module")
def setup(cluster, karpenter, tmp_path_factory):
    karpenter.pool(POOL)
    # spread none (the default since issue 58): with topologySpread (maxSkew 1 over hostnames,
    # ScheduleAnyway) Karpenter's default preference policy (Respect) launches one node per
    # placeholder for the first ones (docs/e2e.md).
    placeholder = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "spread": {"mode": "none"},
        **placement(POOL),
    }
    release = install(
        cluster,
        tmp_path_factory.mktemp("preempt"),
        {"pools": [{"name": "general", "maxReplicas": 40, "placeholder": placeholder}]},
        namespace="preempt",
        release="preempt",
    )
    api = cluster.api()
    create_app(api, APPS, placement=placement(POOL))
    yield release
    set_replicas(api, APPS, "app", 0)
    set_replicas(api, "preempt", release.placeholder(), 0)
    karpenter.delete_pool(POOL)


def slots(node) -> int:
    """How many 1-CPU pods fit on `node` (its allocatable CPU, rounded down)."""
    cpu = node.status.allocatable["cpu"]
    return math.floor(float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))


def bound_waits(api, count: int, timeout: float) -> dict[str, float]:
    return wait_for(
        lambda: (
            (w := pod_waits(api, APPS))
            and len(w) == count
            and all(v is not None for v in w.values())
            and w
        ),
        timeout,
        f"{count} app pods bound",
    )


def test_placeholders_make_karpenter_add_nodes_and_app_pods_preempt_them(
    cluster, karpenter, setup
) -> None:
    api = cluster.api()
    boot = karpenter.boot
    # One node's worth of placeholders: pending, they make Karpenter launch a node for them.
    set_replicas(api, "preempt", setup.placeholder(), 7)
    wait_for(lambda: running(api, "preempt", PLACEHOLDERS) == 7, boot + 120, "7 placeholders run")
    # Bound is not yet Ready: the scheduler may bind once Karpenter registered the node.
    nodes = wait_for(lambda: karpenter.ready_nodes(POOL), 60, "the placeholders' node Ready")
    assert len(nodes) == 1 and slots(nodes[0]) == 7, karpenter.describe(POOL)
    claims = len(karpenter.nodeclaims(POOL))

    set_replicas(api, APPS, "app", 4)
    waits = bound_waits(api, 4, boot + 120)
    WAITS["with placeholders"] = sorted(waits.values())
    on_warm = {p.spec.node_name for p in _app_pods(api)}
    assert on_warm == {nodes[0].metadata.name}, (on_warm, karpenter.describe(POOL))
    # The 4 evicted placeholders are recreated, pending, and Karpenter adds a node for them.
    wait_for(lambda: len(karpenter.nodeclaims(POOL)) > claims, 60, "a NodeClaim for the evicted")
    wait_for(lambda: running(api, "preempt", PLACEHOLDERS) == 7, boot + 120, "placeholders back")
    wait_for(lambda: len(karpenter.ready_nodes(POOL)) == 2, 60, "2 ready nodes")
    # The scheduler records its Preempted Events asynchronously (retried when a write times out on
    # a busy API server): poll for all four rather than read once.
    core = kubernetes.client.CoreV1Api(api)

    def preempted() -> list[Any]:
        return core.list_namespaced_event("preempt", field_selector="reason=Preempted").items

    wait_for(lambda: len(preempted()) >= 4, 90, "a Preempted Event for each of the 4 evicted")


def test_without_placeholders_the_same_app_pods_wait_for_a_node_to_boot(
    cluster, karpenter, setup
) -> None:
    api = cluster.api()
    boot = karpenter.boot
    assert "with placeholders" in WAITS, "needs the test above (same module) to have run"
    set_replicas(api, "preempt", setup.placeholder(), 0)
    wait_for(lambda: running(api, "preempt", PLACEHOLDERS) == 0, 60, "placeholders gone")
    before = set(pod_waits(api, APPS))
    free = sum(slots(n) for n in karpenter.ready_nodes(POOL)) - len(before)
    # What fits on the nodes Karpenter made binds at once; 7 more need a new node.
    started = time.time()
    set_replicas(api, APPS, "app", len(before) + free + 7)
    waits = bound_waits(api, len(before) + free + 7, boot + 150)
    new = sorted(v for k, v in waits.items() if k not in before)
    cold, warm = new[-7:], new[:-7]
    WAITS["without placeholders"] = cold
    with_placeholders = WAITS["with placeholders"]
    print(
        f"app pods waited {with_placeholders} s with placeholders, {cold} s without "
        f"(boot {boot:g} s: registration {karpenter.boot_delay:g} + ready "
        f"{cluster.node_ready_delay:g}); took {time.time() - started:.0f} s"
    )
    # A new node's Node object exists only boot_delay after its NodeClaim was launched.
    assert min(cold) >= karpenter.boot_delay, (cold, karpenter.describe(POOL))
    assert max(with_placeholders) < min(cold) / 2, (with_placeholders, cold)
    assert max(warm) < min(cold) / 2, (warm, cold)


def test_karpenter_restarted_adopts_its_nodes_and_keeps_provisioning(
    cluster, karpenter, setup
) -> None:
    api = cluster.api()
    names = {n.metadata.name for n in karpenter.nodes(POOL)}
    claims = {c["metadata"]["name"] for c in karpenter.nodeclaims(POOL)}
    assert names and claims
    karpenter.restart()
    set_replicas(api, "preempt", setup.placeholder(), 7)
    wait_for(
        lambda: running(api, "preempt", PLACEHOLDERS) == 7,
        karpenter.boot + 120,
        "7 placeholders run after the restart",
    )
    after = {c["metadata"]["name"] for c in karpenter.nodeclaims(POOL)}
    assert claims <= after, (claims, after)
    assert names <= {n.metadata.name for n in karpenter.nodes(POOL)}, karpenter.describe(POOL)
    assert len(after) > len(claims), "the placeholders needed a new node"
    assert "Traceback" not in karpenter.proc.tail(400)


def _app_pods(api) -> list:
    core = kubernetes.client.CoreV1Api(api)
    return [
        p
        for p in core.list_namespaced_pod(APPS, label_selector="app=e2e-app").items
        if not p.metadata.deletion_timestamp
    ]
