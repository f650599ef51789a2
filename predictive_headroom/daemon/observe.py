"""Each reconcile's look at what happened: feeds every pool's `closedloop.PoolLoop` and says which
lead time the pool plans with.

Reads, all read-only and each at most once per reconcile per kind and selector: the pool's nodes
(the same list the proportional rule uses when the selectors agree, `Inputs.nodes`), its
placeholder pods (Deployment targets; the chart labels them `predictive-headroom.io/pool`), and
the scheduler's `Preempted` Events of each placeholder namespace, shared by the pools there. A read
that fails is logged and counted (`errors_total{kind="observe"}`) and never fails the pool: the
loop carries on with what it has.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any

from predictive_headroom.core.settings import SettingSource
from predictive_headroom.daemon.closedloop import (
    LeadTime,
    LoopSettings,
    PoolLoop,
    is_auto,
    own_pods,
    placeholder_selector,
    pool_node_selector,
)
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import PodReader, PodSeen, Preemption

logger = logging.getLogger(__name__)


class LoopObserver:
    """Feeds the pools' closed loops from the cluster and hands out their lead times."""

    def __init__(
        self,
        inputs: Inputs,
        pods: PodReader | None,
        metrics: Metrics,
        settings: LoopSettings | None = None,
    ) -> None:
        self.inputs, self.pods, self.metrics = inputs, pods, metrics
        self.settings = settings or LoopSettings()
        self.loops: dict[str, PoolLoop] = {}
        self.lead_times: dict[str, LeadTime] = {}
        self._lock = threading.Lock()
        self._events: dict[str, Future[tuple[Preemption, ...]]] = {}
        self._workloads: dict[str, Future[tuple[PodSeen, ...]]] = {}

    def begin(self) -> None:
        """A new reconcile: Events are listed afresh (nodes are, by `Inputs.prefetch`)."""
        with self._lock:
            self._events, self._workloads = {}, {}

    def observe(self, pool: Pool, at: float) -> LeadTime:
        """Measure `pool` now; return the lead time it implies (`measured_lead` says whether the
        pool plans with it)."""
        with self._lock:
            loop = self.loops.get(pool.name)
            if loop is None:
                loop = self.loops[pool.name] = PoolLoop(pool, self.settings)
        self._nodes(pool, loop, at)
        if (
            self.pods is not None
            and self.settings.observe_placeholders
            and pool.target.kind == "Deployment"
        ):
            self._pods(pool, loop, at)
        lead = loop.lead_time(pool.lead_time, at)
        if not is_auto(pool):
            lead = LeadTime(
                lead.configured_seconds,
                "configured",
                lead.samples,
                lead.configured_seconds,
                lead.node_boot_seconds,
                lead.pod_start_seconds,
            )
        self.lead_times[pool.name] = lead
        self.metrics.record_lead_time(pool.name, lead.source, lead.seconds)
        return lead

    def measured_lead(self, pool: Pool) -> float | None:
        """The lead time (seconds) last measured for `pool` when it is in use (`leadTime: auto`
        and enough boots seen), else None: the input `core.settings.resolve_settings` takes."""
        lead = self.lead_times.get(pool.name)
        if lead is None or lead.source != SettingSource.MEASURED or not is_auto(pool):
            return None
        return lead.seconds

    def _nodes(self, pool: Pool, loop: PoolLoop, at: float) -> None:
        try:
            listed = self.inputs.nodes(pool_node_selector(pool))
        except Exception as exc:  # counted by Inputs as a cluster error; the plan says more
            logger.debug("pool %s: no node list for boot times: %s", pool.name, exc)
            return
        for boot in loop.observe_nodes(listed.nodes, at):
            self.metrics.node_ready.labels(pool=pool.name).observe(boot)
        if self.pods is not None and self.settings.wait_namespaces:
            self._waits(pool, loop, {n.name for n in listed.nodes}, at)

    def _waits(self, pool: Pool, loop: PoolLoop, nodes: set[str], at: float) -> None:
        assert self.pods is not None
        pods: list[PodSeen] = []
        for ns in self.settings.wait_namespaces:
            try:
                pods.extend(self._once(self._workloads, ns, self.pods.workload_pods))
            except Exception as exc:
                logger.warning(
                    "pool %s: cannot list pods in %s for pod waits: %s", pool.name, ns, exc
                )
                self.metrics.error("observe")
        for wait in loop.observe_waits(pods, nodes, at):
            self.metrics.pod_wait.labels(pool=pool.name).observe(wait)

    def _pods(self, pool: Pool, loop: PoolLoop, at: float) -> None:
        assert self.pods is not None
        ns = pool.target.namespace
        try:
            pods = own_pods(pool, self.pods.placeholder_pods(ns, placeholder_selector(pool)))
            events = self._preemptions(ns)
        except Exception as exc:
            logger.warning(
                "pool %s: cannot read placeholders for the closed loop: %s", pool.name, exc
            )
            self.metrics.error("observe")
            return
        starts, used = loop.observe_pods(pods, at)
        used += loop.observe_preemptions(events, pool.target.name, at)
        for start in starts:
            self.metrics.placeholder_start.labels(pool=pool.name).observe(start)
        if used:
            self.metrics.headroom_used.labels(pool=pool.name).inc(used)
            logger.info("pool %s: %d placeholder(s) preempted: headroom used", pool.name, used)
        if loop.last_used is not None:
            self.metrics.headroom_last_used.labels(pool=pool.name).set(loop.last_used)

    def _preemptions(self, namespace: str) -> tuple[Preemption, ...]:
        """The namespace's `Preempted` Events, listed once per reconcile for all its pools."""
        assert self.pods is not None
        return self._once(self._events, namespace, self.pods.preemptions)

    def _once(
        self, memo: dict[str, Future[Any]], namespace: str, read: Callable[[str], Any]
    ) -> Any:
        """`read(namespace)` once per reconcile (`memo` is emptied by `begin`); pools asking at the
        same time wait for the first one's answer (or its error)."""
        with self._lock:
            future = memo.get(namespace)
            mine = future is None
            if future is None:
                future = memo[namespace] = Future()
        if mine:
            try:
                future.set_result(read(namespace))
            except Exception as exc:
                future.set_exception(exc)
        return future.result()

    def status(self, at: float) -> dict[str, Any]:
        """Per pool, for /last-run: the lead time in use and the window's figures."""
        return {
            name: {
                "lead_time": self.lead_times[name].to_dict() if name in self.lead_times else None,
                **loop.summary(at),
            }
            for name, loop in self.loops.items()
        }

    def forget(self, names: Collection[str]) -> None:
        """Drop what was measured of removed pools."""
        with self._lock:
            for name in names:
                self.loops.pop(name, None)
                self.lead_times.pop(name, None)
