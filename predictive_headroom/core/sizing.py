"""Placeholder size from the nodes: the classic overprovisioning recipe as arithmetic.

A placeholder that should reserve a whole node requests a fraction (default 0.9) of what a node
of the pool offers once its DaemonSets are placed: allocatable minus the DaemonSet pods' requests.
Nodes are grouped by shape (instance type and allocatable); within a shape the node with the
heaviest DaemonSets decides, so the placeholder fits on every node of that shape. Devices counted
in whole units (GPUs and other extended resources) are not scaled: the placeholder takes every
free one. Pure functions of Kubernetes objects as JSON (dicts), as `kubectl get -o json` prints
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from predictive_headroom.policy.units import parse_quantity

INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
SCALED = ("cpu", "memory")
MI = 2**20


@dataclass(frozen=True)
class Shape:
    """One node shape of the pool and the placeholder that fills `fraction` of it."""

    name: str
    nodes: list[str]
    allocatable: dict[str, Decimal]
    daemonsets: dict[str, Decimal]
    """The largest DaemonSet requests found on one node of this shape, per resource."""
    daemonset_pods: int
    placeholder: dict[str, str] = field(default_factory=dict)
    free_pods: int = 0
    instance_type: str = ""
    """The nodes' instance-type label ("" when they carry none)."""


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _resources(raw: dict[str, Any] | None) -> dict[str, Decimal]:
    return {k: Decimal(parse_quantity(v)) for k, v in (raw or {}).items()}


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What the scheduler reserves for `pod`: the larger of its containers' sum and its largest
    init container, per resource, plus the pod overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for k, v in _resources((container.get("resources") or {}).get("requests")).items():
            total[k] = total.get(k, Decimal(0)) + v
    for container in spec.get("initContainers") or []:
        for k, v in _resources((container.get("resources") or {}).get("requests")).items():
            total[k] = max(total.get(k, Decimal(0)), v)
    for k, v in _resources(spec.get("overhead")).items():
        total[k] = total.get(k, Decimal(0)) + v
    return total


def _is_daemonset_pod(pod: dict[str, Any]) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    phase = (pod.get("status") or {}).get("phase")
    return any(o.get("kind") == "DaemonSet" for o in owners) and phase not in (
        "Succeeded",
        "Failed",
    )


def _shape_key(node: dict[str, Any]) -> tuple[str, tuple[tuple[str, Decimal], ...]]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    itype = next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), "")
    allocatable = _resources((node.get("status") or {}).get("allocatable"))
    kept = tuple(sorted((k, v) for k, v in allocatable.items() if k in SCALED or "/" in k))
    return itype, kept


def _placeholder(free: dict[str, Decimal], fraction: float) -> dict[str, str]:
    out: dict[str, str] = {}
    cpu = free.get("cpu", Decimal(0)) * Decimal(str(fraction))
    if cpu > 0:
        out["cpu"] = f"{math.floor(cpu * 1000)}m"
    memory = free.get("memory", Decimal(0)) * Decimal(str(fraction))
    if memory > 0:
        out["memory"] = f"{math.floor(memory / MI)}Mi"
    for name, value in sorted(free.items()):
        if "/" in name and value >= 1:
            out[name] = str(math.floor(value))
    return out


def node_shapes(
    items: list[dict[str, Any]], selector: dict[str, str] | None = None, fraction: float = 0.9
) -> list[Shape]:
    """The pool's node shapes (nodes matching `selector`, cordoned ones left out) with the
    placeholder requests that fill `fraction` of each after its DaemonSets."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} must be above 0 and at most 1, e.g. 0.9")
    nodes = [
        o
        for o in items
        if o.get("kind", "Node") == "Node"
        and "allocatable" in (o.get("status") or {})
        and _matches((o.get("metadata") or {}).get("labels") or {}, selector or {})
        and not (o.get("spec") or {}).get("unschedulable")
    ]
    per_node: dict[str, tuple[dict[str, Decimal], int]] = {}
    for pod in items:
        if pod.get("kind", "Pod") != "Pod" or "containers" not in (pod.get("spec") or {}):
            continue
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and _is_daemonset_pod(pod):
            used, count = per_node.get(node_name, ({}, 0))
            for k, v in pod_requests(pod).items():
                used[k] = used.get(k, Decimal(0)) + v
            per_node[node_name] = (used, count + 1)
    groups: dict[tuple[str, tuple[tuple[str, Decimal], ...]], list[dict[str, Any]]] = {}
    for node in nodes:
        groups.setdefault(_shape_key(node), []).append(node)
    shapes = []
    for (itype, kept), members in sorted(groups.items(), key=lambda g: (g[0][0], str(g[0][1]))):
        names = sorted(n["metadata"]["name"] for n in members)
        allocatable = dict(kept)
        worst: dict[str, Decimal] = {}
        pods = 0
        for name in names:
            used, count = per_node.get(name, ({}, 0))
            pods = max(pods, count)
            for k, v in used.items():
                worst[k] = max(worst.get(k, Decimal(0)), v)
        free = {k: max(Decimal(0), v - worst.get(k, Decimal(0))) for k, v in allocatable.items()}
        pod_slots = min(
            int(_resources(n["status"]["allocatable"]).get("pods", 110)) for n in members
        )
        label = itype or f"{_cpu(allocatable.get('cpu'))} CPU, {_gib(allocatable.get('memory'))}"
        shapes.append(
            Shape(
                label,
                names,
                allocatable,
                worst,
                pods,
                _placeholder(free, fraction),
                pod_slots - pods,
                itype,
            )
        )
    return shapes


def _cpu(value: Decimal | None) -> str:
    return f"{float(value or 0):g}"


def _gib(value: Decimal | None) -> str:
    return f"{float(value or 0) / 2**30:.1f}Gi"


def is_accelerated(shape: Shape) -> bool:
    """Whether the shape offers an extended resource such as `nvidia.com/gpu` (any name with a
    `/`): such nodes get placeholders of their own, never merged with general-purpose ones."""
    return any("/" in k and v > 0 for k, v in shape.allocatable.items())


def common_placeholder(shapes: list[Shape]) -> dict[str, str]:
    """Requests one placeholder may make to fit on every shape: the smallest suggestion of each
    resource that every shape's suggestion names."""
    shared = set.intersection(*(set(s.placeholder) for s in shapes)) if shapes else set()
    return {
        k: min((s.placeholder[k] for s in shapes), key=lambda v: Decimal(parse_quantity(v)))
        for k in sorted(shared, key=lambda k: (k not in SCALED, k))
    }


def app_pods_per_placeholder(placeholder: dict[str, str], app_pod: dict[str, str]) -> int:
    """How many app pods requesting `app_pod` fit in the room one placeholder holds."""
    fits = [
        math.floor(Decimal(parse_quantity(placeholder.get(k, "0"))) / Decimal(parse_quantity(v)))
        for k, v in app_pod.items()
        if Decimal(parse_quantity(v)) > 0
    ]
    return min(fits) if fits else 0
