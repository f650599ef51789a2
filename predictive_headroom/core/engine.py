"""The plan over time: one pool's stabilised plans at a sequence of instants, computed one way.

The daemon (one instant per reconcile), `plan --at` and `plan --horizon`, the report's horizon and
the backtest's minute-by-minute replay all plan through `PoolTimeline`, so they give the same
answer for the same inputs. The API:

- `PlanInputs(forecast, observed, cluster, settings)`: what is known about a pool, and the
  settings it plans with (`core.settings.PlanSettings`, resolved by the caller: the shell knows
  the measured lead time and the re-tune).
- `plan_over_time(pool, times, inputs, recent=())` -> `Timeline(plans, recent)`: the plans at
  `times` (ascending), scale-down stabilisation carried from `recent` (the records a previous
  call returned) through every instant.
- `PoolTimeline(pool, times, forecasts, observed, recent, settings)`: the stepping form, for
  callers whose cluster changes between instants (the backtest feeds it the simulated nodes).
  `forecasts` may name several forecasts, each in force from an instant on (the backtest's refits).

The pool gives the floors (schedules, proportional rule, min and max); the lead time, the
scale-down stabilisation window and the demand per replica come from the settings only.

Per forecast in force, the forecast component is computed for all its instants at once (the ramp,
the burst decision of `core.forecast_math`), and the schedule floor for all instants at once
(`schedule_series`); then each instant is combined and stabilised in order (`planner.combine`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import Count, Part, later, read_caps, static_cap
from predictive_headroom.core.forecast_math import (
    BurstAllowances,
    burst_allowances,
    ramp_at,
)
from predictive_headroom.core.planner import (
    ForecastPart,
    Plan,
    PlanRecord,
    SchedulePart,
    combine,
)
from predictive_headroom.core.proportional import proportional_floor
from predictive_headroom.core.schedules import open_intervals
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.stabilise import hold_all, settle
from predictive_headroom.core.vocabulary import Component, ForecastStatus
from predictive_headroom.policy.config import Pool, ScheduleWindow

AnyForecast = Forecast | NoForecast | None
InForce = Sequence[tuple[float, AnyForecast]]
"""Forecasts each in force from an instant on, ascending; before the first, the pool is warming up."""


@dataclass(frozen=True)
class PlanInputs:
    """What is known about one pool: its forecast (None: it forecasts nothing; a NoForecast says
    why a configured one is missing), its latest observations for the burst model (or why they are
    missing), the cluster for the proportional rule (None leaves that rule out) and the settings it
    plans with (`resolve_settings` in the shell, which knows the measured lead time and the
    re-tune)."""

    forecast: AnyForecast
    observed: History | Unobserved | None
    cluster: ClusterState | None
    settings: PlanSettings
    parts: Mapping[str, Part] = field(default_factory=dict)
    """The registered components known, by name (`core.components`; one missing is left out of
    the plan): all of each at the first instant, its `Part.later` after (the report's horizon:
    the disruption component's spot reserve alone, since when leaving nodes go is not known)."""


@dataclass(frozen=True)
class Timeline:
    """The plans at each instant asked for, and the records to pass as `recent` next time."""

    plans: tuple[Plan, ...]
    recent: tuple[PlanRecord, ...]


def schedule_series(
    windows: Sequence[ScheduleWindow], times: np.ndarray, lead: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per instant of `times` (ascending): the schedule floor, the index of the window setting it
    (-1: none open) and which windows are open (a (windows, instants) boolean array). Among open
    windows the highest `desiredReplicas` wins, the first listed among equals."""
    times = np.asarray(times, dtype=float)
    best = np.zeros(times.size, dtype=np.int64)
    which = np.full(times.size, -1, dtype=np.int64)
    open_ = np.zeros((len(windows), times.size), dtype=bool)
    if not times.size:
        return best, which, open_
    for k, window in enumerate(windows):
        for a, b in open_intervals(window, float(times[0]), float(times[-1]), lead):
            i, j = np.searchsorted(times, [a, b], side="left")
            seg = slice(int(i), int(j))
            open_[k, seg] = True
            better = (which[seg] < 0) | (window.desired_replicas > best[seg])
            best[seg] = np.where(better, window.desired_replicas, best[seg])
            which[seg] = np.where(better, k, which[seg])
    return best, which, open_


@dataclass(frozen=True)
class _Parts:
    """The forecast component at every instant one forecast is in force (arrays, one per field)."""

    status: np.ndarray
    replicas: np.ndarray
    ramp: np.ndarray
    yhat: np.ndarray
    bursts: BurstAllowances | None


def _forecast_parts(
    pool: Pool,
    settings: PlanSettings,
    forecast: AnyForecast,
    at: np.ndarray,
    observed: History | Unobserved | None,
) -> _Parts:
    """The forecast component of `pool` at each instant of `at` (see `core.forecast_math`)."""
    n = at.size
    nothing = np.zeros(n)
    spec = pool.forecast
    if spec is None or not spec.enabled:
        status = ForecastStatus.NOT_CONFIGURED if spec is None else ForecastStatus.DISABLED
        return _Parts(np.full(n, str(status), dtype=object), np.full(n, -1), nothing, nothing, None)
    if settings.fixed is not None:  # the re-tune set the forecast aside for a fixed N
        fixed = np.full(n, settings.fixed.value, dtype=np.int64)
        return _Parts(
            np.full(n, str(ForecastStatus.FIXED), dtype=object), fixed, nothing, nothing, None
        )
    if not isinstance(forecast, Forecast):
        why = ForecastStatus.NO_HISTORY if forecast is None else forecast.why
        return _Parts(np.full(n, str(why), dtype=object), np.full(n, -1), nothing, nothing, None)
    lead = settings.lead
    first = forecast.times[0] - max(forecast.step_seconds, 1.0) if forecast.times.size else math.inf
    covered = (at >= first) & (at <= forecast.expires_at)
    status = np.where(covered, str(ForecastStatus.OK), str(ForecastStatus.EXPIRED)).astype(object)
    ramp = ramp_at(forecast.times, forecast.ramp_curve, at, lead)
    bursts = burst_allowances(forecast, at, lead, observed)
    total = np.maximum(0.0, ramp + bursts.values)
    assert settings.demand_per_replica is not None  # set for every pool with a forecast section
    per_replica = settings.demand_per_replica.value
    replicas = np.maximum(0, np.ceil(total / per_replica - 1e-9)).astype(np.int64)
    replicas[~covered] = -1
    return _Parts(status, replicas, ramp, np.asarray(forecast.value_at(at), dtype=float), bursts)


class PoolTimeline:
    """Plans one pool at the instants `times` (ascending), in order, stabilised as the daemon does.

    `forecasts` is one forecast (in force throughout) or several, each in force from an instant
    on (`InForce`). `observed` feeds the burst model; `recent` carries stabilisation from earlier
    plans; `settings` are the pool's effective settings. Call
    `plan(i, cluster)` for i = 0, 1, ... (each instant at most once, in order)."""

    def __init__(
        self,
        pool: Pool,
        times: np.ndarray,
        forecasts: AnyForecast | InForce,
        observed: History | Unobserved | None,
        recent: Sequence[PlanRecord],
        settings: PlanSettings,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.times = np.asarray(times, dtype=float)
        in_force = list(forecasts) if isinstance(forecasts, Sequence) else [(-math.inf, forecasts)]
        self._forecasts = [f for _, f in in_force]
        self._starts = np.searchsorted(
            self.times, np.array([t for t, _ in in_force], dtype=float), side="left"
        )
        self.observed = observed
        self.lead = self.settings.lead
        self._floor, self._which, self._open = schedule_series(
            pool.schedules, self.times, self.lead
        )
        self._names = [w.name for w in pool.schedules]
        self._parts: dict[int, _Parts] = {}
        self._proportional: dict[ClusterState, Count] = {}
        self._schedule_parts: dict[tuple[int, int, bytes], SchedulePart] = {}
        self._window = self.settings.window
        self._records: deque[PlanRecord] = deque(sorted(recent, key=lambda r: r.at))
        self._carried = bool(self._records)
        self._next = 0

    def __len__(self) -> int:
        return int(self.times.size)

    @property
    def recent(self) -> tuple[PlanRecord, ...]:
        """The records to pass as `recent` to a later timeline of the same pool."""
        return tuple(self._records)

    @property
    def first_in_force(self) -> int:
        """The index of the first instant a named forecast is in force (before it: warming up)."""
        return int(self._starts[0]) if len(self._starts) else len(self)

    def forecast_in_force(self, i: int) -> tuple[int, AnyForecast]:
        """(k, forecast): the forecast in force at instant `i` and its index (-1: before the first)."""
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return k, (self._forecasts[k] if k >= 0 else NoForecast(str(ForecastStatus.WARMUP)))

    def forecast_part(self, i: int) -> ForecastPart:
        """The forecast component at instant `i`."""
        k, _ = self.forecast_in_force(i)
        lo = int(self._starts[k]) if k >= 0 else 0
        hi = int(self._starts[k + 1]) if k + 1 < len(self._starts) else len(self)
        parts, j = self._segment(k, lo, hi), i - lo
        if parts.status[j] == ForecastStatus.FIXED:
            return ForecastPart(int(parts.replicas[j]), ForecastStatus.FIXED)
        if parts.bursts is None or parts.status[j] != ForecastStatus.OK:
            return ForecastPart(None, parts.status[j])
        return ForecastPart(
            int(parts.replicas[j]),
            ForecastStatus.OK,
            float(parts.ramp[j]),
            parts.bursts[j],
            float(parts.yhat[j]),
        )

    def plan(
        self, i: int, cluster: ClusterState | None = None, parts: Mapping[str, Part] | None = None
    ) -> Plan:
        """The plan at instant `i` given the cluster and the registered components then (`parts`,
        by name); instants must be planned in order."""
        if i < self._next:
            raise ValueError(f"instant {i} was planned already; plan each instant once, in order")
        self._next = i + 1
        at = float(self.times[i])
        while self._records and self._records[0].at <= at - self._window:
            self._records.popleft()
        own = self._own_parts(i, cluster)
        plan = combine(self.pool, at, {**(parts or {}), **own}, self._records, self.settings)
        self._records.append(plan.record())
        return plan

    def _own_parts(self, i: int, cluster: ClusterState | None) -> dict[str, Part]:
        """The engine's own components at instant `i`: the schedule floor (when the pool has
        windows), the proportional rule (when it has one) and the forecast."""
        pool = self.pool
        own: dict[str, Part] = {str(Component.FORECAST): self.forecast_part(i)}
        if pool.schedules:
            k = int(self._which[i])
            key = (k, int(self._floor[i]), self._open[:, i].tobytes())
            if key not in self._schedule_parts:
                windows = tuple(n for n, o in zip(self._names, self._open[:, i], strict=True) if o)
                self._schedule_parts[key] = SchedulePart(
                    key[1] if k >= 0 else 0, self._names[k] if k >= 0 else None, windows
                )
            own[str(Component.SCHEDULE)] = self._schedule_parts[key]
        if pool.proportional is not None and cluster is None:
            own[str(Component.PROPORTIONAL)] = Count(
                None, {"proportional_status": "no-cluster-state"}
            )
        elif pool.proportional is not None and cluster is not None:
            if cluster not in self._proportional:
                self._proportional[cluster] = Count(proportional_floor(pool.proportional, cluster))
            own[str(Component.PROPORTIONAL)] = self._proportional[cluster]
        return own

    def desired_at_once(self, parts: np.ndarray | None = None) -> np.ndarray | None:
        """What `plan(i).desired` gives for i = 0, 1, ... with no cluster, every instant at once
        (the largest of minReplicas, the open schedule floor, the forecast and `parts`, then
        `core.stabilise`'s rule in its array form: the reserve, the smallest cap known from the
        pool (`core.components.static_cap`), the
        stabilisation window). `parts` is the registered components over the timeline: at each
        instant the largest value among those planned then (0 for none), as `plan(i, None, ...)`
        is given them. Planning nothing, it leaves `plan`
        callable. None where this shortcut is not the rule: a proportional rule, records carried
        in, or instants not strictly ascending on a regular grid (plan each instant instead).

        The backtest's replays and the re-tune read a pool's plans this way;
        `tests/test_engine.py` proves it equal to planning each instant on a real series."""
        found = None if self.pool.proportional is not None else self._wanted_at_once(parts)
        if found is None:
            return None
        wanted, steps = found
        cap = static_cap(self.pool)
        return hold_all(settle(wanted, self.settings.reserve.value, cap), steps, cap)

    def desired_with_cluster(
        self, parts: np.ndarray | None = None
    ) -> Callable[[int, ClusterState], int] | None:
        """For a pool with a proportional rule, what `plan(i, cluster, ...).desired` gives, as a
        function of (i, cluster) to call for i = 0, 1, ... in order, each once (a replay whose
        nodes follow the plans): everything but the rule is taken at once as `desired_at_once`
        takes it (`parts` as there), the rule's floor added at each call, then `core.stabilise`'s
        rule in its step form over a rolling maximum (no `Plan` built). None where this shortcut
        is not the rule: no proportional rule, or where `desired_at_once` says None. Planning
        nothing, it leaves `plan` callable. `tests/test_engine.py` proves it equal to planning
        each instant on a real series."""
        rule = self.pool.proportional
        found = None if rule is None else self._wanted_at_once(parts)
        if rule is None or found is None:
            return None
        wanted, steps = found
        static = wanted.tolist()
        reserve, cap = self.settings.reserve.value, static_cap(self.pool)
        floors: dict[ClusterState, int] = {}
        window: deque[tuple[int, int]] = deque()  # (i, raw), raw decreasing: the rolling max

        def desired(i: int, cluster: ClusterState) -> int:
            floor = floors.get(cluster)
            if floor is None:
                floor = floors[cluster] = proportional_floor(rule, cluster)
            raw = min(max(static[i], floor) + reserve, cap)
            while window and window[-1][1] <= raw:
                window.pop()
            window.append((i, raw))
            while window[0][0] <= i - steps:
                window.popleft()
            return min(window[0][1], cap)

        return desired

    def _wanted_at_once(self, parts: np.ndarray | None) -> tuple[np.ndarray, int] | None:
        """The largest floor at every instant but the proportional rule's (minReplicas, the open
        schedule floor, the usable forecast, `parts`), and the instants the stabilisation window
        holds; None when records are carried in, a cap is read, or the grid is not regular."""
        n = len(self)
        if self._carried or n == 0 or read_caps(self.pool):
            return None
        steps = _window_steps(self.times, self._window)
        if steps is None:
            return None
        wanted = np.maximum(np.where(self._which >= 0, self._floor, 0), self.pool.min_replicas)
        if parts is not None:
            wanted = np.maximum(wanted, np.asarray(parts, dtype=np.int64))
        bounds = [0, *(int(s) for s in self._starts), n]
        for k in range(-1, len(self._starts)):
            lo, hi = bounds[k + 1], bounds[k + 2]
            if lo >= hi:
                continue
            segment = self._segment(k, lo, hi)
            fixed = segment.status == str(ForecastStatus.FIXED)
            if segment.bursts is None and not fixed.any():
                continue
            usable = (segment.status == str(ForecastStatus.OK)) | fixed
            wanted[lo:hi] = np.maximum(wanted[lo:hi], np.where(usable, segment.replicas, 0))
        return wanted, steps

    def _segment(self, k: int, lo: int, hi: int) -> _Parts:
        """The forecast component over the instants [lo, hi) forecast k is in force (cached)."""
        if k not in self._parts:
            forecast = self._forecasts[k] if k >= 0 else NoForecast(str(ForecastStatus.WARMUP))
            self._parts[k] = _forecast_parts(
                self.pool, self.settings, forecast, self.times[lo:hi], self.observed
            )
        return self._parts[k]


def _window_steps(times: np.ndarray, window: float) -> int | None:
    """The instants a stabilisation window of `window` seconds holds at each instant of `times`,
    this one included, when that is one number throughout (a regular grid; fewer at the start):
    the records `plan` keeps are those less than `window` before the instant. None otherwise."""
    if times.size > 1 and not bool(np.all(np.diff(times) > 0)):
        return None
    first = np.searchsorted(times, times - window, side="right")
    index = np.arange(times.size)
    steps = int((index - first).max()) + 1 if window > 0 else 1
    if not np.array_equal(first, np.maximum(index - steps + 1, 0)) and window > 0:
        return None
    return steps


def plan_over_time(
    pool: Pool,
    times: Sequence[float] | np.ndarray,
    inputs: PlanInputs,
    recent: Sequence[PlanRecord] = (),
) -> Timeline:
    """The stabilised plans of `pool` at `times` (ascending POSIX seconds) from `inputs`, carrying
    scale-down stabilisation from `recent` (the `Timeline.recent` of an earlier call)."""
    timeline = PoolTimeline(
        pool,
        np.asarray(times, dtype=float),
        inputs.forecast,
        inputs.observed,
        recent,
        inputs.settings,
    )
    after = later(inputs.parts)
    plans = tuple(
        timeline.plan(i, inputs.cluster, after if i else inputs.parts) for i in range(len(timeline))
    )
    return Timeline(plans, timeline.recent)


JUST_BEFORE = 1e-3
"""Seconds before a window edge at which the horizon also plans (not shown): the last instant the
window's value is still needed, so its scale-down stabilisation ends exactly `window` after the
edge whatever the step."""
RECONCILE_SECONDS = 60.0
"""The daemon's default reconcile interval: a horizon plans at every multiple of it, as the daemon
would, so a count recorded between two rows still holds scale-down stabilisation."""
HORIZON_STEP_SECONDS = 900.0
"""The row grid of a horizon when none is asked for: `plan --horizon` and the report."""


def horizon_plans(
    pool: Pool,
    start: float,
    end: float,
    step: float,
    inputs: PlanInputs,
    every: float = RECONCILE_SECONDS,
) -> tuple[Plan, ...]:
    """The plans from `start` to `end` as `plan --horizon` and the report show them: at `start`, at
    every multiple of `step` after it, and at the exact instants the plan changes between them.

    The plan itself is made at every multiple of `every` (the daemon's reconcile), at schedule
    windows opening and closing (lead time included) and where scale-down stabilisation ends
    (the stabilisation window after the unstabilised count dropped); every instant where the count
    or its reason changes is shown. So the plan at an instant, and the instant a change is shown
    at, do not depend on `step` (for steps that are multiples of `every`)."""
    lead, window = inputs.settings.lead, inputs.settings.window
    edges = np.array(
        [
            x
            for w in pool.schedules
            for interval in open_intervals(w, start, end, lead)
            for x in interval
            if start < x <= end
        ],
        dtype=float,
    )
    rows = np.unique(np.concatenate([[start], _multiples(start, end, step), edges]))
    times = np.union1d(rows, _multiples(start, end, every))
    hidden = np.setdiff1d(edges - JUST_BEFORE, times)
    hidden = hidden[hidden > start]
    for _ in range(3):  # later passes add the instants where stabilisation ends
        plans = plan_over_time(pool, np.union1d(times, hidden), inputs).plans
        drops = [
            plans[k + 1].at + window
            for k in range(len(plans) - 1)
            if plans[k + 1].raw < plans[k].raw and start < plans[k + 1].at + window <= end
        ]
        new = np.setdiff1d(drops, times)
        if not new.size:
            break
        times = np.union1d(times, new)
    else:
        plans = plan_over_time(pool, np.union1d(times, hidden), inputs).plans
    return _rows_and_changes(plans, set(times.tolist()), set(rows.tolist()))


def _multiples(start: float, end: float, step: float) -> np.ndarray:
    """The multiples of `step` (POSIX seconds) in (start, end]."""
    grid = np.arange(math.ceil(start / step) * step, end + step / 2, step)
    return grid[(grid > start) & (grid <= end)]


def _rows_and_changes(
    plans: Sequence[Plan], planned: set[float], rows: set[float]
) -> tuple[Plan, ...]:
    """The plans at `rows`, and at every instant of `planned` whose count or reason differs from
    the planned instant before it (the hidden instants just before window edges are never shown)."""
    shown, last = [], None
    for plan in plans:
        if plan.at not in planned:
            continue
        key = (plan.desired, plan.reason)
        if plan.at in rows or key != last:
            shown.append(plan)
        last = key
    return tuple(shown)
