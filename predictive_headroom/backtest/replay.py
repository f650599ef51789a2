"""The planner replayed minute by minute on the simulated cluster: schedule floors per minute, and
`planner.combine` with scale-down stabilisation as a simulator strategy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from predictive_headroom.core.planner import ForecastPart, PlanRecord, combine
from predictive_headroom.core.proportional import proportional_floor
from predictive_headroom.core.schedules import open_intervals
from predictive_headroom.policy.config import Pool, Proportional, ScheduleWindow
from predictive_headroom.protocols import ClusterState


def schedule_series(
    windows: Sequence[ScheduleWindow], times: np.ndarray, lead: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per minute: the schedule floor and the index of the window setting it (-1: none open)."""
    best = np.zeros(times.size, dtype=np.int64)
    which = np.full(times.size, -1, dtype=np.int64)
    if not times.size:
        return best, which
    for k, window in enumerate(windows):
        for a, b in open_intervals(window, float(times[0]), float(times[-1]), lead):
            i, j = np.searchsorted(times, [a, b], side="left")
            seg = slice(int(i), int(j))
            better = (which[seg] < 0) | (window.desired_replicas > best[seg])
            best[seg] = np.where(better, window.desired_replicas, best[seg])
            which[seg] = np.where(better, k, which[seg])
    return best, which


def planner_strategy(
    pool: Pool,
    times: np.ndarray,
    schedule: tuple[np.ndarray, np.ndarray],
    parts: Sequence[ForecastPart],
    rule: Proportional | None,
    cores_per_node: float,
) -> np.ndarray | Callable[[int, int], int]:
    """The planner as a simulator strategy: combine() each minute with scale-down stabilisation.

    With a proportional rule the placeholder count depends on the simulated nodes, so a function
    of (step, ready nodes) is returned; otherwise the per-minute array.
    """
    floor, which = schedule
    names = [w.name for w in pool.schedules]
    window = pool.scale_down_stabilization.total_seconds()
    recent: deque[PlanRecord] = deque()

    @lru_cache(maxsize=4096)
    def cpa(nodes: int) -> int | None:
        if rule is None:
            return None
        cores = nodes * cores_per_node
        return proportional_floor(rule, ClusterState(nodes, cores, nodes, cores))

    def decide(i: int, nodes: int) -> int:
        at = float(times[i])
        while recent and recent[0].at <= at - window:
            recent.popleft()
        sched = (int(floor[i]), names[which[i]]) if which[i] >= 0 else None
        plan = combine(pool, at, sched, cpa(nodes), parts[i], recent)
        recent.append(plan.record())
        return plan.desired

    if rule is not None:
        return decide
    return np.fromiter((decide(i, 0) for i in range(times.size)), dtype=np.int64, count=times.size)
