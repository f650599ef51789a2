"""List-and-watch caches (`kube.informer`, `kube.watched`) against the fake API server, through the
real `kubernetes` client: the reads agree with a LIST, follow changes without listing again, and
recover from a compacted version (410), a silent watch and a refused watch."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes.client
import pytest
from fake_apiserver import FakeApiServer
from kubernetes.watch import Watch

from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.nodes import node_entry
from predictive_headroom.kube.pods import PLACEHOLDER_LABEL, KubePodReader
from predictive_headroom.kube.watch_options import WatchOptions, WatchQuery
from predictive_headroom.kube.watched import (
    Caches,
    WatchedClusterReader,
    WatchedPodReader,
)

PAUSED = "predictive-headroom.io/paused"
FAST = CallOptions(timeout=3.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, events=False)
T0 = "2026-11-27T01:00:00Z"


def eventually(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    """Poll `check` until it returns something truthy (generous deadline for a busy machine)."""
    ends = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > ends:
            assert found, "condition not met in time"
            return found
        time.sleep(0.05)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


def _caches(**timings: Any) -> Caches:
    options = WatchOptions(**{"sync_wait": 10.0, "watch_seconds": 30, **timings})
    return Caches(options, FAST)


def _readers(
    server: FakeApiServer, caches: Caches
) -> tuple[WatchedClusterReader, KubeClusterReader]:
    api = server.api_client()
    lister = KubeClusterReader(api, FAST)
    return WatchedClusterReader(KubeClusterReader(api, FAST), caches), lister


def _is_watch(request: Any) -> bool:
    return request.query.get("watch") == "true"


def _lists(server: FakeApiServer, path: str) -> int:
    """LIST requests (not watches) the server received on `path`."""
    return sum(
        1 for r in server.requests("GET") if r.path == path and r.query.get("watch") != "true"
    )


def _seed_nodes(server: FakeApiServer) -> None:
    server.add_node("a-1", cpu="4", labels={"pool": "a"}, created=T0, ready_since=T0)
    server.add_node("a-2", cpu="8", labels={"pool": "a", "karpenter.sh/capacity-type": "spot"})
    server.add_node("a-3", cpu="4", labels={"pool": "a"}, unschedulable=True)
    server.add_node("a-4", cpu="4", labels={"pool": "a"}, ready=False, created=T0)
    server.add_node("a-5", labels={"pool": "a"}, allocatable={"cpu": "lots"})
    server.add_node(
        "b-1", cpu="16", labels={"pool": "b"}, taints=[{"key": "gpu", "effect": "NoSchedule"}]
    )


def test_the_real_client_watch_streams_changes_bookmarks_and_410_from_the_fake_server(
    server: FakeApiServer,
) -> None:
    server.add_node("n-1")
    core = kubernetes.client.CoreV1Api(server.api_client())
    listed = core.list_node()
    server.add_node("n-2")
    server.cordon_node("n-1")
    server.delete_node("n-2")
    seen = []
    for event in Watch().stream(
        core.list_node,
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
    ):
        seen.append((event["type"], event["raw_object"]["metadata"].get("name")))
        if event["type"] == "BOOKMARK":
            break
    assert seen == [("ADDED", "n-2"), ("MODIFIED", "n-1"), ("DELETED", "n-2"), ("BOOKMARK", None)]
    server.compact()
    with pytest.raises(kubernetes.client.ApiException) as gone:
        list(
            Watch().stream(
                core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=2
            )
        )
    assert gone.value.status == 410


def test_cached_node_reads_agree_with_a_list_and_follow_changes_without_listing_again(
    server: FakeApiServer,
) -> None:
    _seed_nodes(server)
    caches = _caches()
    watched, lister = _readers(server, caches)
    try:
        for selector in ("pool=a", "pool=b", ""):
            assert watched.read_nodes(selector) == lister.read_nodes(selector)
        listed = _lists(server, "/api/v1/nodes")
        server.add_node("a-6", cpu="2", labels={"pool": "a"})  # a node added
        server.taint_node("a-1", "karpenter.sh/disrupted")  # a node on its way out
        server.delete_node("a-2")
        server.add_node("b-2", cpu="2", labels={"pool": "a"})  # moves into pool a ...
        expected = lister.read_nodes("pool=a")
        eventually(lambda: watched.read_nodes("pool=a") == expected)
        assert watched.read_nodes("pool=a").state.nodes == 5
        assert "karpenter.sh/disrupted" in next(
            n.taints for n in watched.read_nodes("pool=a").nodes if n.name == "a-1"
        )
        lists_by_caches = _lists(server, "/api/v1/nodes") - listed - 1  # minus the lister's
        assert lists_by_caches == 0, "a cached read must not LIST after start"
        ok, why = caches.synced()
        assert ok and "3 cache(s) synced" in why
    finally:
        caches.stop()


def test_a_compacted_version_relists_and_counts_the_reason(server: FakeApiServer) -> None:
    _seed_nodes(server)
    # No bookmarks: a bookmark after the compaction would move the watch to the compacted version
    # itself, and the resume would not be refused (on a busy machine the watch had started
    # before `compact()` and its bookmark came first, so no 410 ever came).
    server.bookmark_every = None
    caches = _caches(watch_seconds=1)  # the watch ends each second and resumes from its version
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    watched, lister = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        server.compact()  # the resumed watch is answered 410 Gone
        eventually(lambda: ("nodes", "gone") in relists)
        # Added only now: an event after the compaction, seen before the watch resumed, would
        # move the watch past the compacted version and the resume would not be refused.
        server.add_node("a-9", labels={"pool": "a"})
        eventually(lambda: watched.read_nodes("pool=a") == lister.read_nodes("pool=a"))
        status = caches.status()[0]
        assert status["mode"] == "watching" and status["relists"] >= 2
        assert status["last_relist_seconds_ago"] is not None
    finally:
        caches.stop()


def test_a_watch_that_sends_nothing_is_resumed_after_the_deadline_without_a_list(
    server: FakeApiServer,
) -> None:
    _seed_nodes(server)
    server.hang_watches(1)  # headers, then silence: no events, no bookmarks, no end
    caches = _caches(quiet_deadline=1.0)
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    watched, lister = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        eventually(lambda: "sent nothing for 1s" in (caches.status()[0]["last_error"] or ""))
        server.add_node("a-9", labels={"pool": "a"})  # seen by the resumed watch
        eventually(lambda: watched.read_nodes("pool=a") == lister.read_nodes("pool=a"))
        assert relists == [("nodes", "start")], "a silent watch is resumed, not listed again"
        watches = [r for r in server.requests("GET", "/api/v1/nodes") if _is_watch(r)]
        assert (
            len(watches) >= 2
            and watches[1].query["resourceVersion"] == (watches[0].query["resourceVersion"])
        )
    finally:
        caches.stop()


def test_bookmarks_keep_a_quiet_watch_from_being_relisted(server: FakeApiServer) -> None:
    server.bookmark_every = 0.2
    _seed_nodes(server)
    caches = _caches(quiet_deadline=1.0)
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    watched, _ = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        time.sleep(2.5)  # 2.5 deadlines without a change, only bookmarks
        assert relists == [("nodes", "start")]
        assert caches.status()[0]["age_seconds"] < 1.0
    finally:
        caches.stop()


def test_a_refused_watch_is_logged_and_reads_fall_back_to_listing_until_it_is_allowed(
    server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    _seed_nodes(server)
    server.fail(
        "GET", r"^/api/v1/nodes$", 403, times=None, when=lambda r: r.query.get("watch") == "true"
    )
    caches = _caches(retry_watch=1.0)
    watched, lister = _readers(server, caches)
    try:
        with caplog.at_level(logging.WARNING):
            assert watched.read_nodes("pool=a") == lister.read_nodes("pool=a")
            eventually(lambda: caches.status()[0]["mode"] == "listing")
        refused = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert refused and "watch nodes forbidden" in refused[0].getMessage()
        assert "needs 'watch' on nodes cluster-wide" in refused[0].getMessage()
        assert any("falling back to a LIST" in r.getMessage() for r in caplog.records)
        before = _lists(server, "/api/v1/nodes")
        server.add_node("a-9", labels={"pool": "a"})
        assert watched.read_nodes("pool=a").state.nodes == 5  # read by a LIST, fresh
        assert _lists(server, "/api/v1/nodes") > before
        assert caches.synced()[0] and "watch or list refused" in caches.synced()[1]
        server.clear_faults()  # the RBAC is updated
        eventually(lambda: caches.status()[0]["mode"] == "watching")
        server.add_node("a-10", labels={"pool": "a"})
        eventually(lambda: watched.read_nodes("pool=a").state.nodes == 6)
    finally:
        caches.stop()


def test_readiness_waits_for_the_first_list(server: FakeApiServer) -> None:
    _seed_nodes(server)
    server.delay("GET", r"^/api/v1/nodes$", 2.0, times=None)
    caches = _caches()
    core = kubernetes.client.CoreV1Api(server.api_client())
    try:
        informer = caches.informer(WatchQuery("nodes", "", "pool=a"), core.list_node, node_entry)
        ok, why = caches.synced()
        assert not ok and "not synced yet: nodes (labels pool=a)" in why
        assert informer.current() is None  # the caller lists for itself meanwhile
        eventually(lambda: caches.synced()[0])
        assert informer.current() is not None and len(informer.current() or ()) == 5
    finally:
        caches.stop()


def _placeholder(server: FakeApiServer, name: str, **kw: Any) -> None:
    server.add_scheduling_pod(
        "team", name, labels={PLACEHOLDER_LABEL: "web"}, created=T0, node="a-1", **kw
    )


def test_cached_pod_reads_agree_with_a_list_and_follow_changes(server: FakeApiServer) -> None:
    _seed_nodes(server)
    _placeholder(server, "ph-1", scheduled_at=T0, ready_at=T0)
    _placeholder(server, "ph-2")
    server.add_pod("team", "app-1", "a-1", {"cpu": "1"}, owner_kind="ReplicaSet")
    server.add_pod("kube-system", "ds-1", "a-1", {"cpu": "100m"})
    server.add_pod("team", "done", "a-2", {"cpu": "1"}, owner_kind="Job", phase="Succeeded")
    api = server.api_client()
    lister = KubePodReader(api, FAST)
    caches = _caches()
    watched = WatchedPodReader(KubePodReader(api, FAST), caches, api)
    selector = f"{PLACEHOLDER_LABEL}=web"

    def agree() -> bool:
        return (
            watched.placeholder_pods("team", selector) == lister.placeholder_pods("team", selector)
            and watched.preemptions("team") == lister.preemptions("team")
            and watched.workload_pods("team") == lister.workload_pods("team")
            and watched.pods_by_node() == lister.pods_by_node()
        )

    try:
        assert agree()
        server.preempt_pod("team", "ph-1", at="2026-11-27T01:05:00Z")
        server.add_pod("team", "app-2", "a-2", {"cpu": "2"}, owner_kind="ReplicaSet")
        server.delete_pod("team", "app-1")
        eventually(lambda: len(watched.preemptions("team")) == 1)
        eventually(agree)
        assert set(watched.pods_by_node()) == {"a-1", "a-2"}
        assert watched.placeholder_pods("team", selector)[0].preempted_at is not None
    finally:
        caches.stop()


def test_a_daemon_reading_through_caches_lists_only_at_start_and_shows_them(tmp_path) -> None:
    from daemons import new_daemon
    from test_closedloop import NOW, Clock, NoForecaster, boot_node, iso, write_policy

    from predictive_headroom.kube.targets import TargetActuator

    with FakeApiServer() as server:
        server.add_deployment("headroom", "web-placeholder", 0)
        server.add_node("old-node", labels={"pool": "web"}, created=iso(NOW - 30 * 86400))
        api = server.api_client()
        caches = _caches()
        daemon = new_daemon(
            write_policy(tmp_path / "p.yaml"),
            source=None,
            forecaster=NoForecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=WatchedClusterReader(KubeClusterReader(api, FAST), caches),
            pods=WatchedPodReader(KubePodReader(api, FAST), caches, api),
            caches=caches,
            clock=Clock(NOW),
        )
        try:
            assert not daemon.readiness()[0]
            daemon.reconcile()
            ready, why = daemon.readiness()
            assert ready and "cache(s) synced" in why
            before = len(server.requests())
            for i in range(2):  # two nodes of the pool boot: the next reconcile sees them
                boot_node(server, f"n-{i}", NOW - 700 + i, 540)
            eventually(lambda: len(daemon.cluster.read_nodes("pool=web").nodes) == 3)
            daemon.reconcile()
            assert daemon.status()["closed_loop"]["web"]["lead_time"]["samples"] == 2
            reads = [
                r.path
                for r in server.requests()[before:]
                if r.method == "GET" and r.path.endswith(("nodes", "pods", "events"))
            ]
            assert reads == [], "after start, a reconcile reads the caches, not the API server"
            shown = {c["query"]: c for c in daemon.status()["caches"]}
            assert "nodes (labels pool=web)" in shown
            assert all(c["mode"] == "watching" and c["age_seconds"] < 60 for c in shown.values())
            assert all(c["last_relist_reason"] == "start" for c in shown.values())
        finally:
            caches.stop()


def test_the_daemon_reads_through_caches_unless_told_not_to_and_counts_relists(
    server: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from predictive_headroom.commands.run import cluster_reads
    from predictive_headroom.daemon.metrics import Metrics
    from predictive_headroom.policy.settings import Settings

    api = server.api_client()
    monkeypatch.setenv("PH_WATCH_DEADLINE", "42")
    cluster, pods, caches = cluster_reads(api, Settings(), watch=True)
    assert isinstance(cluster, WatchedClusterReader) and isinstance(pods, WatchedPodReader)
    assert caches is not None and caches.options.quiet_deadline == 42.0
    monkeypatch.setenv("PH_WATCH", "false")
    listing = cluster_reads(api, Settings(), watch=Settings().watch)
    assert isinstance(listing[0], KubeClusterReader) and listing[2] is None
    metrics = Metrics()
    caches.on_relist = metrics.watch_relisted
    _seed_nodes(server)
    try:
        cluster.read_nodes("pool=a")
        exposed = metrics.exposition().decode()
        assert (
            'predictive_headroom_watch_relists_total{reason="start",resource="nodes"} 1.0'
            in exposed
        )
    finally:
        caches.stop()


def test_a_cache_whose_list_is_refused_names_the_permission_and_reads_list(
    server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail("GET", r"^/api/v1/namespaces/team/pods$", 403, times=None)
    api = server.api_client()
    caches = _caches(sync_wait=1.0)
    watched = WatchedPodReader(KubePodReader(api, FAST), caches, api)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(Exception) as refused:
            watched.placeholder_pods("team", f"{PLACEHOLDER_LABEL}=web")
        assert "forbidden" in str(refused.value)  # the listing reader's own error
        eventually(lambda: caches.status()[0]["last_error"])
        error = caches.status()[0]["last_error"]
        assert "needs 'list' on pods in namespace team (a Role)" in error, error
        assert caches.status()[0]["mode"] == "listing"
        assert caches.synced()[0], "a refused read is an error on /last-run, not a wait"
    finally:
        caches.stop()


def _target_pool(name: str = "web-placeholder") -> Any:
    from predictive_headroom.policy.config import Pool

    return Pool.model_validate(
        {"name": "web", "target": {"namespace": "team", "name": name}, "maxReplicas": 10}
    )


def test_deployment_targets_are_read_from_a_watch_of_that_one_deployment(
    server: FakeApiServer,
) -> None:
    from predictive_headroom.kube.targets import TargetActuator
    from predictive_headroom.kube.watched import WatchedTargets

    server.add_deployment("team", "web-placeholder", 3)
    server.add_deployment("team", "other", 7)  # not the daemon's business: never read
    api = server.api_client()
    actuator = TargetActuator(api, FAST)
    caches = _caches()
    targets = WatchedTargets(TargetActuator(api, FAST), caches, api)
    query = "deployments in team (fields metadata.name=web-placeholder)"
    try:
        _watched_target_follows_edits(
            server, targets, actuator, caches, _target_pool(), query, server.edit_deployment
        )
    finally:
        caches.stop()


def _watched_target_follows_edits(
    server: FakeApiServer,
    targets: Any,
    actuator: Any,
    caches: Caches,
    pool: Any,
    query: str,
    edit: Callable[[str, str, dict[str, Any]], Any],
) -> None:
    """`targets` reads `pool`'s target as `actuator` does, from one cache named `query`; a
    person's edits show, an unchanged target is never read by a GET, the daemon's own write is
    never taken for a person's change."""
    plural = "/" + query.split(" ")[0].split(".")[0]
    assert targets.read(pool) == actuator.read(pool)
    shown = caches.status()[0]
    assert shown["query"] == query and shown["objects"] == 1
    before = len(server.requests("GET", plural))
    edit("team", pool.target.name, {"spec": {"replicas": 5}})  # a person
    eventually(lambda: targets.read(pool).replicas == 5)
    edit("team", pool.target.name, {"metadata": {"annotations": {PAUSED: "true"}}})
    eventually(lambda: targets.read(pool).paused)
    reads = [r for r in server.requests("GET", plural)[before:] if r.query.get("watch") != "true"]
    assert reads == [], "an unchanged target is read from the cache, not by a GET"
    targets.scale(pool, 2, "test", dry_run=False)  # the daemon's own write ...
    assert targets.read(pool).replicas == 2  # ... is never taken for a person's change
    assert server.replicas("team", pool.target.name) == 2


