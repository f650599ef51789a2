"""Settings grids and walk-forward tuning for the backtest.

The grid replays the forecast and the naive baseline at every (burst quantile, scale-down
stabilisation window) pair from the same refits. Without a proportional rule the planner's
unstabilised count does not depend on the window, so it is computed once per quantile and each
window is a trailing maximum of it (`stabilise`: `core.stabilise`'s rule, the planner's); with a rule the planner is replayed per pair.

Walk-forward tuning (`tune_walk_forward`) splices the grid: in each period (a day by default)
it uses the setting that was the cheapest reaching the target protection over the scored minutes
of the week before that period, counting only minutes whose demand was known at the period's start (the
observation delay and one data step before it: later minutes are interpolated towards samples
not yet seen). The first period, with no scored past, uses the pool's own setting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predictive_headroom.core.components import read_caps, static_cap
from predictive_headroom.core.settings import PlanSettings, SettingSource, with_values
from predictive_headroom.core.stabilise import hold_all, window_steps
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.simulator import (
    ClusterSpec,
    Metrics,
    Run,
    score,
    simulate,
)

DAY_MINUTES = 24 * 60
DEFAULT_QUANTILES = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999)
DEFAULT_WINDOWS = (300.0, 900.0, 1800.0)


@dataclass(frozen=True)
class Setting:
    """One point of the grid: a burst quantile and a scale-down stabilisation window (seconds)."""

    quantile: float
    window: float

    def label(self) -> str:
        return f"q={self.quantile:g} w={_minutes(self.window)}"


@dataclass(frozen=True)
class Walk:
    """What every walk-forward replay runs on (`tune_walk_forward`, `replay.promise.walk_forward`
    and `reserve_walk_forward`, `replay.calibration.calibrated_walk_forward`): the app pods per
    minute, the simulated cluster, the first scored minute, the first minute of each period (a
    choice is made at each), the minutes not yet known at a period's start (the observation
    delay and one data step: `known_lag`) and the cap a reserve is held under (`max_replicas`,
    the planner's rule)."""

    pods: np.ndarray
    cluster: ClusterSpec
    start: int
    period_starts: tuple[int, ...]
    known_lag: int
    max_replicas: int

    @classmethod
    def daily(
        cls, pods: np.ndarray, cluster: ClusterSpec, start: int, known_lag: int, max_replicas: int
    ) -> Walk:
        """The walk over days from `start` on (`period_starts` at `DAY_MINUTES`)."""
        starts = tuple(period_starts(start, pods.size, DAY_MINUTES))
        return cls(pods, cluster, start, starts, known_lag, max_replicas)

    def stop(self, k: int) -> int:
        """The minute period k ends at (the next one's start, else the end of the replay)."""
        starts = self.period_starts
        return starts[k + 1] if k + 1 < len(starts) else self.pods.size


@dataclass
class GridRun:
    """A family (`forecast` or `naive`) replayed at one setting."""

    family: str
    setting: Setting
    run: Run
    metrics: Metrics


@dataclass
class Tuned:
    """A family tuned walk-forward to `target`: the setting used in each period and the spliced run."""

    family: str
    target: float
    period_starts: list[int]
    choices: list[Setting]
    run: Run
    metrics: Metrics
    reached_in_past: list[float | None] = field(default_factory=list)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}m"


def stabilise(
    raw: np.ndarray, window_seconds: float, cap: int, step_seconds: float = 60.0
) -> np.ndarray:
    """The stabilised count on a regular grid: at each step the largest unstabilised count of the
    steps less than `window_seconds` ago (this one included), at most `cap` (`core.stabilise`'s
    rule in its array form)."""
    return hold_all(raw, window_steps(window_seconds, step_seconds), cap)


def replay_grid(
    pool: Pool,
    settings: PlanSettings,
    parts: dict[str, dict[float, Any]],
    windows: Sequence[float],
    plan: Callable[[Pool, Any, PlanSettings], Run],
    run_placeholders: Callable[[np.ndarray], Run],
    start: int,
) -> list[GridRun]:
    """Every family of `parts` ({family: {quantile: forecasts in force}}) at every quantile and
    window. `plan(pool, in_force, settings)` replays the engine with `settings` (each window set
    in turn); `run_placeholders` simulates a count per minute."""
    out: list[GridRun] = []
    for family, by_quantile in parts.items():
        for q, in_force in sorted(by_quantile.items()):
            raw = None
            if pool.proportional is None and not read_caps(pool):  # else each window planned
                flat = with_values(settings, SettingSource.TUNED, stabilization_seconds=0.0)
                raw = plan(pool, in_force, flat).placeholders
            for w in windows:
                if raw is not None:
                    run = run_placeholders(stabilise(raw, w, static_cap(pool)))
                else:
                    windowed = with_values(settings, SettingSource.TUNED, stabilization_seconds=w)
                    run = plan(pool, in_force, windowed)
                out.append(GridRun(family, Setting(q, w), run, score(run, start)))
    return out


