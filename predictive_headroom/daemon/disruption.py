"""Each reconcile's look at the nodes on their way out: the disruption component of every pool.

From the pool's node list (the one `Inputs.nodes` reads anyway) a `DisruptionWatch` finds the
leaving nodes (cordoned, or tainted with one of the pool's `disruption.taints`) and the room their
pods need (`core.disruption`):

- with `list pods` cluster-wide (opt-in: `PH_DISRUPTION_READ_PODS`, the chart's
  `disruption.readPods`), the pods bound to each leaving node, listed once per reconcile per node.
  A pod that left the node (evicted) still counts for one lead time after it was last seen there:
  it is waiting for room elsewhere, and within a lead time a node the autoscaler adds for it is up.
  The room is held until then or until the node is gone, whichever comes first;
- without it (or on a 403), each leaving node's allocatable in placeholders, as if it were full,
  and the plan's details say so (`disruption_source: allocatable-estimate`, `disruption_note`).

It also measures the interruption rate of each pool: nodes that left the list while carrying a
removal taint, per node-hour of the pool's nodes, over a week; on spot capacity the spot reserve
uses the larger of that and the pool's `interruptionRate`.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections import deque
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.core.disruption import (
    CORDONED,
    DisruptionPart,
    in_placeholders,
    leaving_why,
    node_slots,
    reserve_quantile,
    spot_reserve,
    sum_requests,
)
from predictive_headroom.core.vocabulary import DisruptionSource
from predictive_headroom.daemon.closedloop import pool_node_selector
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.kube.errors import Forbidden
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import NodePodReader, NodeSeen, PodOnNode

logger = logging.getLogger(__name__)

DAY = 86400.0
NOT_ALLOWED = (
    "pods are not read (set disruption.readPods in the chart, PH_DISRUPTION_READ_PODS=true): "
    "each leaving node's allocatable in placeholders, as if it were full"
)


@dataclass(frozen=True)
class DisruptionSettings:
    """How the watch reads pods and measures the interruption rate."""

    read_pods: bool = False
    """List the pods on each leaving node (needs `list pods` cluster-wide)."""
    window_seconds: float = 7 * DAY
    min_node_hours: float = 24.0
    """Node-hours seen before the measured interruption rate is used."""
    max_gap_seconds: float = 600.0
    """A longer gap between reconciles counts as this much (the daemon was not looking)."""


@dataclass
class _Leaving:
    name: str
    why: str
    since: float
    pods: dict[str, tuple[tuple[tuple[str, float], ...], float | None]] = field(
        default_factory=dict
    )
    """pod uid -> (requests, when it was first seen gone from the node)."""


@dataclass
class _PoolWatch:
    leaving: dict[str, _Leaving] = field(default_factory=dict)
    node_hours: deque[tuple[float, float]] = field(default_factory=deque)
    interruptions: deque[float] = field(default_factory=deque)
    last_at: float | None = None
    last: DisruptionPart | None = None

    def prune(self, since: float) -> None:
        while self.node_hours and self.node_hours[0][0] < since:
            self.node_hours.popleft()
        while self.interruptions and self.interruptions[0] < since:
            self.interruptions.popleft()


class DisruptionWatch:
    """The disruption component of each pool (see the module docstring)."""

    def __init__(
        self,
        inputs: Inputs,
        pods: NodePodReader | None,
        metrics: Metrics,
        settings: DisruptionSettings | None = None,
    ) -> None:
        self.inputs, self.pods, self.metrics = inputs, pods, metrics
        self.settings = settings or DisruptionSettings()
        self.pools: dict[str, _PoolWatch] = {}
        self._lock = threading.Lock()
        self._reads: dict[str, Future[tuple[PodOnNode, ...]]] = {}
        self._refused: str | None = None
        """The last refusal (403) of the pod read that was logged: logged once, not every reconcile."""

    def begin(self) -> None:
        """A new reconcile: the pods on leaving nodes are listed afresh."""
        with self._lock:
            self._reads = {}

    def part(self, pool: Pool, at: float, lead: float) -> DisruptionPart | None:
        """The disruption component of `pool` now, with the lead time in use `lead` (seconds);
        None when the pool turns it off or its nodes could not be listed (the plan then leaves the
        component out)."""
        if not pool.disruption.enabled:
            return None
        try:
            nodes = self.inputs.nodes(pool_node_selector(pool)).nodes
        except Exception as exc:  # counted by Inputs as a cluster error
            logger.debug("pool %s: no node list for the disruption component: %s", pool.name, exc)
            return None
        with self._lock:
            watch = self.pools.setdefault(pool.name, _PoolWatch())
        self._count(pool, watch, nodes, at)
        room, source, note = self._room(pool, watch, nodes, at, lead)
        reserve, extra = self._reserve(pool, watch, nodes, lead)
        details: dict[str, Any] = {
            "leaving": {n.name: n.why for n in watch.leaving.values()},
            **extra,
        }
        if note:
            details["disruption_note"] = note
        part = DisruptionPart(room, reserve, len(watch.leaving), source, details)
        watch.last = part
        self.metrics.nodes_leaving.labels(pool=pool.name).set(len(watch.leaving))
        return part

    def _count(self, pool: Pool, watch: _PoolWatch, nodes: Collection[NodeSeen], at: float) -> None:
        """Node-hours since the last look; leaving nodes that are gone (an interruption when they
        carried a removal taint) or no longer leaving are forgotten; new ones remembered."""
        s = self.settings
        if watch.last_at is not None and at > watch.last_at:
            gap = min(at - watch.last_at, s.max_gap_seconds)
            watch.node_hours.append((at, len(nodes) * gap / 3600.0))
        watch.last_at = at
        taints = set(pool.disruption.taints)
        now = {n.uid: (n, leaving_why(n.taints, n.unschedulable, taints)) for n in nodes}
        for uid in list(watch.leaving):
            node, why = now.get(uid, (None, None))
            if node is None:
                gone = watch.leaving.pop(uid)
                if gone.why != CORDONED:
                    watch.interruptions.append(at)
                logger.info("pool %s: node %s (%s) is gone", pool.name, gone.name, gone.why)
            elif why is None:
                logger.info("pool %s: node %s is no longer leaving", pool.name, node.name)
                del watch.leaving[uid]
        for uid, (node, why) in now.items():
            if why is not None and uid not in watch.leaving:
                watch.leaving[uid] = _Leaving(node.name, why, at)
                logger.info("pool %s: node %s is leaving (%s)", pool.name, node.name, why)
            elif why is not None:
                watch.leaving[uid].why = why
        watch.prune(at - s.window_seconds)

    def _room(
        self, pool: Pool, watch: _PoolWatch, nodes: Collection[NodeSeen], at: float, lead: float
    ) -> tuple[int, DisruptionSource, str | None]:
        """Placeholders the leaving nodes' pods need, where that came from, and a note when estimated."""
        if not watch.leaving:
            return 0, DisruptionSource.NONE, None
        size = pool.placeholder.amounts
        by_uid = {n.uid: n for n in nodes}
        room, note = 0, None if self._may_read() else NOT_ALLOWED
        for uid, leaving in watch.leaving.items():
            pods: tuple[PodOnNode, ...] | None = None
            if note is None:
                try:
                    pods = self._pods_on(leaving.name)
                except Forbidden as exc:
                    note = f"pods could not be listed ({exc}); estimated from allocatable"
                    if str(exc) != self._refused:  # the permission is named once, not each time
                        self._refused = str(exc)
                        logger.warning("pool %s: %s; estimated from allocatable", pool.name, exc)
                except Exception as exc:
                    logger.warning(
                        "pool %s: cannot list pods on %s: %s", pool.name, leaving.name, exc
                    )
                    self.metrics.error("observe")
                    note = f"pods could not be listed ({exc}); estimated from allocatable"
            if pods is None:
                room += node_slots(dict(by_uid[uid].allocatable), size)
                continue
            _track(leaving, pods, at, lead)
            held = sum_requests(r for r, _ in leaving.pods.values())
            room += in_placeholders(held, size)
        source = DisruptionSource.ESTIMATE if note else DisruptionSource.PODS
        return room, source, note

    def _may_read(self) -> bool:
        return self.pods is not None and self.settings.read_pods

    def _pods_on(self, node: str) -> tuple[PodOnNode, ...]:
        """The pods on `node`, listed once per reconcile however many pools ask."""
        assert self.pods is not None
        with self._lock:
            future = self._reads.get(node)
            mine = future is None
            if future is None:
                future = self._reads[node] = Future()
        if mine:
            try:
                future.set_result(self.pods.pods_on_node(node))
            except Exception as exc:
                future.set_exception(exc)
        return future.result()

    def _reserve(
        self, pool: Pool, watch: _PoolWatch, nodes: Collection[NodeSeen], lead: float
    ) -> tuple[int, dict[str, Any]]:
        """The spot reserve and its details (0 when the pool is not on spot or no rate is known)."""
        spec = pool.disruption
        spot = spec.spot if isinstance(spec.spot, bool) else any(n.spot for n in nodes)
        measured = self.measured_rate(pool.name)
        if not spot:
            return 0, {"spot": False}
        rates = [r for r in (measured, spec.interruption_rate) if r is not None]
        rate = max(rates) if rates else None
        staying = [n for n in nodes if n.uid not in watch.leaving]
        size = pool.placeholder.amounts
        slots = [node_slots(dict(n.allocatable), size) for n in staying]
        per_node = int(statistics.median(slots)) if slots else 0
        quantile = reserve_quantile(pool)
        info: dict[str, Any] = {
            "spot": True,
            "interruption_rate_per_node_hour": rate,
            "interruption_rate_source": _rate_source(measured, spec.interruption_rate),
        }
        if rate is None:
            return 0, info
        reserve, expected = spot_reserve(rate, len(staying), lead, per_node, quantile)
        info["expected_interruptions_in_lead_time"] = round(expected, 4)
        return reserve, info

    def measured_rate(self, name: str) -> float | None:
        """Interruptions per node-hour of pool `name` over the window, once enough node-hours were
        seen; else None."""
        watch = self.pools.get(name)
        if watch is None:
            return None
        hours = sum(h for _, h in watch.node_hours)
        if hours < self.settings.min_node_hours:
            return None
        return len(watch.interruptions) / hours

    def parts(self) -> dict[str, DisruptionPart]:
        """The last disruption component of each pool (for the report)."""
        return {n: w.last for n, w in self.pools.items() if w.last is not None}

    def status(self) -> dict[str, Any]:
        """Per pool, for /last-run: the leaving nodes, the room and reserve, the measured rate."""
        out = {}
        for name, watch in self.pools.items():
            last = watch.last
            out[name] = {
                **(last.to_details() if last else {}),
                "replicas": last.replicas if last else 0,
                "interruptions_seen": len(watch.interruptions),
                "node_hours_seen": round(sum(h for _, h in watch.node_hours), 3),
                "measured_interruption_rate_per_node_hour": self.measured_rate(name),
            }
        return out

    def forget(self, names: Collection[str]) -> None:
        """Drop what was seen of removed pools."""
        with self._lock:
            for name in names:
                self.pools.pop(name, None)
        for name in names:
            self.metrics.forget_nodes_leaving(name)


def _track(leaving: _Leaving, pods: tuple[PodOnNode, ...], at: float, lead: float) -> None:
    """Remember the counted pods on a leaving node; a pod gone from it counts for `lead` seconds."""
    here = {p.uid: p for p in pods if not p.excluded}
    for uid, pod in here.items():
        leaving.pods[uid] = (pod.requests, None)
    for uid, (requests, left) in list(leaving.pods.items()):
        if uid in here:
            continue
        left = at if left is None else left
        if at - left >= lead:
            del leaving.pods[uid]
        else:
            leaving.pods[uid] = (requests, left)


def _rate_source(measured: float | None, configured: float | None) -> str | None:
    if measured is None and configured is None:
        return None
    if measured is None:
        return "configured"
    if configured is None or measured >= configured:
        return "measured"
    return "configured"
