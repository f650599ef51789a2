"""The within-hour profile: cron-like patterns that repeat every hour, which a daily model cannot see.

Batch jobs, cache refreshes and reports started by cron at the same minute of every hour show up
as spikes at a fixed minute. Prophet's daily seasonality (12 Fourier terms, fitted on 15-minute
means) smooths them away, so the planner would read no ramp before them and the burst profile
would take them for unpredictable growth.

After the main fit, the residuals on the data's grid are detrended by their centred one-hour
moving average (classical decomposition), and the profile is the median of what is left at each
phase of the hour (one bin per data step). It is shrunk towards zero by the positive-part
James-Stein factor `max(0, 1 - (k - 1) * mean(se^2) / sum(profile^2))`, where `se` is each bin's
standard error (from its median absolute deviation): a series with no hourly pattern gets a
profile near zero, not one fitted to noise.
What it finds on real series: `docs/measurements.md`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

HOUR_SECONDS = 3600.0
MIN_BINS = 4
"""A profile needs at least four samples per hour (data steps of 15 minutes or finer)."""
MIN_HOURS = 24
"""...and a day's worth of hours in each bin."""


@dataclass(frozen=True)
class HourlyProfile:
    """Offsets (demand units) by phase of the hour, `step` seconds apart starting at `origin`'s phase."""

    origin: float
    step: float
    offsets: np.ndarray
    shrink: float
    """The James-Stein factor applied (1 keeps the raw medians, 0 drops them)."""

    def __call__(self, times: np.ndarray | float) -> np.ndarray:
        """The offset at `times`, linearly interpolated between bins around the hour."""
        k = self.offsets.size
        pos = np.mod(np.asarray(times, dtype=float) - self.origin, HOUR_SECONDS) / self.step
        low = np.floor(pos).astype(int) % k
        frac = pos - np.floor(pos)
        return self.offsets[low] * (1 - frac) + self.offsets[(low + 1) % k] * frac

    @property
    def amplitude(self) -> float:
        """Peak-to-trough size of the profile."""
        return float(self.offsets.max() - self.offsets.min()) if self.offsets.size else 0.0


def hourly_profile(times: np.ndarray, residuals: np.ndarray, step: float) -> HourlyProfile | None:
    """Fit the within-hour profile of `residuals` on a regular grid of `step` seconds (NaN = missing).

    None when the step does not divide an hour into at least `MIN_BINS` bins, or when a bin has
    fewer than `MIN_HOURS` usable samples.
    """
    k = int(round(HOUR_SECONDS / step)) if step > 0 else 0
    if k < MIN_BINS or abs(k * step - HOUR_SECONDS) > 1e-6 or residuals.size < k * MIN_HOURS:
        return None
    # A centred moving average over one hour (2 x k for even k, as in classical decomposition)
    # takes out everything slower than an hour.
    series = pd.Series(residuals, dtype=float)
    if k % 2:
        trend = series.rolling(k, center=True, min_periods=k).mean()
    else:
        trend = (
            series.rolling(k, min_periods=k)
            .mean()
            .rolling(2, min_periods=2)
            .mean()
            .shift(-(k // 2))
        )
    within = (series - trend).to_numpy()
    bins = np.round((times - times[0]) / step).astype(int) % k
    ok = np.isfinite(within)
    frame = pd.DataFrame({"x": within[ok], "bin": bins[ok]})
    grouped = frame.groupby("bin")["x"]
    counts = grouped.size().reindex(range(k), fill_value=0).to_numpy()
    if counts.min() < MIN_HOURS:
        return None
    medians = grouped.median().reindex(range(k)).to_numpy(dtype=float)
    mad = (frame["x"] - frame["bin"].map(grouped.median())).abs().groupby(frame["bin"]).median()
    se = 1.2533 * 1.4826 * mad.reindex(range(k)).to_numpy(dtype=float) / np.sqrt(counts)
    centred = medians - medians.mean()
    energy = float(np.sum(centred**2))
    shrink = max(0.0, 1.0 - (k - 1) * float(np.mean(se**2)) / energy) if energy > 0 else 0.0
    return HourlyProfile(float(times[0]), float(step), centred * shrink, shrink)
