"""Issue 55 item 5: the pods on nodes (the disruption and share components) can be listed only in
named namespaces (`PH_NODE_POD_NAMESPACES`, the chart's `disruption.readPodsNamespaces`: a Role in
each) instead of cluster-wide; listed directly and through the caches alike, never with a
cluster-wide request."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fake_apiserver import FakeApiServer

from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.errors import Forbidden
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.watch_options import WatchOptions
from predictive_headroom.kube.watched import Caches, WatchedPodReader
from predictive_headroom.policy.settings import Settings

FAST = CallOptions(timeout=3.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, events=False)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_pod("web", "web-1", "n-1", {"cpu": "2"}, owner_kind="ReplicaSet")
        fake.add_pod("batch", "job-1", "n-1", {"cpu": "1"}, owner_kind="Job")
        fake.add_pod("batch", "job-2", "n-2", {"cpu": "1"}, owner_kind="Job")
        fake.add_pod("other", "secret-app", "n-1", {"cpu": "4"}, owner_kind="ReplicaSet")
        yield fake


def _names(by_node: dict) -> dict[str, list[str]]:
    return {node: sorted(p.name for p in pods) for node, pods in sorted(by_node.items())}


def _cluster_wide(server: FakeApiServer) -> list[str]:
    return [r.path for r in server.requests("GET") if r.path.startswith("/api/v1/pods")]


def test_listed_only_in_the_named_namespaces(server) -> None:
    reader = KubePodReader(server.api_client(), FAST, node_namespaces=("web", "batch"))
    assert _names(reader.pods_by_node()) == {"n-1": ["job-1", "web-1"], "n-2": ["job-2"]}
    assert not _cluster_wide(server)
    everywhere = KubePodReader(server.api_client(), FAST).pods_by_node()
    assert _names(everywhere)["n-1"] == ["job-1", "secret-app", "web-1"]  # as before: all


def test_the_caches_watch_each_named_namespace_and_agree_with_a_list(server) -> None:
    api = server.api_client()
    lister = KubePodReader(api, FAST, node_namespaces=("web", "batch"))
    caches = Caches(WatchOptions(sync_wait=10.0, watch_seconds=30), FAST)
    watched = WatchedPodReader(lister, caches, api)
    try:
        deadline = time.monotonic() + 20
        while caches.synced()[0] is False or not watched.pods_by_node():
            assert time.monotonic() < deadline, "the caches did not sync"
            time.sleep(0.05)
        server.add_pod("web", "web-2", "n-2", {"cpu": "1"}, owner_kind="ReplicaSet")
        server.add_pod("other", "secret-2", "n-2", {"cpu": "1"}, owner_kind="ReplicaSet")
        while _names(watched.pods_by_node()).get("n-2") != ["job-2", "web-2"]:
            assert time.monotonic() < deadline, _names(watched.pods_by_node())
            time.sleep(0.05)
        assert watched.pods_by_node() == lister.pods_by_node()
    finally:
        caches.stop()
    assert not _cluster_wide(server)


def test_a_namespace_without_the_role_is_refused_by_name(server) -> None:
    server.fail("GET", r"^/api/v1/namespaces/batch/pods", 403, times=None)
    reader = KubePodReader(server.api_client(), FAST, node_namespaces=("web", "batch"))
    with pytest.raises(Forbidden, match="batch"):
        reader.pods_by_node()


def test_the_setting_is_a_comma_separated_list(monkeypatch) -> None:
    monkeypatch.setenv("PH_NODE_POD_NAMESPACES", "web, batch")
    assert Settings().node_pod_namespaces == "web, batch"
    from predictive_headroom.commands.run import cluster_reads

    _, pods, _ = cluster_reads(object(), Settings(), watch=False)  # type: ignore[arg-type]
    assert isinstance(pods, KubePodReader) and pods.node_namespaces == ("web", "batch")