def choose(
    candidates: Sequence[tuple[Setting, float, float]],
    reactive_unserved: float,
    target: float,
) -> tuple[Setting, float]:
    """The cheapest (setting, overhead, unserved) reaching `target` protection, else the most
    protective (cheapest among equals); returns the setting and the protection it reached.
    Protection is 1 when reactive left nothing unserved (then cost alone decides)."""
    if not candidates:
        raise ValueError("no settings to choose from")

    def protection(unserved: float) -> float:
        return 1.0 if reactive_unserved <= 0 else 1.0 - unserved / reactive_unserved

    reaching = [c for c in candidates if protection(c[2]) >= target - 1e-12]
    if reaching:
        best = min(reaching, key=lambda c: (c[1], c[2]))
    else:
        best = min(candidates, key=lambda c: (c[2], c[1]))
    return best[0], protection(best[2])


def period_starts(start: int, size: int, period: int) -> list[int]:
    """The first minute of each tuning period from `start` on."""
    return list(range(start, size, period)) if size > start else []


def tune_walk_forward(
    grid: Sequence[GridRun],
    family: str,
    target: float,
    reactive: Run,
    walk: Walk,
    default: Setting,
    *,
    history: int | None = 7 * DAY_MINUTES,
) -> Tuned:
    """Splice `family`'s grid runs walk-forward on `walk` (see the module docstring): the setting
    used in period k is chosen on minutes [start, b_k - known_lag), at most the last `history` of
    them (a week by default: on a series whose level grows 40x, the first weeks misjudge the
    last)."""
    runs = {g.setting: g.run for g in grid if g.family == family}
    if not runs:
        raise ValueError(f"no {family} runs in the grid")
    fallback = default if default in runs else next(iter(runs))
    start, starts = walk.start, list(walk.period_starts)
    # The prefix sums read at each period's bounds only, kept one run at a time (not 2 arrays of
    # every minute for every setting): the same sums, a fraction of the memory.
    at = _bounds(starts, start, walk.known_lag, history)
    cum = {s: (_read(r.unserved, at), _read(r.ready, at)) for s, r in runs.items()}
    react_u, react_n = _read(reactive.unserved, at), _read(reactive.ready, at)
    placeholders = runs[fallback].placeholders.copy()
    choices: list[Setting] = []
    reached: list[float | None] = []
    for k, b in enumerate(starts):
        end = b - walk.known_lag
        lo = start if history is None else max(start, end - history)
        if end <= lo:
            chosen, got = fallback, None
        else:
            r_u = react_u[end] - react_u[lo]
            r_n = react_n[end] - react_n[lo]
            cands = [
                (s, (n[end] - n[lo] - r_n) / 60.0, u[end] - u[lo]) for s, (u, n) in cum.items()
            ]
            chosen, got = choose(cands, r_u, target)
        choices.append(chosen)
        reached.append(got)
        placeholders[b : walk.stop(k)] = runs[chosen].placeholders[b : walk.stop(k)]
    run = simulate(walk.pods, placeholders, walk.cluster)
    return Tuned(family, target, starts, choices, run, score(run, start), reached)


def _bounds(starts: Sequence[int], start: int, known_lag: int, history: int | None) -> list[int]:
    """The prefix-sum indices `tune_walk_forward` reads: each period's end and first minute."""
    out = set()
    for b in starts:
        end = b - known_lag
        out.update((end, start if history is None else max(start, end - history)))
    return sorted(i for i in out if i >= 0)


def _read(values: np.ndarray, at: Sequence[int]) -> dict[int, float]:
    """`_cumsum(values)` at the indices `at` (each within 0..values.size)."""
    sums = _cumsum(values)
    return {i: float(sums[i]) for i in at if i < sums.size}


def _cumsum(values: np.ndarray) -> np.ndarray:
    """Prefix sums with a leading 0: out[j] - out[i] is the sum of values[i:j]."""
    return np.concatenate([[0], np.cumsum(values, dtype=np.float64)])