def test_a_missing_deployment_target_is_named_by_the_actuator(server: FakeApiServer) -> None:
    from predictive_headroom.kube.targets import TargetActuator
    from predictive_headroom.kube.watched import WatchedTargets
    from predictive_headroom.protocols import ActuatorError

    api = server.api_client()
    caches = _caches()
    targets = WatchedTargets(TargetActuator(api, FAST), caches, api)
    try:
        with pytest.raises(ActuatorError, match="not found"):
            targets.read(_target_pool("gone"))
    finally:
        caches.stop()


def _buffer_pool() -> Any:
    from predictive_headroom.policy.config import Pool

    return Pool.model_validate(
        {
            "name": "web",
            "target": {"kind": "CapacityBuffer", "namespace": "team", "name": "web-buffer"},
            "maxReplicas": 10,
        }
    )


def test_capacity_buffer_targets_are_read_from_a_watch_of_that_one_buffer() -> None:
    from predictive_headroom.kube.discovery import CapacityBufferDiscovery
    from predictive_headroom.kube.targets import TargetActuator
    from predictive_headroom.kube.watched import WatchedTargets

    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        server.add_capacity_buffer(
            "team",
            "web-buffer",
            4,
            status={"conditions": [{"type": "ReadyForProvisioning", "status": "True"}]},
        )
        server.add_capacity_buffer("team", "other-buffer", 9, pool=None)  # never read
        api = server.api_client()
        discovery = CapacityBufferDiscovery(api, FAST)
        actuator = TargetActuator(api, FAST, discovery=discovery)
        caches = _caches()
        targets = WatchedTargets(
            TargetActuator(api, FAST, discovery=discovery), caches, api, discovery
        )
        query = (
            "capacitybuffers.v1beta1.autoscaling.x-k8s.io in team (fields metadata.name=web-buffer)"
        )
        try:
            assert targets.read(_buffer_pool()).conditions[0].type == "ReadyForProvisioning"
            _watched_target_follows_edits(
                server,
                targets,
                actuator,
                caches,
                _buffer_pool(),
                query,
                server.edit_capacity_buffer,
            )
        finally:
            caches.stop()


