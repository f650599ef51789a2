"""The planner: pure functions from (pool, time, cluster, forecast, recent plans) to a Plan.

No clock reads, no I/O. The daemon, the `plan` command, the report and the backtest all call
these functions, so they all agree on what the placeholder count should be.

    desired = clamp(max(schedule, proportional, forecast, minReplicas), 0, maxReplicas)

then held up for `scaleDownStabilization` after a higher value was last needed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predictive_headroom.core.proportional import proportional_floor
from predictive_headroom.core.schedules import schedule_floor
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import ClusterState

# Among components asking for the same number, the reason names the first in this order.
_PRECEDENCE = ("schedule", "proportional", "forecast", "min")


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
    """The forecast component at one instant: replicas (None when unavailable) and its parts."""

    replicas: int | None
    status: str
    ramp: float = 0.0
    burst: float = 0.0
    yhat: float | None = None
    burst_source: str = "profile"  # model: the conditional model on fresh observations; profile: the refit-time table
    burst_fallback: str = ""  # why the model was not used although the forecast has one


def forecast_part(
    forecast: Forecast | NoForecast | None,
    at: float,
    lead_seconds: float,
    demand_per_replica: float,
    observed: History | Unobserved | None = None,
    burst: tuple[float, str, str] | None = None,
) -> ForecastPart:
    """Size the growth expected within the lead time: ceil((ramp + burst) / demandPerReplica).

    ramp  = max(0, max yhat over [at, at+lead] - yhat(at))   (predictable rise, read from the
            model's own curve, the one the burst was measured against)
    burst = the burst model's quantile of growth beyond the ramp given what `observed` shows at
            `at - delay` (negative when less than the ramp is expected; the sum is clipped at 0);
            without a model, or when observations are missing or stale, the refit-time table's
            quantile of past unpredicted growth, the largest over [at, at+lead]

    `burst` (value, source, fallback) is the allowance already computed by the caller (the backtest
    evaluates the model over many minutes at once).
    """
    if forecast is None:
        return ForecastPart(None, "no-history")
    if isinstance(forecast, NoForecast):
        return ForecastPart(None, forecast.why)
    if not forecast.covers(at):
        return ForecastPart(None, "forecast-expired")
    now_value = float(forecast.value_at(at))
    ramp = forecast.ramp_between(at, min(at + lead_seconds, forecast.expires_at))
    value, source, fallback = (
        burst if burst is not None else burst_allowance(forecast, at, lead_seconds, observed)
    )
    replicas = math.ceil(max(0.0, ramp + value) / demand_per_replica - 1e-9)
    return ForecastPart(max(0, replicas), "ok", ramp, value, now_value, source, fallback)


def table_burst(forecast: Forecast, at: float, lead_seconds: float) -> float:
    """The refit-time table's allowance: the largest of every time-of-day bin the lead window touches
    (placeholders asked for now must cover bursts that start anywhere within the lead time)."""
    if forecast.burst is None:
        return 0.0
    edges = np.append(
        np.arange(at, at + lead_seconds, forecast.burst.bin_seconds), at + lead_seconds
    )
    return float(np.max(forecast.burst.at(edges)))


def burst_allowance(
    forecast: Forecast,
    at: float,
    lead_seconds: float,
    observed: History | Unobserved | None,
) -> tuple[float, str, str]:
    """(allowance, source, fallback): the model's answer on fresh observations, else the table's
    with the reason the model could not be used."""
    model = forecast.burst_model
    if model is None:
        return table_burst(forecast, at, lead_seconds), "profile", ""
    if observed is None:
        why = "not-observed"
    elif isinstance(observed, Unobserved):
        why = f"{observed.why}: {observed.detail}" if observed.detail else observed.why
    else:
        cutoff = at - model.delay_seconds
        known = observed.until(cutoff)
        if len(known) == 0:
            why = "no-recent-samples"
        elif cutoff - known.end > model.max_age_seconds:
            why = "stale-observations"
        else:
            value = float(model.allowance(known, np.array([at], dtype=float), forecast)[0])
            if math.isfinite(value):
                return value, "model", ""  # may be negative: below the ramp (see forecast_part)
            why = "stale-observations"
    return table_burst(forecast, at, lead_seconds), "profile", why


def combine(
    pool: Pool,
    at: float,
    schedule: tuple[int, str] | None,
    proportional: int | None,
    forecast: ForecastPart,
    recent: Sequence[PlanRecord] = (),
    details: Mapping[str, Any] | None = None,
) -> Plan:
    """Combine component values into a Plan: max of floors and forecast, clamp, stabilise.

    `schedule` is (replicas, window name) or None when no window is open.
    """
    components: dict[str, int | None] = {
        "min": pool.min_replicas,
        "max": pool.max_replicas,
        "schedule": schedule[0] if schedule else (0 if pool.schedules else None),
        "proportional": proportional,
        "forecast": forecast.replicas,
    }
    # A closed window reports 0 but does not compete for the reason.
    candidates = {
        name: components[name]
        for name in _PRECEDENCE
        if components[name] is not None and (name != "schedule" or schedule)
    }
    wanted = max(candidates.values())
    winner = next(name for name in _PRECEDENCE if candidates.get(name) == wanted)
    reason = f"schedule:{schedule[1]}" if winner == "schedule" and schedule else winner
    if winner == "min" and forecast.status not in ("ok", "not-configured", "disabled"):
        reason = f"hold:{forecast.status}"
    raw = wanted
    if raw > pool.max_replicas:
        raw, reason = pool.max_replicas, "max"

    window = pool.scale_down_stabilization.total_seconds()
    held = [r.replicas for r in recent if at - window < r.at < at]
    desired = raw
    if held and max(held) > raw:
        desired = min(max(held), pool.max_replicas)
        reason = "hold:scale-down-stabilization"

    info: dict[str, Any] = {"forecast_status": forecast.status}
    if forecast.status == "ok":
        info.update(
            ramp=round(forecast.ramp, 6),
            burst=round(forecast.burst, 6),
            yhat=round(forecast.yhat or 0.0, 6),
            burst_source=forecast.burst_source,
        )
        if forecast.burst_fallback:
            info["burst_fallback"] = forecast.burst_fallback
    if details:
        info.update(details)
    return Plan(pool.name, at, desired, raw, reason, components, info)


def plan_pool(
    pool: Pool,
    at: float,
    cluster: ClusterState | None = None,
    forecast: Forecast | NoForecast | None = None,
    recent: Sequence[PlanRecord] = (),
    observed: History | Unobserved | None = None,
) -> Plan:
    """The plan for one pool at `at` (POSIX seconds).

    `cluster` None leaves the proportional component out; `forecast` None means the pool
    forecasts nothing (a NoForecast says why a configured forecast is missing). `observed` is the
    pool's latest demand samples (or why they are missing), which the burst model reads.
    """
    lead = pool.lead_time.total_seconds()
    floor = schedule_floor(pool.schedules, at, lead)
    schedule = (floor.replicas, floor.window) if floor.window is not None else None
    proportional = None
    if pool.proportional is not None and cluster is not None:
        proportional = proportional_floor(pool.proportional, cluster)
    if pool.forecast is not None and pool.forecast.enabled:
        part = forecast_part(forecast, at, lead, pool.forecast.demand_per_replica, observed)
    elif pool.forecast is not None:
        part = ForecastPart(None, "disabled")
    else:
        part = ForecastPart(None, "not-configured")
    details = {"open_windows": list(floor.open_windows)} if pool.schedules else {}
    if pool.proportional is not None and cluster is None:
        details["proportional_status"] = "no-cluster-state"
    return combine(pool, at, schedule, proportional, part, recent, details)


def plan_policy(
    policy: Policy,
    at: float,
    clusters: Mapping[str, ClusterState] | None = None,
    forecasts: Mapping[str, Forecast | NoForecast] | None = None,
    recent: Mapping[str, Sequence[PlanRecord]] | None = None,
) -> list[Plan]:
    """Plans for every pool, in config order; mappings are keyed by pool name."""
    clusters, forecasts, recent = clusters or {}, forecasts or {}, recent or {}
    return [
        plan_pool(
            pool, at, clusters.get(pool.name), forecasts.get(pool.name), recent.get(pool.name, ())
        )
        for pool in policy.pools
    ]


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
