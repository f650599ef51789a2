"""The plan's values and the one rule that combines components into a Plan.

    desired = clamp(max(schedule, proportional, forecast, <registered components>, minReplicas)
                    + reserve, 0, maxReplicas)

then held up for `scaleDownStabilization` after a higher value was last needed (`core.stabilise`:
the rule's one statement). The registered components (disruption, share) come in by name through
`core.components`, which also names the winner among equal values. Pure: no clock
reads, no I/O. `core.engine` computes the components over time and calls `combine` at every
instant; every command and the daemon plan through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.core.components import Part, in_plan
from predictive_headroom.core.components import winner as first_max
from predictive_headroom.core.forecast_math import BurstAllowance
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


# Long on purpose: the plan's one rule, read top to bottom in the order docs/design.md states it.
def combine(
    pool: Pool,
    at: float,
    schedule: tuple[int, str] | None,
    proportional: int | None,
    forecast: ForecastPart,
    recent: Sequence[PlanRecord] = (),
    details: Mapping[str, Any] | None = None,
    window: float = 0.0,
    reserve: int = 0,
    parts: Mapping[str, Part] | None = None,
) -> Plan:
    """Combine component values into a Plan: max of floors, forecast and the registered
    components, plus the reserve, capped, stabilised (`core.stabilise`).

    `schedule` is (replicas, window name) or None when no window is open; `window` is the
    scale-down stabilisation window in seconds (`PlanSettings.window`): `recent` records within it
    hold the count up; `reserve` placeholders are held on top (`PlanSettings.reserve`). `parts`
    are the registered components by name (`core.components`): one is left out of the components
    (and of the JSON) when missing or when the pool turns it off.
    """
    extra = in_plan(pool, parts)
    components: dict[str, int | None] = {
        "min": pool.min_replicas,
        "max": pool.max_replicas,
        "schedule": schedule[0] if schedule else (0 if pool.schedules else None),
        "proportional": proportional,
        "forecast": forecast.replicas,
        **{name: part.replicas for name, part in extra.items()},
    }
    # A closed window reports 0 but does not compete for the reason.
    candidates = {
        name: value
        for name, value in components.items()
        if value is not None and name != "max" and (name != "schedule" or schedule)
    }
    winner, wanted = first_max(candidates)
    reason = (
        f"{PlanReason.SCHEDULE_PREFIX}{schedule[1]}"
        if winner == "schedule" and schedule
        else winner
    )
    if winner == Component.FORECAST and forecast.status == ForecastStatus.FIXED:
        reason = PlanReason.FIXED_HEADROOM
    if winner == Component.MIN and forecast.status not in _FORECAST_USABLE:
        reason = f"{PlanReason.MIN_PREFIX}{forecast.status}"
    raw = settle(wanted, reserve, pool.max_replicas)
    if wanted + reserve > pool.max_replicas:
        reason = PlanReason.MAX
    desired = hold(raw, at, recent, window, pool.max_replicas)
    if desired is not None:
        reason = PlanReason.HOLD_STABILIZATION
    else:
        desired = raw

    info: dict[str, Any] = {"forecast_status": str(forecast.status)}
    if forecast.status == "ok":
        info.update(
            ramp=round(forecast.ramp, 6),
            burst=round(forecast.burst, 6),
            yhat=round(forecast.yhat or 0.0, 6),
        )
        if forecast.allowance is not None:
            info["burst_source"] = str(forecast.allowance.source)
            if forecast.allowance.why:
                info["burst_fallback"] = forecast.allowance.why
    for part in extra.values():
        info.update(part.to_details())
    if reserve:
        info["reserve"] = reserve
    if details:
        info.update(details)
    return Plan(pool.name, at, desired, raw, str(reason), components, info)


def with_reserve(desired: Any, reserve: int, max_replicas: int) -> Any:
    """What `combine` writes with `reserve` placeholders on top, from what it writes without them
    (`desired`: a count or an array of counts over time, planned with the same window):
    `min(desired + reserve, maxReplicas)`.

    This is `core.stabilise`'s rule, not a second one: the reserve is added before the cap and
    the stabilisation window, so what is written is max over the window of min(wanted + reserve,
    max) = min(max over the window of wanted + reserve, max); without a reserve it is
    min(max over the window of wanted, max), and the reserve on top of that, capped again,
    is the same number (`tests/test_planner.py` replays both where maxReplicas binds). Every
    replay that prices a reserve (the re-tune, `backtest --protection`, `tune`) calls this instead
    of planning each reserve again."""
    if reserve < 0:
        raise ValueError(f"a reserve cannot be negative, got {reserve}")
    return settle(desired, reserve, max_replicas)


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
