"""What a reconcile reads before it plans: each pool's node counts and its latest demand observations.

Both reads may fail without failing the pool. Node counts fall back to the last good count (or,
before the first one, the target is not scaled below what it has). The latest observations feed
the burst model; when they cannot be read, the planner falls back to the refit-time burst table
and says so in the plan's details (`burst_source: profile`, `burst_fallback: fresh-read-failed: ...`),
which `/last-run` shows, and `predictive_headroom_fresh_read_failures_total` counts.
"""

from __future__ import annotations

import logging

from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.pipeline import observe_pool
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ClusterReader, ClusterState, Source

logger = logging.getLogger(__name__)


class Inputs:
    """Reads the inputs of each pool's plan, remembering the last good node count per pool."""

    def __init__(self, source: Source | None, cluster: ClusterReader, metrics: Metrics) -> None:
        self.source, self.cluster, self.metrics = source, cluster, metrics
        self._clusters: dict[str, ClusterState] = {}

    def cluster_state(self, pool: Pool) -> tuple[ClusterState | None, str | None]:
        """Nodes for the proportional rule; on failure the last good count (and a note saying so)."""
        if pool.proportional is None:
            return None, None
        try:
            state = self.cluster.cluster_state(pool.proportional.label_selector)
        except Exception as exc:
            self.metrics.error("cluster")
            last = self._clusters.get(pool.name)
            note = f"pool {pool.name}: cannot count nodes: {exc}"
            logger.error("%s; %s", note, "using the last count" if last else "not scaling below the current replicas")
            return last, None if last else note
        self._clusters[pool.name] = state
        return state, None

    def observed(self, pool: Pool, forecast: Forecast | NoForecast | None, at: float) -> History | Unobserved | None:
        """The pool's latest observations when its forecast carries a burst model (one short range
        query covering what the model's features read); None when nothing needs them."""
        observed = observe_pool(pool, forecast, self.source, at)
        if isinstance(observed, Unobserved) and observed.why == "fresh-read-failed":
            self.metrics.error("fresh-read")
            self.metrics.fresh_read_failures.labels(pool=pool.name).inc()
        elif isinstance(observed, History) and len(observed):
            self.metrics.observed_demand.labels(pool=pool.name).set(float(observed.values[-1]))
        return observed

    def forget(self, names: set[str]) -> None:
        """Drop what is remembered of removed pools."""
        for name in names:
            self._clusters.pop(name, None)
