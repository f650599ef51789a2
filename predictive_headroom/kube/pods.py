"""Read-only reads for the closed loop: a pool's placeholder pods and the scheduler's preemptions.

Both are lists read as JSON (only the fields used are looked at), with the timeouts and retries of
`kube.api`; a 403 names the missing read permission; a page whose continue token expired (410)
restarts the list (`cluster.list_items`). Nothing here writes.

- Placeholder pods: `status.conditions` say when a pod was scheduled (`PodScheduled`), when it
  became `Ready`, and whether the scheduler chose it as a preemption victim (`DisruptionTarget`,
  status True, reason `PreemptionByScheduler`; `PreemptionByKubeScheduler` before Kubernetes 1.27).
- Preemptions: core/v1 Events with `reason=Preempted` on pods (field selectors, so the API server
  filters): the scheduler records one on each victim, "Preempted by pod <uid> on node <node>".
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.core.context import QuotaRoom
from predictive_headroom.kube.api import CallOptions, _Op
from predictive_headroom.kube.cluster import list_items
from predictive_headroom.kube.nodes import condition, parse_time
from predictive_headroom.kube.quantity import amounts
from predictive_headroom.kube.quotas import list_quota_room
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.target import POOL_LABEL
from predictive_headroom.protocols import ActuatorError, PodOnNode, PodSeen, Preemption

logger = logging.getLogger(__name__)

PREEMPTION_REASONS = ("PreemptionByScheduler", "PreemptionByKubeScheduler")
"""`DisruptionTarget` reasons the scheduler sets on a victim (the second before Kubernetes 1.27)."""
PREEMPTED_EVENT_SELECTOR = "reason=Preempted,involvedObject.kind=Pod"


class PodReadError(ActuatorError):
    """Pods or Events could not be listed; the message names the permission or the failure."""


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set on the API's copy of a static pod the kubelet runs (a mirror pod)."""
PLACEHOLDER_LABEL = POOL_LABEL


class KubePodReader:
    """Lists placeholder pods and preemption Events (implements `protocols.PodReader`)."""

    def __init__(
        self,
        api_client: ApiClient,
        options: CallOptions | None = None,
        page_size: int = 500,
        node_namespaces: tuple[str, ...] = (),
    ) -> None:
        self.options = options or CallOptions()
        self.page_size = page_size
        self.node_namespaces = node_namespaces
        """Where `pods_by_node` lists (`list pods` in each); empty: every namespace."""
        self._core = kubernetes.client.CoreV1Api(api_client)

    def _list(
        self, op: _Op, method: Any, error: type[ActuatorError] = PodReadError, **query: Any
    ) -> list[dict[str, Any]]:
        return list_items(op, self.options, method, error, self.page_size, **query)

    def placeholder_pods(self, namespace: str, label_selector: str) -> tuple[PodSeen, ...]:
        """The pods of `namespace` matching `label_selector`, with their scheduling times."""
        op = _Op("list", "pods", "", "Pod", namespace, label_selector, "")
        items = self._list(
            op,
            self._core.list_namespaced_pod,
            namespace=namespace,
            label_selector=label_selector or None,
        )
        return tuple(p for p in map(pod_seen, items) if p is not None)

    def workload_pods(self, namespace: str) -> tuple[PodSeen, ...]:
        """The pods of `namespace` that have not ended (the opt-in pod-wait measure)."""
        op = _Op("list", "pods", "", "Pod", namespace, "", "")
        items = self._list(
            op, self._core.list_namespaced_pod, namespace=namespace, field_selector=LIVE_PODS
        )
        return tuple(p for p in map(pod_seen, items) if p is not None)

    def preemptions(self, namespace: str) -> tuple[Preemption, ...]:
        """The scheduler's `Preempted` Events on pods of `namespace` (as long as the API keeps them,
        one hour by default)."""
        op = _Op("list", "events", "", "Event", namespace, "reason=Preempted", "")
        items = self._list(
            op,
            self._core.list_namespaced_event,
            namespace=namespace,
            field_selector=PREEMPTED_EVENT_SELECTOR,
        )
        return tuple(p for p in map(preemption, items) if p is not None)

    def quota_room(self, pool: Pool) -> QuotaRoom:
        """The ResourceQuotas of `pool`'s namespace and its own live placeholder pods, listed
        (`kube.quotas`)."""
        return list_quota_room(self._core, self.options, pool)

    def pods_by_node(self) -> dict[str, tuple[PodOnNode, ...]]:
        """The pods that are bound to a node and have not ended, by node name: of every namespace
        from one (paged) list (needs `list pods` cluster-wide), or of each of `node_namespaces`
        (one list each, `list pods` there). Failures are the typed `kube.errors` (a `Forbidden`
        without the permission)."""
        pairs: list[tuple[str, PodOnNode]] = []
        for namespace in self.node_namespaces or ("",):
            pairs.extend(self.node_pods(namespace))
        return by_node(pairs)

    def node_pods(self, namespace: str) -> list[tuple[str, PodOnNode]]:
        """(node name, pod) of the pods of `namespace` ("": every namespace) bound to a node that
        have not ended, from one (paged) list."""
        op = _Op("list", "pods", "", "Pod", namespace, NODE_PODS, "")
        if namespace:
            method: Any = functools.partial(self._core.list_namespaced_pod, namespace)
        else:
            method = self._core.list_pod_for_all_namespaces
        items = self._list(op, method, error=ActuatorError, field_selector=NODE_PODS)
        return [pair for pair in map(node_pod, items) if pair is not None]


