"""In-sample calibrations around a forecaster's fit: days to leave out, and the width of the band.

Both look only at the training history, so a forecaster can apply them at every refit.

- `outlier_days`: days that depart from the typical day of the same weekday (in level or in
  shape) by more than `threshold` scaled MADs of all days' departures (1.4826 x the median
  absolute deviation, the standard deviation of a normal sample; at least 2% of the typical
  value), such as the taxi blizzard, Christmas or New Year's night. A day is only called an
  outlier once `settle_days` (2) normal days follow it: a departure at the end of the history may
  be a lasting shift (asg's fall from 40% to 14% CPU), which the fit must see, and the day after
  a storm is not yet a normal day. At most `max_share` of the days are dropped (the
  largest departures first); more than that is the series' own behaviour, not an event.
- `without_outlier_days`: the values with those days set to NaN, a gap the fit skips.
- `band_scale`: the factor that makes a symmetric band of half-width `half` hold `width` of the
  given out-of-sample errors (rolling residuals), within `[low, high]`.
"""

from __future__ import annotations

import warnings

import numpy as np

from predictive_headroom.core.series import DAY_SECONDS

MAD_SCALE = 1.4826
"""MAD times this estimates the standard deviation of normally distributed values."""
MIN_RELATIVE_MAD = 0.02
"""The scaled MAD is at least this share of the typical value: on a very regular series a day
within 3 x 2% = 6% of its weekday's typical day is never an outlier, however small the noise."""


def outlier_days(
    times: np.ndarray,
    values: np.ndarray,
    threshold: float = 3.0,
    max_share: float = 0.15,
    settle_days: int = 2,
) -> np.ndarray:
    """The UTC day numbers (`floor(t / 86400)`) of the outlier days in `values` (see the module docstring).

    `values` are on a regular grid (`times` evenly spaced, NaN for gaps). A day's departure is
    the mean absolute difference between its values and the median of the same weekday's
    values at the same time of day, so both a changed level and a changed shape (New Year's
    night) count. Needs three weeks of a weekday to judge it, and 14 judged days in all (else
    nothing is an outlier); days with under half their points present are not judged.
    """
    ok = np.isfinite(values)
    if values.size < 2 or not ok.any():
        return np.empty(0, dtype=np.int64)
    step = float(np.median(np.diff(times)))
    per_day = int(round(DAY_SECONDS / step))
    day = np.floor(times / DAY_SECONDS).astype(np.int64)
    days = np.unique(day)
    grid = np.full((days.size, per_day), np.nan)
    slot = np.floor((times % DAY_SECONDS) / step + 1e-9).astype(np.int64) % per_day
    grid[np.searchsorted(days, day), slot] = values
    judged = np.isfinite(grid).sum(axis=1) >= per_day / 2
    departure = np.full(days.size, np.nan)
    for weekday in range(7):
        same = np.flatnonzero(judged & (days % 7 == weekday))
        if same.size < 3:
            continue
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a slot missing on every such day
            typical = np.nanmedian(grid[same], axis=0)
            departure[same] = np.nanmean(np.abs(grid[same] - typical), axis=1)
    scored = np.isfinite(departure)
    if scored.sum() < 14:
        return np.empty(0, dtype=np.int64)
    centre = float(np.median(departure[scored]))
    mad = MAD_SCALE * float(np.median(np.abs(departure[scored] - centre)))
    mad = max(mad, MIN_RELATIVE_MAD * float(np.nanmedian(np.abs(values))))
    if mad <= 0:
        return np.empty(0, dtype=np.int64)
    score = np.where(scored, (departure - centre) / mad, 0.0)
    flagged = score > threshold
    # A recent departure may be the start of a lasting shift: only normal days after it tell.
    normal_days = days[judged & ~flagged]
    normal_after = normal_days.size - np.searchsorted(normal_days, days, side="right")
    flagged &= normal_after >= settle_days
    limit = int(max_share * judged.sum())
    keep = [i for i in np.argsort(-score)[:limit] if flagged[i]]
    return np.sort(days[keep])


def without_outlier_days(
    times: np.ndarray, values: np.ndarray, threshold: float = 3.0
) -> np.ndarray:
    """`values` with the points of `outlier_days` set to NaN (unchanged when there are none)."""
    days = outlier_days(times, values, threshold)
    if days.size == 0:
        return values
    drop = np.isin(np.floor(times / DAY_SECONDS).astype(np.int64), days)
    return np.where(drop, np.nan, values)


def band_scale(
    errors: np.ndarray, half: float, width: float, low: float = 0.5, high: float = 2.0
) -> float:
    """The factor by which a symmetric band of half-width `half` must grow (or shrink) to hold
    `width` of `errors` (actual - forecast, out of sample), clipped to `[low, high]`.

    1 when there are no finite errors or the band has no width.
    """
    ok = np.abs(errors[np.isfinite(errors)])
    if ok.size == 0 or half <= 0:
        return 1.0
    return float(np.clip(np.quantile(ok, width) / half, low, high))


def rolling_errors(times: np.ndarray, residuals: np.ndarray, span: float) -> np.ndarray:
    """In-sample rolling-origin errors of a level-corrected fit: at origins `span` apart, ending at
    the last sample, each point of the next `span` seconds minus the mean residual of the `span`
    seconds before its origin.

    `residuals` are actual - fitted on the training grid. The result is what a forecast that adds
    back the recent residual level (as the validated blend may) would have missed by, as its level
    drifts over the forecast horizon; NaN where a residual or the level is missing.
    """
    out = np.full(residuals.size, np.nan)
    if residuals.size == 0 or span <= 0:
        return out
    origin = times[-1] - span
    while origin - span >= times[0]:
        before = (times > origin - span) & (times <= origin) & np.isfinite(residuals)
        after = (times > origin) & (times <= origin + span)
        if before.any():
            out[after] = residuals[after] - residuals[before].mean()
        origin -= span
    return out
