"""Watch-failure benchmark: what the daemon's caches ask of an API server that fails their watches.

Four caches, as a daemon with one pool keeps (nodes of the pool, all nodes, the placeholder pods,
the `Preempted` Events), against the fake kube-apiserver, in three scenarios:

- `500`: for `--seconds` every watch request is answered 500 (an overloaded API server); the open
  watches are cut at the start so every cache meets the fault.
- `410`: the same with 410 Gone on every watch (a compacting API server).
- `cuts`: `--nodes` nodes (1,000), every connection cut once a second, `--cuts` times (20): a flaky
  load balancer or network path.

It prints per scenario the LIST and WATCH requests per second per cache during the window, the
re-lists, and the bytes the server sent (what the clients had to read). Run it on another
checkout's code with `PYTHONPATH=<checkout>` (the bench then imports that `predictive_headroom`,
and this checkout's `tests/fake_apiserver.py`):

    .venv/bin/python bench/watch_failure_bench.py [--seconds 60] [--nodes 1000] [--cuts 20] [--only 500,410,cuts]
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.append(str(REPO))  # after PYTHONPATH: `PYTHONPATH=<checkout>` benches that checkout

import kubernetes.client  # noqa: E402
from fake_apiserver import FakeApiServer, Recorded  # noqa: E402

import predictive_headroom  # noqa: E402
from predictive_headroom.kube.api import CallOptions  # noqa: E402
from predictive_headroom.kube.nodes import node_entry  # noqa: E402
from predictive_headroom.kube.pods import (  # noqa: E402
    PLACEHOLDER_LABEL,
    PREEMPTED_EVENT_SELECTOR,
    pod_seen,
    preemption,
)
from predictive_headroom.kube.watch_options import WatchOptions, WatchQuery  # noqa: E402
from predictive_headroom.kube.watched import Caches  # noqa: E402

NS = "team"
CALLS = CallOptions(timeout=10.0, events=False)


def _caches(server: FakeApiServer) -> tuple[Caches, list[str]]:
    """The four caches, started and synced; their names as `_cache_of` names requests."""
    core = kubernetes.client.CoreV1Api(server.api_client())
    caches = Caches(WatchOptions(sync_wait=60.0), CALLS)
    queries = [
        (WatchQuery("nodes", "", "pool=web"), core.list_node, node_entry),
        (WatchQuery("nodes"), core.list_node, node_entry),
        (
            WatchQuery("pods", NS, f"{PLACEHOLDER_LABEL}=web"),
            functools.partial(core.list_namespaced_pod, NS),
            pod_seen,
        ),
        (
            WatchQuery("events", NS, "", PREEMPTED_EVENT_SELECTOR),
            functools.partial(core.list_namespaced_event, NS),
            preemption,
        ),
    ]
    for query, list_fn, slim in queries:
        informer = caches.informer(query, list_fn, slim)
        assert informer.current(60.0) is not None, f"cache of {query.describe()} did not sync"
    return caches, [q.describe() for q, _, _ in queries]


def _cache_of(request: Recorded) -> str:
    """The cache a request came from, named as `WatchQuery.describe` names it."""
    resource = request.path.rsplit("/", 1)[-1]
    ns = (
        request.path.split("/namespaces/")[1].split("/")[0]
        if "/namespaces/" in request.path
        else ""
    )
    query = WatchQuery(
        resource, ns, request.query.get("labelSelector", ""), request.query.get("fieldSelector", "")
    )
    return query.describe()


def _window(server: FakeApiServer, since: int) -> tuple[Counter[tuple[str, str]], int]:
    """(cache, LIST|WATCH) -> requests received after the first `since`; and how many in all."""
    got = server.requests("GET")
    counts: Counter[tuple[str, str]] = Counter()
    for request in got[since:]:
        if request.path.startswith("/api/v1/"):
            verb = "WATCH" if request.query.get("watch") == "true" else "LIST"
            counts[(_cache_of(request), verb)] += 1
    return counts, len(got)


def _seed(server: FakeApiServer, nodes: int) -> None:
    for i in range(nodes):  # about 13 KB each, a real node's size
        server.add_node(f"node-{i}", cpu="8", labels={"pool": "web"}, images=50)
    for i in range(3):
        server.add_scheduling_pod(
            NS, f"ph-{i}", labels={PLACEHOLDER_LABEL: "web"}, created="2026-11-27T01:00:00Z"
        )


def failing_watches(status: int, seconds: float) -> dict[str, Any]:
    """Every watch answered `status` for `seconds`: requests per second per cache."""
    with FakeApiServer() as server:
        _seed(server, 10)
        caches, names = _caches(server)
        relists: list[str] = []
        caches.on_relist = lambda resource, reason: relists.append(reason)
        try:
            since = len(server.requests("GET"))
            bytes_before = server.bytes_sent
            server.fail("GET", r"^/api/v1/", status, times=None, when=_is_watch)
            server.cut_connections()  # the open watches end: every cache meets the fault
            time.sleep(seconds)
            counts, _ = _window(server, since)
            sent = server.bytes_sent - bytes_before
        finally:
            caches.stop()
    return {"names": names, "counts": counts, "seconds": seconds, "relists": relists, "bytes": sent}


def _is_watch(request: Recorded) -> bool:
    return request.query.get("watch") == "true"


def cuts(nodes: int, count: int) -> dict[str, Any]:
    """`count` cuts of every connection, a second apart, with `nodes` nodes: re-lists and bytes."""
    with FakeApiServer() as server:
        _seed(server, nodes)
        caches, names = _caches(server)
        relists: list[str] = []
        caches.on_relist = lambda resource, reason: relists.append(f"{resource}:{reason}")
        try:
            since, bytes_before = len(server.requests("GET")), server.bytes_sent
            started = time.monotonic()
            for _ in range(count):
                time.sleep(1.0)
                server.cut_connections()
            time.sleep(5.0)  # the last cut's resumes (or re-lists)
            counts, _ = _window(server, since)
            took, sent = time.monotonic() - started, server.bytes_sent - bytes_before
        finally:
            caches.stop()
    return {"names": names, "counts": counts, "seconds": took, "relists": relists, "bytes": sent}


def _print(title: str, result: dict[str, Any]) -> None:
    seconds, counts = result["seconds"], result["counts"]
    print(f"\n{title} ({seconds:.0f} s)")
    print(f"  {'cache':66} {'LIST/s':>8} {'WATCH/s':>8} {'LISTs':>6} {'WATCHes':>8}")
    for name in result["names"]:
        lists, watches = counts[(name, "LIST")], counts[(name, "WATCH")]
        print(
            f"  {name:66} {lists / seconds:8.2f} {watches / seconds:8.2f} {lists:6d} {watches:8d}"
        )
    reasons = Counter(result["relists"])
    print(f"  re-lists: {sum(reasons.values())} {dict(reasons)}; bytes sent: {result['bytes']:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--cuts", type=int, default=20)
    parser.add_argument("--only", default="500,410,cuts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"predictive_headroom from {Path(predictive_headroom.__file__).parent}")
    only = set(args.only.split(","))
    if "500" in only:
        _print("every watch answered 500", failing_watches(500, args.seconds))
    if "410" in only:
        _print("every watch answered 410 Gone", failing_watches(410, args.seconds))
    if "cuts" in only:
        _print(
            f"{args.cuts} cuts of every connection, 1 s apart, {args.nodes:,} nodes",
            cuts(args.nodes, args.cuts),
        )


if __name__ == "__main__":
    main()
