"""The planner replayed minute by minute on the simulated cluster: `core.engine.PoolTimeline` as a
simulator strategy, fed the simulated nodes when the pool has a proportional rule."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.engine import InForce, PoolTimeline
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.policy.config import Pool


def planner_strategy(
    pool: Pool,
    times: np.ndarray,
    forecasts: InForce = (),
    observed: History | None = None,
    cores_per_node: float = 0.0,
    settings: PlanSettings | None = None,
) -> tuple[PoolTimeline, np.ndarray | Callable[[int, int], int]]:
    """The pool's plans at every minute of `times` as a simulator strategy, and the timeline that
    makes them (which also answers what the forecast component was at each minute).

    With a proportional rule the placeholder count depends on the simulated nodes (cores =
    nodes x `cores_per_node`), so a function of (step, ready nodes) is returned; otherwise the
    per-minute array. `settings` are the pool's (None: its configuration alone)."""
    timeline = PoolTimeline(pool, times, list(forecasts), observed, (), settings)
    if pool.proportional is not None:

        def decide(i: int, nodes: int) -> int:
            cores = nodes * cores_per_node
            return timeline.plan(i, ClusterState(nodes, cores, nodes, cores)).desired

        return timeline, decide
    desired = np.fromiter(
        (timeline.plan(i).desired for i in range(times.size)), dtype=np.int64, count=times.size
    )
    return timeline, desired