def node_pod(pod: dict[str, Any]) -> tuple[str, PodOnNode] | None:
    """(node name, `PodOnNode`) of one pod's JSON; None for a pod bound to no node."""
    node = (pod.get("spec") or {}).get("nodeName")
    return (str(node), pod_on_node(pod)) if node else None


def by_node(pairs: Iterable[tuple[str, PodOnNode]]) -> dict[str, tuple[PodOnNode, ...]]:
    """The pods of `pairs` grouped by node name."""
    grouped: dict[str, list[PodOnNode]] = {}
    for node, pod in pairs:
        grouped.setdefault(node, []).append(pod)
    return {node: tuple(pods) for node, pods in grouped.items()}


LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
NODE_PODS = f"spec.nodeName!=,{LIVE_PODS}"
"""The pods bound to a node that have not ended (a field selector)."""


def preemption(event: dict[str, Any]) -> Preemption | None:
    """The scheduler's `Preempted` Event (JSON) as a `Preemption`; None for any other Event."""
    involved = event.get("involvedObject") or {}
    at = parse_time(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
    )
    if event.get("reason") != "Preempted" or involved.get("kind") != "Pod" or at is None:
        return None
    return Preemption(str(involved.get("name", "")), str(involved.get("uid", "")), at)


def pod_on_node(pod: dict[str, Any]) -> PodOnNode:
    """One pod's effective requests (per resource the larger of its containers' sum and its
    largest init container, plus the pod overhead) and whether the disruption component leaves it
    out: owned by a DaemonSet (it goes with the node), a mirror pod (static, node-bound) or a
    placeholder (the headroom itself)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    total: dict[str, float] = {}
    problems: list[str] = []

    def requests(field: str, resources: Any) -> tuple[tuple[str, float], ...]:
        good, bad = amounts(field, resources)
        problems.extend(bad)
        return good

    for container in spec.get("containers") or ():
        field = f"spec.containers[{container.get('name')}].resources.requests"
        for name, amount in requests(field, (container.get("resources") or {}).get("requests")):
            total[name] = total.get(name, 0.0) + amount
    for container in spec.get("initContainers") or ():
        field = f"spec.initContainers[{container.get('name')}].resources.requests"
        for name, amount in requests(field, (container.get("resources") or {}).get("requests")):
            total[name] = max(total.get(name, 0.0), amount)
    for name, amount in requests("spec.overhead", spec.get("overhead")):
        total[name] = total.get(name, 0.0) + amount
    if problems:
        logger.warning(
            "pod %s/%s: %s; those requests are left out of the disruption component",
            meta.get("namespace", ""),
            meta.get("name", ""),
            "; ".join(problems),
        )
    owners = meta.get("ownerReferences") or ()
    excluded = (
        any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners)
        or MIRROR_ANNOTATION in (meta.get("annotations") or {})
        or PLACEHOLDER_LABEL in (meta.get("labels") or {})
    )
    return PodOnNode(
        str(meta.get("name", "")), str(meta.get("uid", "")), tuple(sorted(total.items())), excluded
    )


def pod_seen(pod: dict[str, Any]) -> PodSeen | None:
    """One pod's times from its JSON (None without a creation time)."""
    meta = pod.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    if created is None:
        return None
    scheduled, ready = condition(pod, "PodScheduled"), condition(pod, "Ready")
    disruption = condition(pod, "DisruptionTarget")
    preempted = (
        parse_time(disruption.get("lastTransitionTime")) or created
        if disruption.get("status") == "True" and disruption.get("reason") in PREEMPTION_REASONS
        else None
    )
    return PodSeen(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        created=created,
        scheduled_since=_since(scheduled),
        ready_since=_since(ready),
        preempted_at=preempted,
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
    )


def _since(entry: dict[str, Any]) -> float | None:
    return parse_time(entry.get("lastTransitionTime")) if entry.get("status") == "True" else None
