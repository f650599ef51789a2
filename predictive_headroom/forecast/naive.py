"""Seasonal naive: the forecast that repeats the same time last week (last day under a week).

It is the cold-start forecaster, Prophet's fallback, one side of Prophet's validated blend, and
the yardstick of MASE in `predictive_headroom.forecast.accuracy`. Also here: the helpers every forecaster
shares (history length, the forecast grid, the working step, residual bands).
"""

from __future__ import annotations

import math
import time
from functools import partial

import numpy as np
import pandas as pd

from predictive_headroom.core.series import DAY_SECONDS, WEEK_SECONDS, Forecast, History
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.forecast.burst import burst_profile, regular_grid

BAND_WINDOW_SECONDS = WEEK_SECONDS
"""Residuals from the most recent week size the interval (recent behaviour, not last month's)."""


def history_length(history: History) -> float:
    """Seconds of demand the history covers: first to last sample plus one step (288 x 5 min = 1 day)."""
    return history.span_seconds + history.step_seconds if len(history) > 1 else 0.0


def forecast_times(spec: ModelSpec, now: float, anchor: float = 0.0) -> np.ndarray:
    """The instants to forecast: from the step boundary at or before `now` to `now + horizon`.

    Boundaries are `anchor` plus whole steps. Forecasters pass the history's first sample, so the
    forecast lands on the data's own grid: a spike at minute 9 of a series sampled at 4, 9, 14..
    is not smeared over the points at 5 and 10 before the planner reads ramps from it.
    """
    step = spec.step.total_seconds()
    first = anchor + math.floor((now - anchor) / step) * step
    count = int(math.ceil((now + spec.horizon.total_seconds() - first) / step - 1e-9)) + 1
    return first + step * np.arange(count, dtype=float)


def working_step(history: History, spec: ModelSpec) -> float:
    """The grid the actuals are judged on: the configured step, or the data's own step if coarser."""
    return max(spec.step.total_seconds(), round(history.step_seconds, 3))


def band(residuals: np.ndarray, width: float) -> tuple[float, float]:
    """Residual quantiles that hold `width` of the mass in the middle (0, 0 when there are none)."""
    r = residuals[np.isfinite(residuals)]
    if r.size == 0:
        return 0.0, 0.0
    lo, hi = np.quantile(r, [(1 - width) / 2, (1 + width) / 2])
    return float(min(lo, 0.0)), float(max(hi, 0.0))


def wider(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return min(a[0], b[0]), max(a[1], b[1])


def naive_errors(times: np.ndarray, values: np.ndarray, length: float) -> np.ndarray:
    """Errors of 'same time last week' (last day under a week of history) over the most recent week."""
    period = float(WEEK_SECONDS if length >= WEEK_SECONDS else DAY_SECONDS)
    return _recent(times, values - _lagged(times, values, times - period), times[-1])


def _recent(times: np.ndarray, values: np.ndarray, end: float) -> np.ndarray:
    return values[times > end - BAND_WINDOW_SECONDS]


def _lagged(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Observed value at each of `at` (linear between neighbours, NaN before the first sample)."""
    ok = np.isfinite(values)
    out = np.interp(at, times[ok], values[ok])
    return np.where(at >= times[ok][0] - 1e-6, out, np.nan)


def seasonal_naive(
    history: History, spec: ModelSpec, now: float, settings: PlanSettings | None = None
) -> Forecast:
    """Forecast each instant as the same time one period earlier, repeated as often as needed.

    The period is a week when at least a week of history is known at `now`, else a day. The interval
    is the spread of the same rule's errors over the most recent week (or, with too few of those,
    of the local noise around a one-hour rolling median). `burst` is set when `settings` are given:
    the allowance for their lead time at their burst quantile.
    Raises ValueError when under one day of history is known.
    """
    started = time.perf_counter()
    known = history.until(now)
    length = history_length(known)
    if length < DAY_SECONDS:
        raise ValueError(f"seasonal naive needs one day of history, got {length / 3600:.1f} h")
    period = float(WEEK_SECONDS if length >= WEEK_SECONDS else DAY_SECONDS)
    step = working_step(known, spec)
    times, values = regular_grid(known, step)
    end = known.end

    out = forecast_times(spec, now, known.start)
    # The latest known instant at the same phase: the actual itself up to the end of the history,
    # then one or more periods back (edges within one step are clamped to the nearest sample).
    back = np.maximum(0, np.ceil((out - end) / period - 1e-9)) * period
    ok = np.isfinite(values)
    yhat = np.interp(out - back, times[ok], values[ok])

    fitted = _lagged(times, values, times - period)
    errors = naive_errors(times, values, length)
    if np.isfinite(errors).sum() < 24:
        local = (
            pd.Series(values)
            .rolling(max(3, int(3600 // step)), center=True, min_periods=1)
            .median()
        )
        errors = _recent(times, values - local.to_numpy(), end)
    lo, hi = band(errors, spec.interval_width)

    burst = burst_for = None
    if settings is not None:
        grid = History(times, values, known.source)
        usable = np.isfinite(fitted).sum() * step >= DAY_SECONDS
        burst_for = partial(
            burst_profile, grid, fitted if usable else None, settings.lead, step_seconds=step
        )
        burst = burst_for(settings.quantile)
    yhat = np.maximum(yhat, 0.0)
    return Forecast(
        times=out,
        yhat=yhat,
        lower=np.maximum(yhat + lo, 0.0),
        upper=np.maximum(yhat + hi, 0.0),
        model="seasonal-naive",
        history_end=end,
        fit_seconds=time.perf_counter() - started,
        burst=burst,
        burst_for=burst_for,
        warnings=(f"seasonal naive: same time last {'week' if period == WEEK_SECONDS else 'day'}",),
    )
