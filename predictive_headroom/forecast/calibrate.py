"""In-sample calibrations around a forecaster's fit: days to leave out, and the width of the band.

Both look only at the training history, so a forecaster can apply them at every refit.

- `outlier_days`: days whose mean departs from the typical mean of the same weekday by more than
  `threshold` scaled MADs (1.4826 x the median absolute deviation, the standard deviation of a
  normal sample; at least 2% of the typical daily mean), such as the taxi blizzard or Christmas. A day is only called an outlier once a
  normal day follows it: a departure at the end of the history may be a lasting shift (asg's fall
  from 40% to 14% CPU), which the fit must see. At most `max_share` of the days are dropped (the
  largest departures first); more than that is the series' own behaviour, not an event.
- `without_outlier_days`: the values with those days set to NaN, a gap the fit skips.
- `band_scale`: the factor that makes a symmetric band of half-width `half` hold `width` of the
  given out-of-sample errors (rolling residuals), within `[low, high]`.
"""

from __future__ import annotations

import numpy as np

from predictive_headroom.core.series import DAY_SECONDS

MAD_SCALE = 1.4826
"""MAD times this estimates the standard deviation of normally distributed values."""
MIN_RELATIVE_MAD = 0.02
"""The scaled MAD is at least this share of the typical daily mean: on a very regular series a
day within 3 x 2% = 6% of its weekday is never an outlier, however small the day-to-day noise."""


def outlier_days(
    times: np.ndarray, values: np.ndarray, threshold: float = 3.0, max_share: float = 0.15
) -> np.ndarray:
    """The UTC day numbers (`floor(t / 86400)`) of the outlier days in `values` (see the module docstring).

    Needs two weeks of days with data to compare each day with its own weekday (else empty).
    Days with under half their points present are not judged.
    """
    ok = np.isfinite(values)
    if not ok.any():
        return np.empty(0, dtype=np.int64)
    day = np.floor(times / DAY_SECONDS).astype(np.int64)
    days, inverse = np.unique(day, return_inverse=True)
    counts = np.bincount(inverse, weights=ok.astype(float), minlength=days.size)
    sums = np.bincount(inverse, weights=np.where(ok, values, 0.0), minlength=days.size)
    expected = np.median(np.bincount(inverse, minlength=days.size))
    judged = counts >= expected / 2
    if judged.sum() < 14:
        return np.empty(0, dtype=np.int64)
    means = np.where(judged, sums / np.maximum(counts, 1), np.nan)
    typical = np.full(days.size, np.nan)
    for weekday in range(7):
        same = judged & (days % 7 == weekday)
        if same.sum() >= 2:
            typical[same] = np.median(means[same])
    departure = means - typical
    scored = np.isfinite(departure)
    if scored.sum() < 14:
        return np.empty(0, dtype=np.int64)
    centre = np.median(departure[scored])
    mad = MAD_SCALE * np.median(np.abs(departure[scored] - centre))
    mad = max(mad, MIN_RELATIVE_MAD * float(np.median(np.abs(means[scored]))))
    if mad <= 0:
        return np.empty(0, dtype=np.int64)
    score = np.where(scored, np.abs(departure - centre) / mad, 0.0)
    flagged = score > threshold
    # A trailing run of departures may be a lasting shift: only a normal day after it tells.
    normal = np.flatnonzero(judged & ~flagged)
    last_normal = days[normal[-1]] if normal.size else days[0] - 1
    flagged &= days < last_normal
    limit = int(max_share * judged.sum())
    order = np.argsort(-score)
    keep = [i for i in order[:limit] if flagged[i]]
    return np.sort(days[keep])


def without_outlier_days(times: np.ndarray, values: np.ndarray, threshold: float = 3.0) -> np.ndarray:
    """`values` with the points of `outlier_days` set to NaN (unchanged when there are none)."""
    days = outlier_days(times, values, threshold)
    if days.size == 0:
        return values
    drop = np.isin(np.floor(times / DAY_SECONDS).astype(np.int64), days)
    return np.where(drop, np.nan, values)


def band_scale(errors: np.ndarray, half: float, width: float, low: float = 0.5, high: float = 2.0) -> float:
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
