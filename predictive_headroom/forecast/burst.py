"""The burst profile: how much demand grew within the lead time beyond what the model predicted.

`docs/design.md` (section 3) splits the forecast component of headroom into a predictable `ramp` (from
the model's yhat) and a `burst` learned from history. For each past instant `s` on a regular
grid with step `dt`, and the lead time `L` covering `w = max(1, round(L / dt))` grid steps:

    growth(s) = max(y(s+dt), ..., y(s+w*dt)) - y(s)                 what actually came
    ramp(s)   = max(0, max(yhat(s), ..., yhat(s+w*dt)) - yhat(s))   what the model foresaw
    g(s)      = max(0, growth(s) - ramp(s))                         residual growth

`burst` is the q-quantile of `g` over the instants that fall into the same time-of-day bin
(UTC), and also the same weekday when there are enough weeks of history. Instants whose window
reaches past the end of the history, or that touch a missing sample, are left out: only what
was known at the end of the history is used. All values are in demand units.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from predictive_headroom.core.forecast_math import forward_max
from predictive_headroom.core.series import DAY_SECONDS, BurstProfile, History

logger = logging.getLogger(__name__)

DEFAULT_BIN_SECONDS = 1800.0
WEEKDAY_MIN_DAYS = 56.0
"""Learn a separate profile per weekday only with at least eight weeks of history (fewer days make
a weekday's quantile noise; `docs/measurements.md`)."""
NAIVE_WINDOW_SECONDS = 14 * DAY_SECONDS


def regular_grid(history: History, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Return `history` on a regular grid of `step` seconds starting at its first sample.

    Each grid point holds the mean of the samples in `[t, t + step)`; points with no sample are NaN,
    so gaps stay visible instead of being interpolated.
    """
    if len(history) == 0:
        return np.empty(0), np.empty(0)
    if step <= 0:
        raise ValueError(f"grid step must be positive, got {step}")
    index = np.floor((history.times - history.start) / step + 1e-9).astype(np.int64)
    size = int(index[-1]) + 1
    sums = np.bincount(index, weights=history.values, minlength=size)
    counts = np.bincount(index, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    times = history.start + step * np.arange(size, dtype=float)
    return times, values


def residual_growth(values: np.ndarray, yhat: np.ndarray | None, window: int) -> np.ndarray:
    """Return g(s) of the module docstring for each grid point (NaN where it cannot be known)."""
    growth = forward_max(values, window, include_current=False, past_end=np.nan) - values
    if yhat is None:
        ramp = np.zeros_like(values)
    else:
        ramp = np.maximum(
            0.0, forward_max(np.asarray(yhat, dtype=float), window, past_end=np.nan) - yhat
        )
    return np.maximum(0.0, growth - ramp)


def _fill_circular(row: np.ndarray) -> np.ndarray:
    """Fill NaN bins by linear interpolation around the day (a day with no data gives zeros)."""
    ok = np.isfinite(row)
    if ok.all():
        return row
    if not ok.any():
        return np.zeros_like(row)
    n = row.size
    idx = np.arange(n)
    known = idx[ok]
    xp = np.concatenate([known - n, known, known + n])
    fp = np.tile(row[ok], 3)
    return np.interp(idx, xp, fp)


def burst_profile(
    history: History,
    yhat: np.ndarray | None,
    lead: float,
    quantile: float,
    *,
    step_seconds: float | None = None,
    bin_seconds: float = DEFAULT_BIN_SECONDS,
    by_weekday: bool | None = None,
) -> BurstProfile:
    """Return the q-quantile of residual growth over the lead time by time of day (and weekday).

    `history` must be on a regular grid of `step_seconds` (default: its median spacing); missing
    points may be absent or NaN. `yhat` is the model's in-sample fit at `history.times` (None means
    no model: the whole growth counts, ramp 0). `by_weekday=None` chooses a per-weekday profile
    when the history spans at least eight weeks; a weekday bin with fewer than about three days
    of samples uses the all-days value of its time-of-day bin instead.
    """
    if not 0 < quantile < 1:
        raise ValueError(f"burst quantile must be between 0 and 1, got {quantile}")
    if bin_seconds <= 0 or DAY_SECONDS % bin_seconds:
        raise ValueError(
            f"burst bin width {bin_seconds:g}s must divide a day (e.g. 900, 1800, 3600)"
        )
    step = step_seconds or history.step_seconds or bin_seconds
    bins = int(DAY_SECONDS // bin_seconds)
    span = history.span_seconds + step if len(history) else 0.0
    weekday = span >= WEEKDAY_MIN_DAYS * DAY_SECONDS if by_weekday is None else by_weekday
    if len(history) < 2:
        return BurstProfile(
            quantile, lead, bin_seconds, np.zeros((7 if weekday else 1, bins)), weekday
        )
    times, g = _lead_growth(history, yhat, lead, step)
    table = _quantile_table(times, g, quantile, bin_seconds, step, weekday=bool(weekday))
    return BurstProfile(quantile, lead, bin_seconds, table, bool(weekday))


def _lead_growth(
    history: History, yhat: np.ndarray | None, lead: float, step: float
) -> tuple[np.ndarray, np.ndarray]:
    """(times, growth): `history` on the regular grid of `step` (regridded, with `yhat`
    interpolated onto it, when its spacing is not `step`) and the residual growth over
    `lead` at each time, NaN where it is unknown. A lead time under one step counts the
    share of a step's growth that arrives within it."""
    values = np.asarray(history.values, dtype=float)
    times = history.times
    fitted = None if yhat is None else np.asarray(yhat, dtype=float)
    if not np.allclose(np.diff(times), step, rtol=1e-6, atol=1e-6):
        times, values = regular_grid(history, step)
        if fitted is not None:
            fitted = np.interp(times, history.times, fitted)
    window = max(1, int(round(lead / step)))
    g = residual_growth(values, fitted, window)
    if lead < step:
        # Growth is only seen per data step; within a shorter lead time, count the share of it
        # that arrives in the lead time (demand taken as linear between samples).
        g = g * (lead / step)
    return times, g


def _quantile_table(
    times: np.ndarray,
    g: np.ndarray,
    quantile: float,
    bin_seconds: float,
    step: float,
    *,
    weekday: bool,
) -> np.ndarray:
    """The `quantile` of the finite growths `g` per time-of-day bin, shape (1, bins), or per weekday
    and bin, shape (7, bins), when `weekday`. Empty time-of-day bins are filled around the day; a
    weekday bin with under 2.5 days of samples takes its time-of-day bin's value."""
    bins = int(DAY_SECONDS // bin_seconds)
    ok = np.isfinite(g)
    tod = ((np.mod(times, DAY_SECONDS)) // bin_seconds).astype(int)[ok]
    dow = ((np.floor(times / DAY_SECONDS).astype(int) + 3) % 7)[ok]
    frame = pd.DataFrame({"g": g[ok], "tod": tod, "dow": dow})

    by_tod = frame.groupby("tod")["g"].quantile(quantile).reindex(range(bins)).to_numpy(dtype=float)
    by_tod = _fill_circular(by_tod)
    if not weekday:
        return by_tod[np.newaxis, :]

    per_day = max(1.0, bin_seconds / step)
    min_samples = math.ceil(2.5 * per_day)
    grouped = frame.groupby(["dow", "tod"])["g"]
    per_bin = grouped.quantile(quantile).where(grouped.size() >= min_samples)
    grid = per_bin.unstack().reindex(index=range(7), columns=range(bins)).to_numpy(dtype=float)
    return np.where(np.isfinite(grid), grid, by_tod[np.newaxis, :])


def naive_burst_profile(history: History, lead: float, quantile: float, now: float) -> BurstProfile:
    """The model-free baseline: burst by time of day from the 14 days before `now`, with ramp 0."""
    recent = history.until(now).since(now - NAIVE_WINDOW_SECONDS)
    return burst_profile(recent, None, lead, quantile, by_weekday=False)
