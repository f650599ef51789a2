"""Bytes a list-and-watch cache keeps per object (measured, not asserted).

Builds `--count` objects of each kind the daemon watches, as the API server sends them (a node
with 50 `status.images` entries, about 13 KB of JSON; a pod with one container; a `Preempted`
Event), runs each through the `slim` function its cache uses, and keeps the values keyed by
(namespace, name) as `kube.informer.Informer` does. tracemalloc measures what stays allocated,
divided by the count: what the daemon's memory grows by per object in the cluster.

    .venv/bin/python bench/informer_memory.py [--count 5000]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fake_apiserver import FakeApiServer  # noqa: E402

from predictive_headroom.kube.nodes import node_entry  # noqa: E402
from predictive_headroom.kube.pods import (  # noqa: E402
    PLACEHOLDER_LABEL,
    node_pod,
    pod_seen,
    preemption,
)


def objects(count: int) -> dict[str, list[dict[str, Any]]]:
    """`count` nodes, placeholder pods, bound pods and Preempted Events, as JSON."""
    server = FakeApiServer()
    for i in range(count):
        server.add_node(f"node-{i:05d}", cpu="8", labels={"pool": "a"}, images=50)
        server.add_scheduling_pod(
            "team",
            f"web-placeholder-7c9d8b6f5-{i:05d}",
            labels={PLACEHOLDER_LABEL: "web"},
            created="2026-11-27T01:00:00Z",
            scheduled_at="2026-11-27T01:00:05Z",
            ready_at="2026-11-27T01:00:09Z",
            node=f"node-{i:05d}",
        )
        server.add_pod("apps", f"app-{i:05d}", f"node-{i % 97}", {"cpu": "500m", "memory": "1Gi"})
        server.preempt_pod("team", f"web-placeholder-7c9d8b6f5-{i:05d}", "2026-11-27T01:10:00Z")
    found: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": [], "events": []}
    for (_, resource, _, _), obj in server._objects.items():
        found[resource].append(json.loads(json.dumps(obj)))
    return found


def kept_bytes(items: list[dict[str, Any]], slim: Callable[[dict[str, Any]], Any]) -> float:
    """Bytes per object that stay allocated for a cache of `items` made with `slim`."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cache = {}
    for obj in items:
        meta = obj["metadata"]
        cache[(meta.get("namespace", ""), meta["name"])] = slim(obj)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(cache) == len(items)
    return (after - before) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=5000)
    args = parser.parse_args()
    found = objects(args.count)
    rows = [
        ("node (NodeEntry)", found["nodes"], node_entry),
        (
            "placeholder pod (PodSeen)",
            [p for p in found["pods"] if p["metadata"]["namespace"] == "team"],
            pod_seen,
        ),
        (
            "pod on a node (PodOnNode)",
            [p for p in found["pods"] if p["metadata"]["namespace"] == "apps"],
            node_pod,
        ),
        ("Preempted Event (Preemption)", found["events"], preemption),
    ]
    print(f"{'kind':<30} {'JSON bytes':>11} {'kept bytes':>11}")
    for name, items, slim in rows:
        size = sum(len(json.dumps(o)) for o in items) / len(items)
        print(f"{name:<30} {size:>11.0f} {kept_bytes(items, slim):>11.0f}")


if __name__ == "__main__":
    main()
