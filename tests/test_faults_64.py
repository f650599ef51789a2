"""Issue 64: checks that stay true, and what a fault leaves behind once it has cleared.

Item 2, adoption checks that stay true: a PriorityClass deleted and re-created under the same name
at 1000 left one cache at -1 and another at 1000; reconciles alternated between refused and
"its target now carries its label" (the label never changed), and the daemon wrote 1 -> 5 pods
that would not be preempted. Now the value comes from one watch, read at every reconcile and
confirmed right before a write; the swap is refused at once, naming the class.

Item 4, back to watching once healthy: after a run of 410 answers the node cache kept its backoff
and its reads fell back to a LIST per reconcile until it had re-listed (+7 node LISTs in 20 s with
no fault left). Now a cache that has listed once answers from its last synced state through every
re-list and wait (`stale` on /last-run), and its backoff starts again from 0.8 s once a list or a
watch succeeds."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from test_adopt import NAME, NOW, NS, _daemon, _existing, _overprovisioner_pod, _policy
from test_disruption import Clock
from test_informer import FAST, _is_watch, _lists, _readers, _seed_nodes, eventually

from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.kube.watch_options import Backoff, BackoffTiming, WatchOptions
from predictive_headroom.kube.watched import Caches, WatchedTargets

NODES = "/api/v1/nodes"
GONE = "too old resource version: 100 (4000)"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


def _reconciles(seconds: float, read: object) -> None:
    """Read as reconciles do, four times a second, for `seconds`."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        read()  # type: ignore[operator]
        time.sleep(0.25)


@pytest.mark.slow
def test_after_a_410_storm_clears_no_node_list_follows_and_reads_never_list(
    server: FakeApiServer,
) -> None:
    _seed_nodes(server)
    caches = Caches(WatchOptions(sync_wait=10.0, quiet_deadline=2.0), FAST)  # stale after 4 s
    relists: list[str] = []
    caches.on_relist = lambda resource, reason: relists.append(reason)
    watched, _ = _readers(server, caches)
    try:
        synced = watched.read_nodes("pool=a")
        # The storm: every node list and watch is answered 410, the open watch is cut.
        server.fail("GET", r"^/api/v1/nodes$", 410, times=None, message=GONE)
        server.cut_connections()

        def read_synced() -> None:
            assert watched.read_nodes("pool=a") == synced  # from memory, never a failing LIST

        _reconciles(6.0, read_synced)
        assert caches.status()[0]["stale"] is True  # /last-run says the answers are old
        server.clear_faults()
        before, relisted = _lists(server, NODES), len(relists)
        _reconciles(20.0, read_synced)  # 20 s of reconciles once the API server is healthy
        after = _lists(server, NODES) - before
        # The version is gone, so the cache lists once (when its wait ends); a read never does.
        assert after == len(relists) - relisted <= 1, f"{after} node LISTs in the 20 s"
        eventually(lambda: caches.status()[0]["stale"] is False)
        assert caches.status()[0]["mode"] == "watching"
        before = _lists(server, NODES)
        _reconciles(2.0, read_synced)
        assert _lists(server, NODES) == before  # watching again: no LIST per reconcile
    finally:
        caches.stop()


def test_a_cache_that_watches_again_waits_from_0_8s_at_its_next_fault(
    server: FakeApiServer,
) -> None:
    """Waits go through the injected sleep: failed watches grow them past 6.4 s; a watch that
    works again (bookmarks) resets them, so the next failure waits 0.8-1.6 s again."""
    server.bookmark_every = 0.1
    _seed_nodes(server)
    waits: list[float] = []
    caches = Caches(WatchOptions(sync_wait=10.0), FAST, sleep=lambda seconds: waits.append(seconds))
    watched, _ = _readers(server, caches)
    try:
        watched.read_nodes("pool=a")
        server.fail("GET", r"^/api/v1/nodes$", 500, times=None, when=_is_watch)
        server.cut_connections()
        eventually(lambda: len(waits) >= 5)
        server.clear_faults()
        time.sleep(0.5)
        eventually(lambda: caches.status()[0]["age_seconds"] < 0.2)  # bookmarks heard again
        grown, n = max(waits), len(waits)
        assert grown >= 6.4
        server.fail("GET", r"^/api/v1/nodes$", 500, times=1, when=_is_watch)
        server.cut_connections()
        eventually(lambda: len(waits) > n)
        assert 0.8 <= waits[n] <= 1.6, waits
    finally:
        caches.stop()


