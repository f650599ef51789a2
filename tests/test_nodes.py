"""One node parser and one count (`kube.nodes`) for both node readers: the listing reader
(`KubeClusterReader`) and the node caches (`WatchedClusterReader`) answer the same counts and warn
once of a node left out, whichever of them read it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fake_apiserver import FakeApiServer

from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.nodes import NodeEntry, count_nodes, node_entry
from predictive_headroom.kube.watch_options import WatchOptions
from predictive_headroom.kube.watched import Caches, WatchedClusterReader
from predictive_headroom.protocols import ClusterState

FAST = CallOptions(timeout=3.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, events=False)
T0, T1 = "2026-11-27T01:00:00Z", "2026-11-27T01:02:00Z"
T0_SECONDS, T1_SECONDS = 1_795_741_200.0, 1_795_741_320.0


def node(
    name: str,
    cpu: str = "4",
    created: str | None = T0,
    ready: tuple[str, str] | None = ("True", T1),
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A node's JSON as the API server sends it (only the fields read)."""
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": labels or {}}
    if created:
        meta["creationTimestamp"] = created
    conditions = (
        [{"type": "Ready", "status": ready[0], "lastTransitionTime": ready[1]}] if ready else []
    )
    return {
        "metadata": meta,
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"cpu": cpu, "memory": "1Gi"}, "conditions": conditions},
    }


@pytest.mark.parametrize(
    ("given", "cpu", "schedulable", "created", "ready_since", "problems"),
    [
        (node("ok", cpu="3500m"), 3.5, True, T0_SECONDS, T1_SECONDS, ()),
        (node("cordoned", unschedulable=True), 4.0, False, T0_SECONDS, T1_SECONDS, ()),
        (node("not-ready", ready=("False", T1)), 4.0, True, T0_SECONDS, None, ()),
        (node("no-condition", ready=None), 4.0, True, T0_SECONDS, None, ()),
        (node("no-creation", created=None), 4.0, True, None, None, ()),
        (node("bad", cpu="lots"), 0.0, False, None, None, ("status.allocatable.cpu",)),
    ],
)
def test_node_entry(given, cpu, schedulable, created, ready_since, problems):
    entry = node_entry(given)
    assert entry.name == given["metadata"]["name"]
    assert (entry.cpu, entry.schedulable) == (cpu, schedulable)
    assert len(entry.problems) == len(problems)
    assert all(p in found for p, found in zip(problems, entry.problems, strict=True))
    if created is None:
        assert entry.seen is None
    else:
        assert entry.seen is not None
        assert (entry.seen.created, entry.seen.ready_since) == (created, ready_since)
        assert entry.seen.unschedulable == (not schedulable)
        assert entry.seen.uid == f"uid-{entry.name}"


def test_a_spot_node_is_seen_as_spot():
    entry = node_entry(node("s", labels={"karpenter.sh/capacity-type": "spot"}))
    assert entry.seen is not None and entry.seen.spot


def test_count_nodes_leaves_out_the_unreadable_and_keeps_the_order():
    entries = [
        node_entry(node("a", cpu="4")),
        node_entry(node("b", cpu="8", unschedulable=True)),
        node_entry(node("c", cpu="NaN")),
        node_entry(node("d", cpu="2", created=None)),
        node_entry(node("e", cpu="1")),
    ]
    listed = count_nodes(entries)
    assert listed.state == ClusterState(4, 15.0, 3, 7.0)
    assert [n.name for n in listed.nodes] == ["a", "b", "e"]  # d has no creation time
    assert count_nodes([]).state == ClusterState(0, 0.0, 0, 0.0)
    assert count_nodes([NodeEntry("x", 2.0, True, None, ("why",))]).state.nodes == 0


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        srv.add_node("a-1", cpu="4", labels={"pool": "a"}, created=T0, ready_since=T1)
        srv.add_node("a-2", cpu="8", labels={"pool": "a"}, unschedulable=True, created=T0)
        srv.add_node("a-3", labels={"pool": "a"}, allocatable={"cpu": "Infinity"})
        srv.add_node("b-1", cpu="16", labels={"pool": "b"})
        yield srv


def test_both_readers_count_alike_and_warn_once_of_a_node_left_out(server, caplog):
    lister = KubeClusterReader(server.api_client(), FAST)
    caches = Caches(WatchOptions(sync_wait=10.0, watch_seconds=30), FAST)
    watched = WatchedClusterReader(lister, caches)
    try:
        with caplog.at_level(logging.WARNING):
            cached = watched.read_nodes("pool=a")
            listed = lister.read_nodes("pool=a")
            assert watched.read_nodes("pool=a") == cached
    finally:
        caches.stop()
    lists = [r for r in server.requests("GET", "/api/v1/nodes") if not r.query.get("watch")]
    assert len(lists) == 2, "the cache's first list and the lister's: both cached reads from memory"
    assert cached == listed
    assert listed.state == ClusterState(2, 12.0, 1, 4.0)
    assert [(n.name, n.unschedulable) for n in listed.nodes] == [("a-1", False), ("a-2", True)]
    warned = [r.getMessage() for r in caplog.records if "a-3" in r.getMessage()]
    assert len(warned) == 1, warned  # one warning for the node, read three times by both readers
    assert "left out of the node counts" in warned[0] and "status.allocatable.cpu" in warned[0]


ZONE = "topology.kubernetes.io/zone"


def _node_json(labels: dict[str, str]) -> dict:
    return {
        "metadata": {
            "name": "n-1",
            "uid": "u-1",
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": labels,
        },
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}, "conditions": []},
    }


def test_a_node_record_keeps_the_labels_a_registered_component_asks_for(monkeypatch) -> None:
    """Issue 65: node records carry the labels the components ask for (a zone for a per-zone
    floor), and no other: none while no registered component asks for one."""
    from predictive_headroom.core.components import NODE_LABELS
    from predictive_headroom.kube import nodes

    labels = {ZONE: "eu-west-1a", "team": "web", "kubernetes.io/hostname": "n-1"}
    assert frozenset() == NODE_LABELS  # nothing registered reads a node label yet
    assert nodes.node_entry(_node_json(labels)).seen.labels == ()  # type: ignore[union-attr]

    monkeypatch.setattr(nodes, "NODE_LABELS", frozenset({ZONE, "absent"}))
    seen = nodes.node_entry(_node_json(labels)).seen
    assert seen is not None and seen.labels == ((ZONE, "eu-west-1a"),)
    assert nodes.kept_labels({"b": "2", "a": "1"}, {"a", "b"}) == (("a", "1"), ("b", "2"))