# -- backoff and resume (issue 55) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("jitter", "at", "waits"),
    [
        (0.0, [0, 1, 3, 7, 14, 28, 55, 90, 130], [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30]),
        (1.0, [0, 2, 6], [1.6, 3.2, 6.4]),  # each wait up to twice its step
        (0.0, [0, 1, 3, 66.5, 67], [0.8, 1.6, 3.2, 0.8, 1.6]),  # a healthy minute resets it
    ],
)
def test_the_backoff_doubles_from_0_8s_to_30s_with_jitter_and_resets_after_a_healthy_minute(
    jitter: float, at: list[float], waits: list[float]
) -> None:
    from predictive_headroom.kube.watch_options import Backoff, BackoffTiming

    backoff = Backoff(BackoffTiming(), random=lambda: jitter)
    assert [round(backoff.next(now), 3) for now in at] == waits


def _fail_watches(server: FakeApiServer, status: int) -> None:
    server.fail("GET", r"^/api/v1/nodes$", status, times=None, when=_is_watch)


@pytest.mark.slow
def test_every_watch_answered_500_is_retried_with_backoff_from_its_version_without_a_list(
    server: FakeApiServer,
) -> None:
    from predictive_headroom.daemon.metrics import Metrics

    _seed_nodes(server)
    caches = _caches(watch_seconds=1)  # each watch ends after a second and is resumed
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    waits: list[tuple[str, str]] = []
    caches.on_backoff = lambda cache, reason: waits.append((cache, reason))
    watched, lister = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        _fail_watches(server, 500)
        before = len(server.requests("GET", "/api/v1/nodes"))
        time.sleep(4.0)  # the window measured: 4 s of failing watches
        window = server.requests("GET", "/api/v1/nodes")[before:]
        # Today's waits: 0.8-1.6 s, then 1.6-3.2 s, ...: at most 4 watches in 4 s. Without backoff
        # every failure re-listed and re-watched at once (64 LIST/s and 64 WATCH/s in issue 55).
        assert [r for r in window if not _is_watch(r)] == [], "a failing watch is not re-listed"
        assert 1 <= len(window) <= 5, f"{len(window)} watches in 4 s"
        assert relists == [("nodes", "start")]
        assert caches.status()[0]["backoff_waits"] == len(waits) >= 1
        assert set(waits) == {("nodes (labels pool=a)", "watch-failed")}
        metrics = Metrics()
        metrics.watch_backed_off(*waits[0])
        exposed = metrics.exposition().decode()
        assert (
            'predictive_headroom_watch_backoff_total{cache="nodes (labels pool=a)",'
            'reason="watch-failed"}' in exposed
        )
        server.clear_faults()  # the API server recovers: the cache follows again, without a list
        server.add_node("a-9", labels={"pool": "a"})
        eventually(lambda: watched.read_nodes("pool=a") == lister.read_nodes("pool=a"), 60)
        assert relists == [("nodes", "start")]
    finally:
        caches.stop()


