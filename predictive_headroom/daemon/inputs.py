"""What a reconcile reads before it plans: each pool's node counts and its latest demand observations.

Nodes are read once per distinct label selector per reconcile, however many pools share it (from
a watched cache, or a LIST with `PH_WATCH=false`: the `ClusterReader` given decides).
Both reads may fail without failing the pool. Node counts fall back to the last good count (or,
before the first one, the target is not scaled below what it has); the failed read is on
`/last-run` either way (the pool's `failed_reads`, or its `error` before the first count) and
counted in `errors_total{kind="cluster"}`. The latest observations feed
the burst model; when they cannot be read, the planner falls back to the refit-time burst table
and says so in the plan's details (`burst_source: profile`, `burst_fallback: fresh-read-failed: ...`),
which `/last-run` shows, and `predictive_headroom_fresh_read_failures_total` counts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future

from predictive_headroom.app.fit import needs_observations, observe_pool
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.core.vocabulary import BurstFallback
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.workers import submit_bounded
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import (
    ClusterReader,
    ClusterState,
    NodeList,
    NodeReader,
    Source,
)

logger = logging.getLogger(__name__)

FRESH_READ_WORKERS = 8


class Inputs:
    """Reads the inputs of each pool's plan, remembering the last good node count per pool."""

    def __init__(self, source: Source | None, cluster: ClusterReader, metrics: Metrics) -> None:
        self.source, self.cluster, self.metrics = source, cluster, metrics
        self._clusters: dict[str, ClusterState] = {}
        self._node_reads: dict[str, Future[NodeList]] = {}
        """This reconcile's node list per label selector (read by the first pool that needs it)."""
        self._node_lock = threading.Lock()
        self._pending: dict[str, Future[History | Unobserved | None]] = {}

    def cluster_state(self, pool: Pool) -> tuple[ClusterState | None, str | None]:
        """Nodes for the proportional rule, and None; on failure the last good count (None before
        the first) and a note that says the read failed and what stands in."""
        if pool.proportional is None:
            return None, None
        try:
            state = self._count_nodes(pool.proportional.label_selector)
        except Exception as exc:
            last = self._clusters.get(pool.name)
            note = f"pool {pool.name}: cannot count nodes: {exc}; " + (
                f"planned with the last count ({last.nodes} nodes)"
                if last
                else "not scaling below the current replicas"
            )
            logger.error("%s", note)
            return last, note
        self._clusters[pool.name] = state
        return state, None

    def _count_nodes(self, selector: str) -> ClusterState:
        """The node count for `selector`, listed once per reconcile; pools sharing it wait for it."""
        return self.nodes(selector).state

    def nodes(self, selector: str) -> NodeList:
        """The nodes matching `selector`, listed once per reconcile however many pools ask (for
        their counts and for the closed loop's boot times); a failed list raises for each asker."""
        with self._node_lock:
            read = self._node_reads.get(selector)
            mine = read is None
            if read is None:
                read = self._node_reads[selector] = Future()
        if mine:
            try:
                cluster = self.cluster
                listed = (
                    cluster.read_nodes(selector)
                    if isinstance(cluster, NodeReader)
                    else NodeList(cluster.cluster_state(selector))
                )
                read.set_result(listed)
            except Exception as exc:
                self.metrics.error("cluster")
                read.set_exception(exc)
        return read.result()

    def prefetch(
        self, pools: Sequence[Pool], forecasts: Mapping[str, Forecast | NoForecast], at: float
    ) -> None:
        """Begin a reconcile: node counts are listed afresh, and the fresh reads of every pool that
        needs one start at once (they wait on Prometheus, not on the CPU, so ten pools cost about one
        round trip). `observed` then collects each."""
        with self._node_lock:
            self._node_reads = {}  # a new reconcile lists nodes afresh
        wanted = [p for p in pools if needs_observations(p, forecasts.get(p.name))]
        self._pending = {}
        if len(wanted) < 2 or self.source is None:
            return
        source = self.source
        reads = submit_bounded(
            lambda pool: observe_pool(
                pool, forecasts.get(pool.name), source, at, self._counter(pool)
            ),
            wanted,
            FRESH_READ_WORKERS,
            "fresh-read",
        )
        self._pending = {pool.name: read for pool, read in zip(wanted, reads, strict=True)}

    def observed(
        self, pool: Pool, forecast: Forecast | NoForecast | None, at: float
    ) -> History | Unobserved | None:
        """The pool's latest observations when its forecast carries a burst model (one short range
        query covering what the model's features read, started by `prefetch` or read now); None
        when nothing needs them."""
        future = self._pending.pop(pool.name, None)
        observed = (
            future.result()
            if future is not None
            else observe_pool(pool, forecast, self.source, at, self._counter(pool))
        )
        if isinstance(observed, Unobserved) and observed.why == BurstFallback.FRESH_READ_FAILED:
            self.metrics.error("fresh-read")
            self.metrics.fresh_read_failures.labels(pool=pool.name).inc()
        elif isinstance(observed, History) and len(observed):
            self.metrics.observed_demand.labels(pool=pool.name).set(float(observed.values[-1]))
        return observed

    def _counter(self, pool: Pool) -> Callable[[str, int], None]:
        """What counts the pool's latest observations dropped as implausible, by reason."""
        return lambda why, n: self.metrics.dropped(pool.name, why, n)

    def forget(self, names: set[str]) -> None:
        """Drop what is remembered of removed pools."""
        for name in names:
            self._clusters.pop(name, None)