def test_the_backoff_starts_again_from_its_first_step_after_a_reset() -> None:
    backoff = Backoff(BackoffTiming(), random=lambda: 0.0)
    assert [backoff.next(t) for t in (0.0, 1.0, 3.0)] == [0.8, 1.6, 3.2]
    backoff.reset()
    assert backoff.next(4.0) == 0.8


# -- item 2: a PriorityClass swapped mid-run -----------------------------------------------------

CLASS = "overprovisioning"


def _scale_writes(server: FakeApiServer) -> int:
    return len([w for w in server.writes(f"{NAME}/scale") if not w.query.get("dryRun")])


@pytest.mark.parametrize("watched", [False, True])
@pytest.mark.parametrize("swap", ["re-created at 1000", "deleted", "re-created, watch behind"])
def test_a_priority_class_swapped_mid_run_is_refused_at_once_and_nothing_is_scaled_up(
    tmp_path: Path,
    server: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
    watched: bool,
    swap: str,
) -> None:
    server.add_priority_class(CLASS, -1)
    _existing(server, 2, **_overprovisioner_pod())
    api = server.api_client()
    caches = Caches(WatchOptions(sync_wait=5.0), FAST) if watched else None
    actuator = WatchedTargets(TargetActuator(api, FAST), caches, api) if caches else None
    clock = Clock(NOW)
    policy = _policy(tmp_path / "p.yaml", min_replicas=2)
    try:
        daemon = _daemon(policy, server, clock, actuator)
        assert daemon.reconcile().pools[0].action == "unchanged"  # served: 2 found, 2 planned
        if swap == "re-created, watch behind" and not watched:
            pytest.skip("without a watch every reconcile reads the class directly")
        if swap == "re-created, watch behind":
            _freeze(caches)  # type: ignore[arg-type]  # the watches see nothing more: still -1
        server.delete_priority_class(CLASS)
        if swap != "deleted":
            server.add_priority_class(CLASS, 1000)
        _policy(policy, min_replicas=8)  # and the plan now wants 8: a scale-up
        written = _scale_writes(server)
        with caplog.at_level(logging.INFO):
            for _ in range(4):  # at once, and at every reconcile after
                clock.now += 60
                outcome = daemon.reconcile().pools[0]
                assert outcome.action == "refused", outcome
                assert f"PriorityClass {CLASS}" in (outcome.error or "")
                if watched and swap != "re-created, watch behind":
                    time.sleep(0.2)  # the watch catches up; nothing may change then either
        assert _scale_writes(server) == written, "no scale-up write reached the API server"
        assert server.replicas(NS, NAME) == 2
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "carries its label" not in said and "serving it" not in said
        if swap == "re-created, watch behind":
            return
        if swap != "deleted":
            server.delete_priority_class(CLASS)
        server.add_priority_class(CLASS, -1)  # a placeholder class again
        caplog.clear()
        with caplog.at_level(logging.INFO):
            _eventually_served(daemon, clock)
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "passes the placeholder check again" in said and "carries its label" not in said
        assert server.replicas(NS, NAME) == 8
    finally:
        if caches is not None:
            caches.stop()


def _freeze(caches: Caches) -> None:
    """Stop every cache's watch but keep what it holds, and hand out those caches only: a watch
    a moment behind the API server, for as long as the test needs."""
    frozen = dict(caches._informers)
    for informer in frozen.values():
        informer.stop()
    caches.informer = lambda query, list_fn, slim: frozen[query]  # type: ignore[method-assign]


def _eventually_served(daemon, clock) -> None:  # type: ignore[no-untyped-def]
    ends = time.monotonic() + 20
    while daemon.reconcile().pools[0].action == "refused":
        assert time.monotonic() < ends, "the class at -1 again was never served"
        clock.now += 60
        time.sleep(0.1)


def test_the_priority_class_is_read_from_its_watch_not_by_a_get_per_reconcile(
    tmp_path: Path, server: FakeApiServer
) -> None:
    server.add_priority_class(CLASS, -1)
    _existing(server, 2, **_overprovisioner_pod())
    api = server.api_client()
    caches = Caches(WatchOptions(sync_wait=5.0), FAST)
    clock = Clock(NOW)
    try:
        daemon = _daemon(
            _policy(tmp_path / "p.yaml", min_replicas=2),
            server,
            clock,
            WatchedTargets(TargetActuator(api, FAST), caches, api),
        )
        for _ in range(3):
            assert daemon.reconcile().pools[0].action == "unchanged"
            clock.now += 60
        assert server.requests("GET", f"/priorityclasses/{CLASS}") == []
        watches = [r for r in server.requests("GET", "/priorityclasses") if _is_watch(r)]
        assert watches and watches[0].query["fieldSelector"] == f"metadata.name={CLASS}"
    finally:
        caches.stop()
