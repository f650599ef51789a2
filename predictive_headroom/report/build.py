"""The forecast report's facts: what a reviewer needs to trust (or question) the planned headroom.

`build_report` is pure (no clock, no I/O): per pool it plans the placeholder pod count over the
forecast horizon on the grid `plan --horizon` shows (`core.engine.horizon_plans`: every 15 minutes
from `at` and every instant the plan changes, planned each minute as the daemon reconciles), finds the next peaks, prices the headroom, compares past
forecasts with what happened (those figures come from `report.analysis`) and collects the
warnings a reviewer must see (`report.notices`). `report_to_json` turns it into the
machine-readable `report.json`; `report.store` writes reports to disk and keeps the daemon's last N.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predictive_headroom.core.components import Part
from predictive_headroom.core.engine import HORIZON_STEP_SECONDS, PlanInputs, horizon_plans
from predictive_headroom.core.forecast_math import burst_allowances
from predictive_headroom.core.planner import plan_to_dict
from predictive_headroom.core.price import Price
from predictive_headroom.core.schedules import open_intervals
from predictive_headroom.core.series import (
    DAY_SECONDS,
    Forecast,
    History,
    NoForecast,
    Unobserved,
    burst_chart_data,
    iso_utc,
)
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import BurstFit, ForecastStatus
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import TargetCondition
from predictive_headroom.report.analysis import (
    find_peaks,
    headroom_cost,
    judge_past,
)
from predictive_headroom.report.model import PoolReport, Report
from predictive_headroom.report.notices import with_notices, with_promise

SCHEMA = "predictive-headroom/report/v1"
RECENT_SECONDS = 7 * DAY_SECONDS
"""How much history the demand plot shows before now."""
DEFAULT_HORIZON_SECONDS = 2 * DAY_SECONDS


iso = iso_utc
"""ISO-8601 UTC text for POSIX seconds (`core.series.iso_utc`)."""


@dataclass(frozen=True)
class ReportInputs:
    """What the report is made of, each map keyed by pool name (a missing key: none for it).

    The shell (the `report` command, the daemon after a refit) gathers these; nothing is fetched
    while the report is built.
    """

    settings: Mapping[str, PlanSettings]
    """The settings each pool plans with, one per pool (the shell resolves them: it knows the
    measured lead time and the re-tune)."""
    histories: Mapping[str, History] = field(default_factory=dict)
    forecasts: Mapping[str, Forecast | NoForecast] = field(default_factory=dict)
    accuracies: Mapping[str, Any] = field(default_factory=dict)
    """`accuracy.Accuracy` objects (or their `to_dict()`), or None."""
    observed: Mapping[str, History | Unobserved | None] | None = None
    """Each pool's latest observations for the burst model, as the daemon reads them at `at`
    (default: the pool's history up to `at`, which holds the same samples)."""
    parts: Mapping[str, Mapping[str, Part]] = field(default_factory=dict)
    """Each pool's registered components at `at`, by name (`core.components`): the plan now has
    all of each, the horizon its `Part.later` (the disruption component's spot reserve alone: the
    room for leaving nodes lasts until they are gone, which no one can tell ahead)."""
    loop: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """What the daemon measured in the cluster per pool (its closed loop), shown in each pool's
    section; empty outside the daemon."""
    targets: Mapping[str, Sequence[TargetCondition]] = field(default_factory=dict)
    """Each pool's target status conditions at the daemon's last reconcile (a CapacityBuffer's);
    empty outside the daemon."""
    promises: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """What its re-tune says of a `protection:` pool (`Tuning.report`: "asked 95%, last week
    96.1%", a shortfall shown as a warning)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """Each pool's node-hour price when the shell was given one (`report --node-cpu ...`);
    default: the policy's `cost:` section."""
    plans: Mapping[str, PlanInputs] = field(default_factory=dict)
    """What each pool is planned from, built from the fields above in one place
    (`app.inputs.with_plan_inputs`, which also gives the cluster); `build_report` needs one per
    pool."""


def build_report(
    policy: Policy,
    inputs: ReportInputs,
    at: float,
    past: Sequence[Mapping[str, Any]] = (),
    source: str = "",
) -> Report:
    """The report for every pool of `policy` at `at` from `inputs` (each pool's `plans` entry
    built: `app.inputs.with_plan_inputs`); `past` holds earlier `report_to_json` outputs, whose
    forecasts are judged against the histories; `source` names where the demand was read."""
    pools = tuple(_pool_report(pool, inputs, at, past, policy) for pool in policy.pools)
    return Report(at, pools, source)


def _pool_report(
    pool: Pool,
    given: ReportInputs,
    at: float,
    past: Sequence[Mapping[str, Any]],
    policy: Policy,
) -> PoolReport:
    """One pool's report at `at`: its plan over the horizon, forecast status, peaks, cost and
    notices, each field read from the inputs given (nothing is fetched here)."""
    spec, name = pool.forecast, pool.name
    inputs = given.plans[name]
    history, forecast, settings = given.histories.get(name), inputs.forecast, inputs.settings
    usable, status, detail = _forecast_status(pool, forecast, at)
    horizon_end = (
        usable.expires_at
        if usable
        else at + (spec.horizon.total_seconds() if spec else DEFAULT_HORIZON_SECONDS)
    )
    plans = list(horizon_plans(pool, at, horizon_end, HORIZON_STEP_SECONDS, inputs))
    times = np.array([p.at for p in plans], dtype=float)
    desired = np.array([p.desired for p in plans], dtype=float)
    windows = tuple(
        (w.name, max(a, at), min(b, horizon_end))
        for w in pool.schedules
        for a, b in open_intervals(w, at, horizon_end, settings.lead)
    )
    peaks = find_peaks(usable, at, times, desired, settings.lead) if usable else ()
    known = history.until(at) if history is not None else None
    recent = known.since(at - RECENT_SECONDS) if known is not None else None
    report = PoolReport(
        pool=pool,
        recent=recent,
        history_points=len(known) if known is not None else 0,
        history_seconds=known.span_seconds + known.step_seconds
        if known is not None and len(known) > 1
        else 0.0,
        forecast=usable,
        forecast_status=status,
        forecast_detail=detail,
        now=plans[0],
        plan_times=times,
        plan_desired=desired,
        plan_reasons=tuple(p.reason for p in plans),
        windows=windows,
        peaks=peaks,
        accuracy=_accuracy_dict(given.accuracies.get(name)),
        past=judge_past(name, past, known, at) if known is not None else (),
        cost=headroom_cost(
            pool, *_until_end(times, desired, horizon_end), policy, given.prices.get(name)
        ),
        notices=(),
        burst=_last_day_burst(name, usable, known, at, settings.lead),
        settings=settings,
        loop=given.loop.get(name),
        target_conditions=tuple(given.targets.get(name, ())),
    )
    return with_promise(with_notices(report, plans), given.promises.get(name))


def _accuracy_dict(accuracy: Any) -> dict[str, Any] | None:
    """The accuracy figures as a dict (None: there are none)."""
    if hasattr(accuracy, "to_dict"):
        return accuracy.to_dict()
    return dict(accuracy) if accuracy else None


def _forecast_status(
    pool: Pool, forecast: Forecast | NoForecast | None, at: float
) -> tuple[Forecast | None, ForecastStatus | str, str]:
    """The forecast usable at `at` (None: none is) with its status code and a detail saying why
    not ("ok" and "" when it is usable)."""
    spec = pool.forecast
    usable = forecast if isinstance(forecast, Forecast) and forecast.expires_at > at else None
    status: ForecastStatus | str
    if usable is not None:
        status, detail = ForecastStatus.OK, ""
    elif isinstance(forecast, NoForecast):
        status, detail = forecast.why, forecast.detail
    elif isinstance(forecast, Forecast):
        status, detail = (
            ForecastStatus.EXPIRED,
            f"the forecast ended at {iso(forecast.expires_at)}, before {iso(at)}",
        )
    elif spec is None:
        status, detail = ForecastStatus.NOT_CONFIGURED, ""
    elif not spec.enabled:
        status, detail = ForecastStatus.DISABLED, ""
    else:
        status, detail = ForecastStatus.NOT_FITTED, "no forecast was fitted for this pool"
    return usable, status, detail


BURST_STEP_SECONDS = 300.0


def _last_day_burst(
    pool: str, forecast: Forecast | None, known: History | None, at: float, lead: float
) -> dict[str, Any] | None:
    """The burst allowance at every 5 minutes of the last day, from what was observed then, read
    from the current fit (`BurstFit.CURRENT`: the backtest page reads its walk-forward refits)."""
    if forecast is None or forecast.burst_model is None or known is None or len(known) < 2:
        return None
    times = np.arange(at - DAY_SECONDS + BURST_STEP_SECONDS, at + 1, BURST_STEP_SECONDS)
    allowance = burst_allowances(forecast, times, lead, known).values
    seen = np.isfinite(allowance)  # a point with no finite allowance is left out, not drawn as 0
    if not seen.any():
        return None
    times, allowance = times[seen], allowance[seen]
    fit = {"kind": str(BurstFit.CURRENT), "history_end": iso(forecast.history_end), "fits": 1}
    demand = np.interp(times, known.times, known.values)
    return burst_chart_data(pool, forecast.burst_model, times, demand, allowance, fit)


def _until_end(times: np.ndarray, desired: np.ndarray, end: float) -> tuple[np.ndarray, np.ndarray]:
    """The plan's instants and counts with the last count held to the horizon's `end`."""
    if times.size and end > times[-1]:
        return np.append(times, end), np.append(desired, desired[-1])
    return times, desired


# ---------------------------------------------------------------------------------------------
# JSON.


def _num(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def report_to_json(report: Report) -> dict[str, Any]:
    """The report's facts as JSON-ready data (the shape of report.json)."""
    return {
        "schema": SCHEMA,
        "at": report.at,
        "generated_at": iso(report.at),
        "source": report.source,
        "pools": [_pool_json(p) for p in report.pools],
    }


def _forecast_json(r: PoolReport) -> dict[str, Any]:
    """The pool's forecast status and, when one is usable, the fitted series with its model."""
    pool, f = r.pool, r.forecast
    forecast: dict[str, Any] = {"status": r.forecast_status, "detail": r.forecast_detail}
    if f is not None:
        forecast.update(
            model=f.model,
            fit_seconds=round(f.fit_seconds, 3),
            history_end=iso(f.history_end),
            expires_at=iso(f.expires_at),
            interval_width=pool.forecast.interval_width if pool.forecast else None,
            series={
                "times": f.times.tolist(),
                **{k: [_num(x) for x in getattr(f, k)] for k in ("yhat", "lower", "upper")},
            },
        )
    return forecast


def _plan_changes(r: PoolReport) -> list[dict[str, Any]]:
    """The plan's first step and each step whose count or reason differs from the one before."""
    return [
        {"at": iso(t), "desired_replicas": int(d), "reason": why}
        for k, (t, d, why) in enumerate(
            zip(r.plan_times, r.plan_desired, r.plan_reasons, strict=False)
        )
        if k == 0 or (d, why) != (r.plan_desired[k - 1], r.plan_reasons[k - 1])
    ]


def _pool_json(r: PoolReport) -> dict[str, Any]:
    """One pool of report.json, written out key by key so it reads like the schema."""
    pool, c = r.pool, r.cost
    return {
        "name": pool.name,
        "target": {
            "kind": pool.target.kind,
            "namespace": pool.target.namespace,
            "name": pool.target.name,
        },
        "min_replicas": pool.min_replicas,
        "max_replicas": pool.max_replicas,
        "lead_time_seconds": r.lead_seconds,
        "closed_loop": dict(r.loop) if r.loop is not None else None,
        "target_conditions": [c.to_dict() for c in r.target_conditions],
        "promise": dict(r.promise) if r.promise is not None else None,
        "history": {"points": r.history_points, "days": round(r.history_seconds / DAY_SECONDS, 2)},
        "forecast": _forecast_json(r),
        "plan": {
            "now": plan_to_dict(r.now),
            "step_seconds": r.step_seconds,
            "changes": _plan_changes(r),
        },
        "schedule_windows": [{"name": n, "from": iso(a), "to": iso(b)} for n, a, b in r.windows],
        "peaks": [
            {
                "at": iso(p.at),
                "demand": p.demand,
                "upper": p.upper,
                "warm_replicas": p.warm_replicas,
                "warm_from": iso(p.warm_from),
                "lead_seconds": p.lead_seconds,
            }
            for p in r.peaks
        ],
        "accuracy": r.accuracy,
        "past_forecasts": [
            {
                "made_at": iso(p.made_at),
                "points": int(p.times.size),
                "mape": p.mape,
                "coverage": p.coverage,
            }
            for p in r.past
        ],
        "cost": {
            "hours": c.hours,
            "replica_hours": c.replica_hours,
            "cpu_hours": c.cpu_hours,
            "gib_hours": c.gib_hours,
            "money": c.money,
            "currency": c.currency,
            "assumed": c.assumed or None,
            "peak_replicas": c.peak_replicas,
            "static_replica_hours": c.static_replica_hours,
        },
        "warnings": [{"code": n.code, "message": n.message} for n in r.notices],
        "burst": r.burst,
    }
