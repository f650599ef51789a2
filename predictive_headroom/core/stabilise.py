"""The one rule between what the components want and what is written: add the reserve, limit by
the smallest cap (maxReplicas, or a registered cap that allows fewer: `core.components`), hold up
over the scale-down stabilisation window, never above that cap.

    raw     = min(wanted + reserve, cap)                                (`settle`)
    desired = min(max(raw, the raw counts of the window before), cap)   (`hold`)

where the window holds the records less than `window` seconds before the instant and `cap` is
the smallest cap at the instant (a cap wins over the hold). Two forms of
the same rule: the step form (`settle`, `hold`: one instant, the records kept by the caller),
which `planner.combine` applies at every instant, and the array form (`settle`, `hold_all`: every
instant of a regular grid at once), which the engine's whole-timeline path
(`PoolTimeline.desired_at_once`) and the re-tune's replay (`replay.tuning.stabilise`) apply.
`tests/test_stabilise.py` proves both forms against the definition above. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from predictive_headroom.core.forecast_math import rolling_max


class Record(Protocol):
    """A past unstabilised count and when it was planned (`planner.PlanRecord`)."""

    @property
    def at(self) -> float: ...

    @property
    def replicas(self) -> int: ...


def settle(wanted: Any, reserve: int, cap: Any) -> Any:
    """`min(wanted + reserve, cap)`: a count, or an array of counts (int64) over time (`cap` a
    count, or an array of counts at the same instants)."""
    if isinstance(wanted, (int, np.integer)):
        return min(int(wanted) + reserve, cap)
    return np.minimum(np.asarray(wanted, dtype=np.int64) + reserve, cap)


def hold(raw: int, at: float, recent: Iterable[Record], window: float, cap: float) -> int | None:
    """The count held up at `at` when a record less than `window` seconds before it (and before
    it, strictly) asked for more than `raw`: the largest such record, at most `cap`; None when
    nothing holds (then `raw` stands)."""
    held = max((r.replicas for r in recent if at - window < r.at < at), default=None)
    if held is None or held <= raw:
        return None
    return min(held, cap)


def window_steps(window: float, step: float) -> int:
    """The instants a window of `window` seconds holds on a grid of `step` seconds, the current
    one included (the records strictly less than `window` before it)."""
    return max(1, math.ceil(window / step - 1e-9))


def hold_all(raw: np.ndarray, steps: int, cap: Any) -> np.ndarray:
    """The array form of `hold`: at every instant of a regular grid, the largest of the last
    `steps` raw counts (this one included), at most `cap` (a count, or the cap at each instant)."""
    return np.minimum(rolling_max(np.asarray(raw, dtype=np.int64), steps), cap)
