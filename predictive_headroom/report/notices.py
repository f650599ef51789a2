"""The warnings a reviewer of the report must see, per pool, and what the re-tune says of a promise.

Pure: each function reads one pool's report (`model.PoolReport`) and returns it with its notices,
never fetching anything. A notice's `code` is stable for machines (report.json `warnings`); its
`message` is for people (the page shows it as a warning).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from predictive_headroom.core.planner import Plan
from predictive_headroom.core.series import DAY_SECONDS, iso_utc
from predictive_headroom.core.vocabulary import (
    BufferCondition,
    ForecastStatus,
    MissingInput,
    NoForecastWhy,
    PlanReason,
)
from predictive_headroom.report.model import Notice, PoolReport

PREFERRED_HISTORY_SECONDS = 14 * DAY_SECONDS
"""Less history than this is flagged: the weekly pattern is learned from one week or less."""
LOW_COVERAGE_MARGIN = 0.1


def with_promise(r: PoolReport, promise: Mapping[str, Any] | None) -> PoolReport:
    """`r` with what the re-tune says of its promise; a shortfall is also one of its warnings."""
    if promise is None:
        return r
    notices = r.notices
    if promise.get("short"):
        notices = (
            *notices,
            Notice(
                "promise-short",
                f"protection {promise.get('says')}: short of what was asked; "
                f"{promise.get('reason')}",
            ),
        )
    return dataclasses.replace(r, promise=promise, notices=notices)


def with_notices(r: PoolReport, plans: Sequence[Plan]) -> PoolReport:
    """`r` with the warnings a reviewer must see (`plans`: the plan at each of its rows)."""
    spec, found = r.pool.forecast, _history_notices(r)
    if r.forecast_status == ForecastStatus.DISABLED:
        found.append(
            Notice(
                "forecast-disabled",
                "the forecast is disabled (forecast.enabled: false); only schedules, the proportional rule and minReplicas size this pool",
            )
        )
    elif r.forecast_status not in (ForecastStatus.OK, ForecastStatus.NOT_CONFIGURED):
        found.append(
            Notice(
                "forecast-unavailable",
                f"no forecast ({r.forecast_status}){': ' + r.forecast_detail if r.forecast_detail else ''}; the pool falls back to its floors",
            )
        )
    if r.forecast is not None:
        found.extend(Notice("forecast-note", w) for w in r.forecast.warnings)
    if r.accuracy and r.accuracy.get("coverage") is not None and spec is not None:
        coverage, width = float(r.accuracy["coverage"]), spec.interval_width
        if coverage < width - LOW_COVERAGE_MARGIN:
            found.append(
                Notice(
                    "low-coverage",
                    f"only {coverage:.0%} of recent actuals fell inside the {width:.0%} forecast band; the band is too narrow to trust",
                )
            )
    found.extend(_max_replicas_notice(r, plans))
    if r.now.details.get("proportional_status") == MissingInput.NO_CLUSTER_STATE:
        found.append(
            Notice(
                "no-cluster-state",
                "the proportional rule was left out: no cluster state was given (the daemon reads it from the nodes)",
            )
        )
    found.extend(_buffer_notices(r))
    return dataclasses.replace(r, notices=tuple(found))


def _buffer_notices(r: PoolReport) -> list[Notice]:
    """A CapacityBuffer its autoscaler cannot provision as asked: not resolved
    (`ReadyForProvisioning` False) or capped (`LimitedByQuotas` True), with the autoscaler's words."""
    found = []
    for c in r.target_conditions:
        if c.type == BufferCondition.READY_FOR_PROVISIONING and c.status == "False":
            code, what = "buffer-not-ready", "the autoscaler cannot provision the CapacityBuffer"
        elif c.type == BufferCondition.LIMITED_BY_QUOTAS and c.status == "True":
            code, what = (
                "buffer-limited",
                "the autoscaler caps the CapacityBuffer below its replicas",
            )
        else:
            continue
        why = ": ".join(x for x in (c.reason, c.message) if x)
        found.append(Notice(code, f"{what} ({c.type}={c.status}{': ' + why if why else ''})"))
    return found


def _max_replicas_notice(r: PoolReport, plans: Sequence[Plan]) -> list[Notice]:
    """The notice of a plan that reaches maxReplicas within the horizon (none when it does not)."""
    pool = r.pool
    at_max = (r.plan_desired >= pool.max_replicas) & (pool.max_replicas > 0) | np.array(
        [p.reason == PlanReason.MAX for p in plans]
    )
    if not at_max.any():
        return []
    asked = max(  # what the plan asked before the cap: its largest floor plus the reserve
        max(
            (v for k, v in p.components.items() if k != PlanReason.MAX and v is not None),
            default=0,
        )
        + int(p.details.get("reserve", 0))
        for p in plans
    )
    first = float(r.plan_times[np.flatnonzero(at_max)[0]])
    return [
        Notice(
            "max-replicas",
            f"the plan reaches maxReplicas {pool.max_replicas} for {_hours(_held(r.plan_times, at_max, r.cost.hours))} of the horizon, first at {iso_utc(first)}; up to {asked:,} were asked for (before the cap)",
        )
    ]


def _history_notices(r: PoolReport) -> list[Notice]:
    """The notice of a forecasting pool with too little history to fit, or too little to learn
    the weekly pattern (none when its source failed: that notice says so instead)."""
    spec, found = r.pool.forecast, []
    if spec is not None and spec.enabled and r.forecast_status != NoForecastWhy.SOURCE_ERROR:
        needed = spec.min_history.total_seconds()
        if r.history_seconds < needed:
            found.append(
                Notice(
                    "too-little-history",
                    f"only {_hours(r.history_seconds)} of history; the forecast needs {_hours(needed)} (minHistory) to fit Prophet",
                )
            )
        elif r.history_seconds < PREFERRED_HISTORY_SECONDS:
            found.append(
                Notice(
                    "short-history",
                    f"only {_hours(r.history_seconds)} of history; 14 days or more let the model learn the weekly pattern",
                )
            )
    return found


def _held(times: np.ndarray, mask: np.ndarray, hours: float) -> float:
    """Seconds the plans at `times` selected by `mask` are in force, each until the next instant
    (the last until the horizon's end, `hours` after the first)."""
    until = np.append(times[1:], times[0] + 3600 * hours) if times.size else times
    return float(np.sum((until - times)[mask]))


def _hours(seconds: float) -> str:
    return f"{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:.1f} h"
