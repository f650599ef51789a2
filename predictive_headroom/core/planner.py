"""The plan's values and the one rule that combines components into a Plan.

    desired = min(max(schedule, proportional, forecast, <registered floors>, minReplicas)
                  + reserve, <the smallest cap: maxReplicas, registered caps>)

then held up for `scaleDownStabilization` after a higher value was last needed, never above the
smallest cap (`core.stabilise`: the rule's one statement). Every component comes in by name in one
mapping of `Part`s (`core.components`: the registry says which are floors and which are caps, and
names the winner among equal values); the engine makes the schedule, proportional and forecast
parts, the pool gives minReplicas and maxReplicas, the shells read the others. Pure: no clock
reads, no I/O. `core.engine` computes the components over time and calls `combine` at every
instant; every command and the daemon plan through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.core.components import Count, Part, binding, by_kind, in_plan
from predictive_headroom.core.components import winner as first_max
from predictive_headroom.core.forecast_math import BurstAllowance
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.stabilise import hold, settle
from predictive_headroom.core.vocabulary import Component, ForecastStatus, PlanReason
from predictive_headroom.policy.config import Pool

_FORECAST_USABLE = (
    ForecastStatus.OK,
    ForecastStatus.NOT_CONFIGURED,
    ForecastStatus.DISABLED,
    ForecastStatus.FIXED,
)


@dataclass(frozen=True)
class PlanRecord:
    """A past unstabilised recommendation, kept by the caller for scale-down stabilisation."""

    at: float
    replicas: int


@dataclass(frozen=True)
class Plan:
    """What one pool's placeholder count should be at `at`, and why."""

    pool: str
    at: float
    desired: int
    raw: int
    reason: str
    components: dict[str, int | None]
    details: dict[str, Any] = field(default_factory=dict)

    def record(self) -> PlanRecord:
        """The record to pass back as `recent` next time (the unstabilised recommendation)."""
        return PlanRecord(self.at, self.raw)


@dataclass(frozen=True)
class ForecastPart:
    """The forecast component at one instant: replicas (None when unavailable), why, and its parts."""

    replicas: int | None
    status: str
    ramp: float = 0.0
    allowance: BurstAllowance | None = None
    yhat: float | None = None

    @property
    def burst(self) -> float:
        """The burst allowance in demand units (0 without one)."""
        return self.allowance.value if self.allowance is not None else 0.0

    def to_details(self) -> dict[str, Any]:
        """The plan's details about the forecast: its status and, when usable, its ramp, burst
        allowance and yhat at the lead time."""
        info: dict[str, Any] = {"forecast_status": str(self.status)}
        if self.status == ForecastStatus.OK:
            info.update(ramp=round(self.ramp, 6), burst=round(self.burst, 6))
            info["yhat"] = round(self.yhat or 0.0, 6)
            if self.allowance is not None:
                info["burst_source"] = str(self.allowance.source)
                if self.allowance.why:
                    info["burst_fallback"] = self.allowance.why
        return info

    def later(self) -> ForecastPart:
        """The same part (the engine computes the forecast at every instant)."""
        return self


@dataclass(frozen=True)
class SchedulePart:
    """The schedule floor at one instant: the highest open window's replicas and its name
    (`window`; None when none is open: shown as 0, and it does not compete for the reason), and
    every window open (`open_windows`)."""

    replicas: int
    window: str | None
    open_windows: tuple[str, ...] = ()

    def to_details(self) -> dict[str, Any]:
        """The plan's details about the schedule: the windows open."""
        return {"open_windows": list(self.open_windows)}

    def later(self) -> SchedulePart:
        """The same part (the engine computes the schedule at every instant)."""
        return self


