"""In-sample calibrations: outlier days (3 scaled MADs from their weekday, never a trailing shift)
and the band's scale from rolling residuals."""

import numpy as np
import pytest

from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.forecast.calibrate import (
    band_scale,
    outlier_days,
    rolling_errors,
    without_outlier_days,
)

STEP = 1800.0
START_DAY = 20_000  # a UTC day number; any will do


def series(days: int = 28, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Half-hourly demand with a daily shape, quieter weekends and 3% noise."""
    rng = np.random.default_rng(seed)
    times = START_DAY * DAY_SECONDS + STEP * np.arange(int(days * DAY_SECONDS / STEP))
    hour = (times % DAY_SECONDS) / 3600
    weekend = np.isin(np.floor(times / DAY_SECONDS).astype(int) % 7, (2, 3))
    values = (100 + 50 * np.sin(2 * np.pi * (hour - 6) / 24)) * np.where(weekend, 0.7, 1.0)
    return times, values * (1 + 0.03 * rng.standard_normal(times.size))


def scaled_day(times, values, day, factor):
    out = values.copy()
    out[np.floor(times / DAY_SECONDS).astype(int) == START_DAY + day] *= factor
    return out


@pytest.mark.parametrize(
    "day, factor, expected",
    [
        (10, 0.3, [10]),  # a blizzard in the middle of the history
        (10, 1.8, [10]),  # a surge
        (10, 0.97, []),  # within the noise
        (27, 0.3, []),  # on the last day: may be a lasting shift, kept
        (26, 0.3, []),  # one normal day after it is not enough to tell
        (25, 0.3, [25]),  # two are
    ],
)
def test_outlier_days(day, factor, expected):
    times, values = series()
    found = outlier_days(times, scaled_day(times, values, day, factor))
    assert list(found - START_DAY) == expected


def test_a_shift_that_lasts_is_not_an_outlier():
    times, values = series()
    later = np.floor(times / DAY_SECONDS).astype(int) >= START_DAY + 24
    assert outlier_days(times, np.where(later, values * 0.35, values)).size == 0


def test_needs_two_weeks_and_drops_at_most_a_share_of_days():
    times, values = series(days=10)
    assert outlier_days(times, scaled_day(times, values, 5, 0.2)).size == 0
    times, values = series()
    for day in (3, 6, 9, 12, 15, 18):
        values = scaled_day(times, values, day, 0.2 + 0.05 * day / 3)
    assert len(outlier_days(times, values, max_share=0.1)) == 2  # int(0.1 * 28): the two largest
    assert list(outlier_days(times, values, max_share=0.1) - START_DAY) == [3, 6]


def test_without_outlier_days_blanks_only_those_days():
    times, values = series()
    values = scaled_day(times, values, 10, 0.3)
    cleaned = without_outlier_days(times, values)
    day = np.floor(times / DAY_SECONDS).astype(int) - START_DAY
    assert np.isnan(cleaned[day == 10]).all()
    assert np.array_equal(cleaned[day != 10], values[day != 10])
    untouched, plain = series()
    assert without_outlier_days(untouched, plain) is plain


def test_band_scale_makes_the_band_hold_the_share_of_errors():
    errors = np.linspace(-10, 10, 2001)  # |error| uniform on [0, 10]: its 80% quantile is 8
    assert band_scale(errors, 4.0, 0.8) == pytest.approx(2.0)
    assert band_scale(errors, 8.0, 0.8) == pytest.approx(1.0)
    assert band_scale(errors, 10.0, 0.8) == pytest.approx(0.8)
    assert band_scale(errors, 10.0, 0.8, low=1.0) == 1.0  # widen only
    assert band_scale(errors, 1.0, 0.8) == 2.0  # clipped
    assert band_scale(np.array([np.nan]), 3.0, 0.8) == 1.0
    assert band_scale(errors, 0.0, 0.8) == 1.0


def test_rolling_errors_see_the_level_drift_within_the_horizon():
    times = np.arange(0, 10 * DAY_SECONDS, STEP)
    steady = rolling_errors(times, np.full(times.size, 5.0), 2 * DAY_SECONDS)
    assert np.nanmax(np.abs(steady)) == 0  # a constant offset is corrected by the level
    assert np.isnan(steady[times <= 2 * DAY_SECONDS]).all()  # no level before the first origin
    drifting = rolling_errors(times, times / DAY_SECONDS, 2 * DAY_SECONDS)  # +1 per day
    ok = np.isfinite(drifting)
    assert (
        drifting[ok].min() > 0 and drifting[ok].max() <= 3 + 1e-9
    )  # one day (mean lag) to three days behind
