"""The figures a report shows for one pool, each from a forecast and its plan: pure functions.

The plan over the horizon is `core.engine.horizon_plans` (the grid `plan --horizon` shows);
`find_peaks` finds the next peaks and the pods warm for each; `headroom_cost` prices
the headroom; `judge_past` reads earlier forecasts (saved report.json data) against the actuals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from predictive_headroom.core.forecast_math import PEAK_RADIUS_SECONDS, local_peaks
from predictive_headroom.core.price import Price, pool_price
from predictive_headroom.core.series import Forecast, History
from predictive_headroom.policy.config import Policy, Pool

MAX_PEAKS = 3
MAX_PAST = 5


@dataclass(frozen=True)
class Peak:
    """An expected peak of demand and the placeholder pods that will be warm for it."""

    at: float
    demand: float
    upper: float
    warm_replicas: int
    warm_from: float

    @property
    def lead_seconds(self) -> float:
        return self.at - self.warm_from


@dataclass(frozen=True)
class HeadroomCost:
    """What the planned headroom reserves over the horizon; `money` is None without prices."""

    hours: float
    replica_hours: float
    cpu_hours: float
    gib_hours: float
    money: float | None
    currency: str | None
    peak_replicas: int
    static_replica_hours: float
    """What keeping the peak count all the time would reserve, for comparison."""
    assumed: str = ""
    """How a placeholder-hour was priced, in one line (`core.price`)."""


@dataclass(frozen=True)
class PastForecast:
    """A forecast made earlier, read at the actual samples that have arrived since."""

    made_at: float
    times: np.ndarray
    actual: np.ndarray
    yhat: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    mape: float | None
    coverage: float


def find_peaks(
    forecast: Forecast, at: float, plan_times: np.ndarray, desired: np.ndarray, lead: float
) -> tuple[Peak, ...]:
    """The next (up to three) highest forecast peaks after `at`, each with the replicas warm for it.

    A peak is a point higher than everything within 6 h before it and at least as high as
    everything within 6 h after, standing out by 5% of the forecast's range. The warm count is
    the most placeholder pods planned during the lead time before the peak, and `warm_from`
    when that count was first reached without a drop in between.
    """
    mask = forecast.times > at
    t, v = forecast.times[mask], forecast.yhat[mask]
    if v.size < 3:
        return ()
    radius = max(1, int(round(PEAK_RADIUS_SECONDS / forecast.step_seconds)))
    chosen = list(local_peaks(v, radius, most=MAX_PEAKS))
    if not chosen and 0 < int(np.argmax(v)) < v.size - 1:
        chosen = [int(np.argmax(v))]
    peaks = []
    for i in chosen:
        upper = float(forecast.upper[mask][i])
        warm, since = _warm_for(float(t[i]), plan_times, desired, lead)
        peaks.append(Peak(float(t[i]), float(v[i]), upper, warm, since))
    return tuple(peaks)


def _warm_for(
    peak: float, times: np.ndarray, desired: np.ndarray, lead: float
) -> tuple[int, float]:
    """The most pods planned during the lead time before `peak` (each plan in force until the next
    instant) and the instant that count was first reached without a drop in between."""
    last = max(0, int(np.searchsorted(times, peak, side="right")) - 1)
    first = min(last, max(0, int(np.searchsorted(times, peak - lead, side="right")) - 1))
    warm = int(desired[first : last + 1].max())
    k = first + int(np.flatnonzero(desired[first : last + 1] == warm)[0])
    while k > 0 and desired[k - 1] >= warm:
        k -= 1
    return warm, float(times[k])


def headroom_cost(
    pool: Pool, times: np.ndarray, desired: np.ndarray, policy: Policy, price: Price | None = None
) -> HeadroomCost:
    """Replica-, CPU- and GiB-hours the plan reserves (each step held until the next), and money
    at `price` (default: the policy's `cost:` section, none without it)."""
    dt = np.diff(times)
    replica_hours = float(np.sum(desired[:-1] * dt) / 3600)
    hours = float((times[-1] - times[0]) / 3600) if times.size > 1 else 0.0
    cpu_hours = replica_hours * pool.placeholder.cpu_cores
    gib_hours = replica_hours * pool.placeholder.memory_gib
    money, currency, assumed = None, None, ""
    if price is None and policy.cost is not None:
        # One price for every page and command: a placeholder-hour is its share of a node-hour.
        price = pool_price(pool, policy.cost)
    if price is not None:
        if price.placeholder_hour is not None:
            money = replica_hours * price.placeholder_hour
            assumed = (
                f"a placeholder-hour at {price.placeholder_hour:,.4g} {price.currency}, 1/{price.slots} "
                f"of {price.assumed}"
            )
        currency = price.currency
    peak = int(desired.max()) if desired.size else 0
    return HeadroomCost(
        hours, replica_hours, cpu_hours, gib_hours, money, currency, peak, peak * hours, assumed
    )


def judge_past(
    name: str, past: Sequence[Mapping[str, Any]], known: History, at: float
) -> tuple[PastForecast, ...]:
    """Earlier forecasts of pool `name` (from saved report.json data) against the actuals since."""
    judged = []
    for data in past:
        made = float(data.get("at", math.inf))
        pool = next((p for p in data.get("pools", []) if p.get("name") == name), None)
        series = ((pool or {}).get("forecast") or {}).get("series")
        if not series or not made < at:
            continue
        ft = np.asarray(series["times"], dtype=float)
        actual = known.since(made + 1e-6).until(min(at, float(ft[-1])))
        if len(actual) < 3:
            continue
        read = {
            k: np.interp(actual.times, ft, np.asarray(series[k], dtype=float))
            for k in ("yhat", "lower", "upper")
        }
        nonzero = actual.values != 0
        err = np.abs(actual.values - read["yhat"])[nonzero] / np.abs(actual.values[nonzero])
        mape = float(100 * err.mean()) if nonzero.any() else None
        inside = (actual.values >= read["lower"]) & (actual.values <= read["upper"])
        judged.append(
            PastForecast(
                made,
                actual.times,
                actual.values,
                read["yhat"],
                read["lower"],
                read["upper"],
                mape,
                float(inside.mean()),
            )
        )
    judged.sort(key=lambda p: p.made_at)
    return tuple(judged[-MAX_PAST:])