def combine(
    pool: Pool,
    at: float,
    parts: Mapping[str, Part],
    recent: Sequence[PlanRecord],
    settings: PlanSettings,
) -> Plan:
    """Combine the components into a Plan: the largest floor plus the reserve, limited by the
    smallest cap, held up over the scale-down stabilisation window but never above that cap
    (`core.stabilise`).

    `parts` are the components by name (`core.components`: the engine's schedule, proportional
    and forecast parts, and those the shells read; minReplicas and maxReplicas come from the pool);
    one the pool turns off is left out, one read by a shell and missing is left out of the
    `components` (and of the JSON). `recent` records less than `settings.window` seconds before
    `at` hold the count up; `settings.reserve` placeholders are held on top of the floors. When a
    cap limits the count (also when it lowers the count the hold would keep), the reason is its
    name."""
    present = in_plan(pool, parts)
    components, floors, caps = by_kind(present)
    schedule = present.get(Component.SCHEDULE)
    if not (isinstance(schedule, SchedulePart) and schedule.window):
        floors.pop(Component.SCHEDULE, None)  # a closed window reports 0 but does not compete
    winner, wanted = first_max(floors)
    reason = _floor_reason(winner, present)
    limiting, cap = binding(caps)
    reserve = settings.reserve.value
    raw = settle(wanted, reserve, cap)
    if wanted + reserve > cap:
        reason = limiting
    held = hold(raw, at, recent, settings.window, math.inf)
    if held is not None and held <= cap:
        desired, reason = held, PlanReason.HOLD_STABILIZATION
    elif held is not None:  # the cap wins over the hold
        desired, reason = cap, limiting
    else:
        desired = raw
    info: dict[str, Any] = {}
    for part in present.values():
        if part is not None and not (isinstance(part, Count) and not part.details):
            info.update(part.to_details())
    if reserve:
        info["reserve"] = reserve
    return Plan(pool.name, at, int(desired), raw, str(reason), components, info)


def _floor_reason(winner: str, present: Mapping[str, Part | None]) -> str:
    """The reason word of the floor `winner`: its name, the schedule window's name, the fixed N
    the re-tune set instead of the forecast, or why no forecast competed with minReplicas."""
    schedule, forecast = present.get(Component.SCHEDULE), present.get(Component.FORECAST)
    if winner == Component.SCHEDULE and isinstance(schedule, SchedulePart):
        return f"{PlanReason.SCHEDULE_PREFIX}{schedule.window}"
    if not isinstance(forecast, ForecastPart):
        return winner
    if winner == Component.FORECAST and forecast.status == ForecastStatus.FIXED:
        return PlanReason.FIXED_HEADROOM
    if winner == Component.MIN and forecast.status not in _FORECAST_USABLE:
        return f"{PlanReason.MIN_PREFIX}{forecast.status}"
    return winner


def with_reserve(desired: Any, reserve: int, cap: int) -> Any:
    """What `combine` writes with `reserve` placeholders on top, from what it writes without them
    (`desired`: a count or an array of counts over time, planned with the same window), for a
    pool whose caps are known from the pool alone (`cap`: `core.components.static_cap`, which is
    maxReplicas when no other cap is set): `min(desired + reserve, cap)`.

    This is `core.stabilise`'s rule, not a second one: the reserve is added before the cap and
    the stabilisation window, so what is written is max over the window of min(wanted + reserve,
    max) = min(max over the window of wanted + reserve, max); without a reserve it is
    min(max over the window of wanted, max), and the reserve on top of that, capped again,
    is the same number (`tests/test_planner.py` replays both where maxReplicas binds). Every
    replay that prices a reserve (the re-tune, `backtest --protection`, `tune`) calls this instead
    of planning each reserve again."""
    if reserve < 0:
        raise ValueError(f"a reserve cannot be negative, got {reserve}")
    return settle(desired, reserve, cap)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON shape of one pool's plan (`name`, `desired_replicas`, `reason`, `components`, ...)."""
    return {
        "name": plan.pool,
        "desired_replicas": plan.desired,
        "reason": plan.reason,
        "components": plan.components,
        "unstabilized_replicas": plan.raw,
        "details": plan.details,
    }
