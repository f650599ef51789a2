"""A node provisioner standing in for Cluster Autoscaler's kwok provider where that could not be
built (its module is not served here; see docs/e2e.md): one node group of `slots`-CPU kwok nodes.

Every `scan_interval` seconds, like Cluster Autoscaler with its defaults:

- scale-up: pods the scheduler marked unschedulable (`PodScheduled=False`, reason
  `Unschedulable`) whose priority is at least `expendable_cutoff` (default -10, Cluster
  Autoscaler's `--expendable-pods-priority-cutoff`, so placeholder pods at -1 count) ask for
  nodes; the CPU they request, less what nodes still booting will offer, becomes new nodes (whole
  nodes, up to `max_nodes`). kwok makes each one Ready after the cluster's node-ready delay.
- scale-down: a ready node whose pods request less than `utilization` (0.5, Cluster Autoscaler's
  `--scale-down-utilization-threshold`) of its slots for `unneeded_time` seconds
  (`--scale-down-unneeded-time`) is removed: an empty one at once, a non-empty one (one per scan)
  when its pods fit in the other ready nodes' free slots; its pods are evicted first and their
  Deployments make them again. Placeholders count as pods here, as they do for Cluster
  Autoscaler (their priority is above the cutoff).

It runs in a thread of the test process; `stop()` ends it. Counts of what it did are in
`added` and `removed`.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import kubernetes.client
from cluster import KWOK_LABEL, KWOK_VALUE, node_body
from kubernetes.client import ApiClient, ApiException


def _cpu(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def pod_cpu(pod: Any) -> float:
    total = 0.0
    for container in pod.spec.containers:
        requests = (container.resources and container.resources.requests) or {}
        total += _cpu(requests.get("cpu", "0"))
    return total


def unschedulable(pod: Any) -> bool:
    """Marked unschedulable by the scheduler and not about to run where it preempted room."""
    if pod.spec.node_name or pod.metadata.deletion_timestamp:
        return False
    if pod.status and pod.status.nominated_node_name:
        return False
    for condition in (pod.status and pod.status.conditions) or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.reason == "Unschedulable"
    return False


def node_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


class Provisioner:
    """See the module docstring."""

    def __init__(
        self,
        api: ApiClient,
        slots: int = 8,
        memory: str = "32Gi",
        max_nodes: int = 100,
        scan_interval: float = 2.0,
        unneeded_time: float = 60.0,
        expendable_cutoff: int = -10,
        prefix: str = "kwok-ng",
        utilization: float = 0.5,
        namespaces: set[str] | None = None,
    ) -> None:
        self.core = kubernetes.client.CoreV1Api(api)
        self.slots, self.memory, self.max_nodes = slots, memory, max_nodes
        self.scan_interval, self.unneeded_time = scan_interval, unneeded_time
        self.cutoff, self.prefix = expendable_cutoff, prefix
        self.utilization = utilization
        self.namespaces = namespaces
        """Only pending pods of these namespaces ask for nodes (None: all, as Cluster Autoscaler)."""
        self.added = 0
        self.removed = 0
        self.errors: list[str] = []
        self._empty_since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="provisioner", daemon=True)
        self._serial = 0

    def start(self) -> Provisioner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan(time.monotonic())
            except (ApiException, OSError) as exc:  # the API server may be restarting
                self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            self._stop.wait(self.scan_interval)

    def scan(self, now: float) -> None:
        selector = f"{KWOK_LABEL}={KWOK_VALUE}"
        nodes = [
            n
            for n in self.core.list_node(label_selector=selector).items
            if n.metadata.name.startswith(self.prefix)
        ]
        pods = self.core.list_pod_for_all_namespaces().items
        used: dict[str, float] = {}
        for pod in pods:
            if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
                used[pod.spec.node_name] = used.get(pod.spec.node_name, 0.0) + pod_cpu(pod)
        pending = [p for p in pods if unschedulable(p) and (p.spec.priority or 0) >= self.cutoff]
        need = sum(pod_cpu(p) for p in pending)
        booting = sum(
            self.slots - used.get(n.metadata.name, 0.0) for n in nodes if not node_ready(n)
        )
        want = math.ceil(max(0.0, need - booting) / self.slots - 1e-9)
        want = min(want, self.max_nodes - len(nodes))
        for _ in range(max(0, want)):
            self._serial += 1
            name = f"{self.prefix}-{int(time.time())}-{self._serial}"
            self.core.create_node(node_body(name, self.slots, self.memory))
            self.added += 1
        self._scale_down(nodes, pods, used, now)

    def _scale_down(
        self, nodes: list[Any], pods: list[Any], used: dict[str, float], now: float
    ) -> None:
        """Remove ready nodes used below `utilization` for `unneeded_time`: empty ones all at
        once, one non-empty node per scan whose pods fit in the others' free slots (its pods
        are evicted first; their Deployments make them again elsewhere)."""
        ready = [n for n in nodes if node_ready(n) and not n.spec.unschedulable]
        free = {n.metadata.name: self.slots - used.get(n.metadata.name, 0.0) for n in ready}
        drained = False
        for node in ready:
            name = node.metadata.name
            load = used.get(name, 0.0)
            if load >= self.utilization * self.slots:
                self._empty_since.pop(name, None)
                continue
            since = self._empty_since.setdefault(name, now)
            if now - since < self.unneeded_time:
                continue
            if load > 0:
                room = sum(f for other, f in free.items() if other != name)
                if drained or room < load:
                    continue
                for pod in pods:
                    if pod.spec.node_name == name and not pod.metadata.deletion_timestamp:
                        self.core.delete_namespaced_pod(
                            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                        )
                drained = True
            free.pop(name, None)
            self.core.delete_node(name)
            self._empty_since.pop(name, None)
            self.removed += 1
