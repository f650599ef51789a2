"""Features of the burst model (`predictive_headroom.forecast.burst_model`), known at each instant.

At an instant `t` only the samples at or before `t - delay` are known; the newest of them is held
as it is (a 5-minute series shows its last sample until the next arrives), never interpolated
towards a later one. Every feature is one of:

- read off the newest known sample `m` through per-sample columns that use samples `<= m` only
  (`sample_columns`): the level, its changes over the last 1, 3 and 10 steps, and the largest
  realised lead-time growth whose window ended at or before `m`, over the last 30 minutes and
  2 hours;
- a function of `t` alone: time of day and of week (cyclic), the observation's age;
- read off the model's own curve (Prophet's in-sample fit, then its forecast): the predictable
  ramp over `[t, t + lead]` and the residual `y(m) - curve(m)`.

Demand-valued features are divided by the fit's scale (the median level of its training
history), so the same trees serve a pool at 50 and at 5,000 requests a second.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from predictive_headroom.core.forecast_math import ramp_at
from predictive_headroom.core.series import DAY_SECONDS, WEEK_SECONDS

FEATURES = (
    "time of day (sin)",
    "time of day (cos)",
    "day of week (sin)",
    "day of week (cos)",
    "observation age",
    "level",
    "change 1 step",
    "change 3 steps",
    "change 10 steps",
    "largest growth 30 min",
    "largest growth 2 h",
    "predicted ramp",
    "residual",
)
"""Column names, in order; the report names them in the importance table."""
CHANGE_STEPS = (1, 3, 10)
REALISED_WINDOWS = (1800.0, 7200.0)


def lookback_seconds(step: float, lead: float) -> float:
    """How far before the newest known sample the features read."""
    return max(max(CHANGE_STEPS) * step, max(REALISED_WINDOWS) + lead + step) + step


def sample_columns(times: np.ndarray, values: np.ndarray, step: float, lead: float) -> np.ndarray:
    """Per-sample features (n, 6): level, three changes, two realised-growth maxima.

    Row `m` uses only samples `0..m`, so it may be read at any instant at or after `times[m]`.
    """
    n = values.size
    out = np.full((n, 6), np.nan)
    if n == 0:
        return out
    out[:, 0] = values
    for k, steps in enumerate(CHANGE_STEPS):
        j = np.searchsorted(times, times - steps * step + 1e-6, side="right") - 1
        ok = j >= 0
        out[ok, 1 + k] = values[ok] - values[j[ok]]
    w = max(1, round(lead / step))
    if n > w:
        ahead = sliding_window_view(values[1:], w).max(axis=1)[: n - w]  # max of samples i+1..i+w
        growth = ahead - values[: n - w]  # known once sample i+w has arrived
        known = np.concatenate([np.full(w, np.nan), growth])
        for k, span in enumerate(REALISED_WINDOWS):
            count = max(1, round(span / step))
            out[:, 4 + k] = pd.Series(known).rolling(count, min_periods=1).max().to_numpy()
    return out


def newest_known(times: np.ndarray, at: np.ndarray, delay: float) -> np.ndarray:
    """Index of the newest sample at or before `at - delay` (-1 where there is none)."""
    return np.searchsorted(times, at - delay, side="right") - 1


def feature_matrix(
    times: np.ndarray,
    values: np.ndarray,
    columns: np.ndarray,
    at: np.ndarray,
    *,
    delay: float,
    step: float,
    lead: float,
    scale: float,
    curve: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(X, newest) for instants `at`: the feature rows and the index of the sample each one read.

    Rows whose instant has no known sample are all NaN (their `newest` is -1).
    """
    at = np.asarray(at, dtype=float)
    idx = newest_known(times, at, delay)
    has = idx >= 0
    safe = np.where(has, idx, 0)
    x = np.full((at.size, len(FEATURES)), np.nan)
    day = 2 * math.pi * np.mod(at, DAY_SECONDS) / DAY_SECONDS
    week = (
        2 * math.pi * np.mod(at + 3 * DAY_SECONDS, WEEK_SECONDS) / WEEK_SECONDS
    )  # epoch was a Thursday
    x[:, 0], x[:, 1], x[:, 2], x[:, 3] = np.sin(day), np.cos(day), np.sin(week), np.cos(week)
    x[:, 4] = (at - times[safe]) / step
    x[:, 5:11] = columns[safe] / scale
    if curve is not None:
        x[:, 11] = ramp_at(curve[0], curve[1], at, lead) / scale
        x[:, 12] = (values[safe] - np.interp(times[safe], curve[0], curve[1])) / scale
    else:
        x[:, 11:13] = 0.0
    x[~has] = np.nan
    return x, idx


def growth_target(times: np.ndarray, values: np.ndarray, at: np.ndarray, lead: float) -> np.ndarray:
    """max demand over (t, t + lead] - demand(t), demand linear between samples and read every
    minute, as the backtest's simulated cluster sees it."""
    minutes = max(1, round(lead / 60.0))
    ahead = np.interp(at[:, None] + 60.0 * np.arange(1, minutes + 1)[None, :], times, values)
    return ahead.max(axis=1) - np.interp(at, times, values)
