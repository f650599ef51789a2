"""Each reconcile's look at the nodes on their way out: the daemon's `Context.leaving`, which the
disruption component (`core.disruption.read_disruption`) is read from.

From the pool's node list (the one `Inputs.nodes` reads anyway) a `DisruptionWatch` finds the
leaving nodes (cordoned, or tainted with one of the pool's `disruption.taints`) and the room their
pods need (`core.disruption`):

- with `list pods` cluster-wide (opt-in: `PH_DISRUPTION_READ_PODS`, the chart's
  `disruption.readPods`; or in the namespaces of `PH_NODE_POD_NAMESPACES` only, pods elsewhere
  not counted), the pods bound to each leaving node, from one list of the cluster's pods
  per reconcile, shared by every pool (200 leaving nodes are one list, not 200). The list runs on
  its own thread and a pool waits for it only until the reconcile's deadline; past that, the last
  list that finished (at most `LAST_LIST_MAX_AGE` old, its age said) or the allocatable estimate
  stands in, and a list still running is waited on by the next reconcile rather than started again.
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
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.core.context import Leaving
from predictive_headroom.core.disruption import (
    CORDONED,
    in_placeholders,
    leaving_why,
    node_slots,
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

ByNode = dict[str, tuple[PodOnNode, ...]]
"""The pods of the cluster by the node they are bound to."""
DAY = 86400.0
LAST_LIST_MAX_AGE = 900.0
"""Seconds a finished pod list stands in for one that did not answer within the deadline."""
NOT_READ = "pods are not read (set disruption.readPods in the chart, PH_DISRUPTION_READ_PODS=true)"
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
    listed: bool = False
    """Its pods were taken from a pod list at least once (else only the estimate is known)."""


@dataclass
class _PoolWatch:
    leaving: dict[str, _Leaving] = field(default_factory=dict)
    node_hours: deque[tuple[float, float]] = field(default_factory=deque)
    interruptions: deque[float] = field(default_factory=deque)
    last_at: float | None = None

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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`monotonic` is the clock the reconcile's deadline (`begin`) is on."""
        self.inputs, self.pods, self.metrics = inputs, pods, metrics
        self.settings = settings or DisruptionSettings()
        self.pools: dict[str, _PoolWatch] = {}
        self._lock = threading.Lock()
        self._read: Future[ByNode] | None = None
        """This reconcile's pod list (started by the first pool with a leaving node)."""
        self._running: Future[ByNode] | None = None
        """The last pod list started (maybe by an earlier reconcile, maybe still running)."""
        self._last: tuple[ByNode, float] | None = None
        """The last pod list that finished and when (on `monotonic`)."""
        self._deadline = math.inf
        self.monotonic = monotonic
        self._refused: str | None = None
        """The last refusal (403) of the pod list that was logged: logged once, not every reconcile."""

    def begin(self, deadline: float = math.inf) -> None:
        """A new reconcile, which must be done by `deadline` (on `monotonic`): the pods on leaving
        nodes are listed afresh (unless the last list is still running: it is waited on)."""
        with self._lock:
            self._read, self._deadline = None, deadline

    def leaving(self, pool: Pool, at: float, lead: float) -> Leaving | None:
        """`pool`'s nodes on their way out at `at` (a pod gone from a leaving node counts for
        `lead` seconds) and what its spot reserve is sized from; None when its nodes could not be
        listed (the plan then leaves the component out)."""
        try:
            nodes = self.inputs.nodes(pool_node_selector(pool)).nodes
        except Exception as exc:  # counted by Inputs as a cluster error
            logger.debug("pool %s: no node list for the disruption component: %s", pool.name, exc)
            return None
        with self._lock:
            watch = self.pools.setdefault(pool.name, _PoolWatch())
        self._count(pool, watch, nodes, at)
        room, source, note = self._room(pool, watch, nodes, at, lead)
        spot, rate, staying, slots, extra = self._reserve(pool, watch, nodes)
        details: dict[str, Any] = {
            "leaving": {n.name: n.why for n in watch.leaving.values()},
            **extra,
        }
        if note:
            details["disruption_note"] = note
        self.metrics.nodes_leaving.labels(pool=pool.name).set(len(watch.leaving))
        return Leaving(room, len(watch.leaving), source, spot, rate, staying, slots, details)

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
        """Placeholders the leaving nodes' pods need, where that came from, and a note when
        estimated or taken from an older list."""
        if not watch.leaving:
            return 0, DisruptionSource.NONE, None
        size = pool.placeholder.amounts
        by_uid = {n.uid: n for n in nodes}
        listed, note = self._pods() if self._may_read() else (None, NOT_ALLOWED)
        room, estimated = 0, False
        for uid, leaving in watch.leaving.items():
            if listed is not None:
                _track(leaving, listed.get(leaving.name, ()), at, lead)
            if not leaving.listed:
                estimated = True
                room += node_slots(dict(by_uid[uid].allocatable), size)
                continue
            held = sum_requests(r for r, _ in leaving.pods.values())
            room += in_placeholders(held, size)
        source = DisruptionSource.ESTIMATE if estimated else DisruptionSource.PODS
        if note and self._may_read():
            if estimated:
                note += "; estimated from allocatable"
            elif listed is None:
                note += "; the pods each leaving node held when last listed"
        return room, source, note

    def pods_now(self) -> tuple[ByNode | None, str | None]:
        """The pods by node for this reconcile, shared by the components that count them (the
        share component too): as `_pods`, or None with why when pods are not read."""
        if not self._may_read():
            return None, NOT_READ
        return self._pods()

    def _may_read(self) -> bool:
        return self.pods is not None and self.settings.read_pods

    def _pods(self) -> tuple[ByNode | None, str | None]:
        """The pods by node from this reconcile's list, waited for until the deadline; else the
        last finished list (with a note saying how old) or None (with a note saying why)."""
        with self._lock:
            read = self._read
            if read is None:
                running = self._running
                if running is None or running.done():
                    running = self._running = self._start_list()
                read = self._read = running
        try:
            return read.result(timeout=max(0.0, self._deadline - self.monotonic())), None
        except FutureTimeout:
            why = "the pod list did not answer within the reconcile's deadline"
        except Exception as exc:
            why = f"pods could not be listed ({exc})"
        last = self._last
        if last is not None and self.monotonic() - last[1] <= LAST_LIST_MAX_AGE:
            return last[0], f"{why}; pods as listed {self.monotonic() - last[1]:.0f}s ago"
        return None, why

    def _start_list(self) -> Future[ByNode]:
        """List the cluster's pods on a daemon thread; the result (or error) lands in the Future,
        and a failure is logged and counted once, however many pools wait for it."""
        assert self.pods is not None
        reader, future = self.pods, Future[ByNode]()

        def work() -> None:
            began = self.monotonic()
            try:
                listed = reader.pods_by_node()
            except Exception as exc:
                if not isinstance(exc, Forbidden):
                    logger.warning("cannot list the pods on leaving nodes: %s", exc)
                    self.metrics.error("observe")
                elif str(exc) != self._refused:  # the missing permission is named once
                    self._refused = str(exc)
                    logger.warning("%s; estimated from allocatable", exc)
                future.set_exception(exc)
                return
            self._last = (listed, began)
            future.set_result(listed)

        threading.Thread(target=work, name="disruption-pods", daemon=True).start()
        return future

    def _reserve(
        self, pool: Pool, watch: _PoolWatch, nodes: Collection[NodeSeen]
    ) -> tuple[bool, float | None, int, int, dict[str, Any]]:
        """(spot, rate, staying nodes, placeholders a staying node holds, details): what the
        spot reserve is sized from (no rate when the pool is not on spot or none is known)."""
        spec = pool.disruption
        spot = spec.spot if isinstance(spec.spot, bool) else any(n.spot for n in nodes)
        measured = self.measured_rate(pool.name)
        if not spot:
            return False, None, 0, 0, {"spot": False}
        rates = [r for r in (measured, spec.interruption_rate) if r is not None]
        rate = max(rates) if rates else None
        staying = [n for n in nodes if n.uid not in watch.leaving]
        size = pool.placeholder.amounts
        slots = [node_slots(dict(n.allocatable), size) for n in staying]
        per_node = int(statistics.median(slots)) if slots else 0
        info: dict[str, Any] = {
            "spot": True,
            "interruption_rate_per_node_hour": rate,
            "interruption_rate_source": _rate_source(measured, spec.interruption_rate),
        }
        return True, rate, len(staying), per_node, info

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

    def status_of(self, name: str) -> dict[str, Any]:
        """What /last-run shows of pool `name`'s nodes beside its component: the interruptions
        and node-hours seen, the measured rate."""
        watch = self.pools.get(name)
        if watch is None:
            return {}
        return {
            "interruptions_seen": len(watch.interruptions),
            "node_hours_seen": round(sum(h for _, h in watch.node_hours), 3),
            "measured_interruption_rate_per_node_hour": self.measured_rate(name),
        }

    def forget(self, names: Collection[str]) -> None:
        """Drop what was seen of removed pools."""
        with self._lock:
            for name in names:
                self.pools.pop(name, None)
        for name in names:
            self.metrics.forget_nodes_leaving(name)


def _track(leaving: _Leaving, pods: tuple[PodOnNode, ...], at: float, lead: float) -> None:
    """Remember the counted pods on a leaving node; a pod gone from it counts for `lead` seconds."""
    leaving.listed = True
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
