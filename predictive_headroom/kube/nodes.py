"""What a node read counts, from a node's JSON: one parser and one count for the listing reader
(`cluster.KubeClusterReader`) and the node caches (`watched.WatchedClusterReader`).

`node_entry` keeps what the counts and the closed loop read of one node (its name, cores,
schedulability and `NodeSeen`, or why it is left out: an unreadable `status.allocatable`);
`count_nodes` turns the entries into the `NodeList` both readers answer. `parse_time` and
`condition` read the times and conditions of a node's or a pod's JSON (`kube.pods` uses them too).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from predictive_headroom.core.components import NODE_LABELS
from predictive_headroom.kube.quantity import amounts
from predictive_headroom.policy.disruption import is_spot
from predictive_headroom.protocols import ClusterState, NodeList, NodeSeen


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """What a node read keeps of one node: what the counts and the closed loop read."""

    name: str
    cpu: float
    schedulable: bool
    seen: NodeSeen | None
    problems: tuple[str, ...] = ()
    """Why the node is left out of the counts (an unreadable allocatable)."""


def node_entry(node: dict[str, Any]) -> NodeEntry:
    """The `NodeEntry` of one node's JSON: a node whose `status.allocatable` cannot be read has
    its `problems` named and nothing else; schedulable means `spec.unschedulable` is not set."""
    allocatable, problems = amounts(
        "status.allocatable", (node.get("status") or {}).get("allocatable") or {}
    )
    name = str((node.get("metadata") or {}).get("name", "?"))
    if problems:
        return NodeEntry(name, 0.0, False, None, tuple(problems))
    return NodeEntry(
        name,
        dict(allocatable).get("cpu", 0.0),
        not (node.get("spec") or {}).get("unschedulable"),
        node_seen(node, allocatable),
    )


def count_nodes(entries: Iterable[NodeEntry]) -> NodeList:
    """Node and core counts (all, and schedulable) and each node's `NodeSeen` (in the order
    given), over the entries without problems."""
    nodes = schedulable = 0
    cores = schedulable_cores = 0.0
    seen: list[NodeSeen] = []
    for entry in entries:
        if entry.problems:
            continue
        nodes, cores = nodes + 1, cores + entry.cpu
        if entry.schedulable:
            schedulable, schedulable_cores = schedulable + 1, schedulable_cores + entry.cpu
        if entry.seen is not None:
            seen.append(entry.seen)
    return NodeList(ClusterState(nodes, cores, schedulable, schedulable_cores), tuple(seen))


def node_seen(node: dict[str, Any], allocatable: tuple[tuple[str, float], ...]) -> NodeSeen | None:
    """Creation and Ready times of one node's JSON (None when it has no creation time), with
    its checked `allocatable`."""
    meta = node.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    if created is None:
        return None
    ready = condition(node, "Ready")
    since = parse_time(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None
    spec = node.get("spec") or {}
    taints = tuple(str(t.get("key", "")) for t in spec.get("taints") or () if isinstance(t, dict))
    return NodeSeen(
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        created,
        since,
        unschedulable=bool(spec.get("unschedulable")),
        taints=taints,
        spot=is_spot(meta.get("labels") or {}),
        allocatable=allocatable,
        labels=kept_labels(meta.get("labels") or {}, NODE_LABELS),
    )


def kept_labels(labels: Mapping[str, Any], keys: Collection[str]) -> tuple[tuple[str, str], ...]:
    """The (key, value) pairs of `labels` whose key is one of `keys`, sorted by key (what a node
    record keeps: the labels the registered components ask for, nothing more)."""
    if not keys or not isinstance(labels, Mapping):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in labels.items() if k in keys))


def parse_time(text: Any) -> float | None:
    """POSIX seconds of an RFC 3339 time as the API writes it (`2026-11-23T21:00:00Z`); None when
    absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The `status.conditions` entry of type `kind` of a node or pod (JSON), else {}."""
    for entry in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(entry, dict) and entry.get("type") == kind:
            return entry
    return {}