@pytest.mark.slow
def test_every_watch_answered_410_relists_at_the_pace_of_the_backoff(
    server: FakeApiServer,
) -> None:
    _seed_nodes(server)
    caches = _caches()
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    watched, _ = _readers(server, caches)
    try:
        _fail_watches(server, 410)
        watched.read_nodes("pool=a")
        time.sleep(4.0)
        lists = _lists(server, "/api/v1/nodes")
        # A wait before each re-list (0.8-1.6 s, 1.6-3.2 s, ...): at most 4 lists in 4 s; without
        # it a 410 on every watch cost 37.8 LIST/s (issue 55).
        assert 2 <= lists <= 5, f"{lists} lists in 4 s"
        assert ("nodes", "gone") in relists
    finally:
        caches.stop()


@pytest.mark.slow
def test_a_cut_connection_resumes_the_watch_from_its_last_version_without_a_list(
    server: FakeApiServer,
) -> None:
    _seed_nodes(server)
    caches = _caches()
    relists: list[tuple[str, str]] = []
    caches.on_relist = lambda resource, reason: relists.append((resource, reason))
    watched, lister = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        server.add_node("a-8", labels={"pool": "a"})  # moves the watch past the list's version
        eventually(lambda: watched.read_nodes("pool=a").state.nodes == 5)
        seen = int(server.requests("GET", "/api/v1/nodes")[-1].query.get("resourceVersion", 0))
        assert server.cut_connections() >= 1  # the watch's connection among them
        server.add_node("a-9", labels={"pool": "a"})
        eventually(lambda: watched.read_nodes("pool=a") == lister.read_nodes("pool=a"))
        assert relists == [("nodes", "start")], "a dropped watch is resumed, not listed again"
        resumed = [r for r in server.requests("GET", "/api/v1/nodes") if _is_watch(r)][-1]
        assert int(resumed.query["resourceVersion"]) > seen  # from the version it had reached
    finally:
        caches.stop()


def test_waits_go_through_the_injected_sleep_doubling_to_the_cap(server: FakeApiServer) -> None:
    """The clock's waits are injectable: every watch failing, a cache asks the sleep for waits
    that double from 0.8 s and stop growing at 30 s (up to twice that with jitter)."""
    _seed_nodes(server)
    _fail_watches(server, 500)
    waits: list[float] = []
    caches = Caches(WatchOptions(sync_wait=10.0), FAST, sleep=lambda seconds: waits.append(seconds))
    watched, _ = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        eventually(lambda: len(waits) >= 9)
        for step, wait in zip([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30], waits, strict=False):
            assert step <= wait <= 2 * step
        assert _lists(server, "/api/v1/nodes") == 1  # the first list only
    finally:
        caches.stop()
