"""The within-hour profile: found where cron-like spikes repeat every hour, shrunk away where there are none."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from fitting import fit_args
from testdata import series_path

from predictive_headroom.core.forecast_math import ramp_at
from predictive_headroom.core.series import DAY_SECONDS, Forecast
from predictive_headroom.forecast.forecaster import ProphetForecaster
from predictive_headroom.forecast.hourly import hourly_profile
from predictive_headroom.forecast.naive import forecast_times
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.sources.csvsource import read_csv_history

T0 = 1_700_000_040.0  # minute 14 of an hour: samples at 4, 9, 14.. past the hour, like nab_aws_asg_cpu_5min


def grid(days: float, step: float = 300.0) -> np.ndarray:
    return T0 + step * np.arange(int(days * DAY_SECONDS / step))


def test_a_spike_at_a_fixed_minute_is_found_at_its_phase():
    rng = np.random.default_rng(7)
    t = grid(7)
    minute = np.mod(t, 3600) // 60
    residuals = (
        rng.normal(0, 2, t.size)
        + np.where(minute == 9, 30.0, 0.0)
        + 5 * np.sin(2 * np.pi * t / DAY_SECONDS)
    )
    profile = hourly_profile(t, residuals, 300.0)
    assert profile is not None and profile.shrink > 0.99
    at = (T0 // 3600 + 5) * 3600 + np.arange(0, 3600, 60.0)  # every minute of one hour
    values = profile(at)
    assert int(np.argmax(values)) == 9
    assert values[9] == pytest.approx(
        30 * 11 / 12, abs=1.5
    )  # centred: the spike less its hourly mean
    # Between samples the profile is linear: half-way between minute 4 and minute 9.
    assert profile(at[4] + 150) == pytest.approx((values[4] + values[9]) / 2)


def test_noise_without_an_hourly_pattern_is_shrunk_to_almost_nothing():
    rng = np.random.default_rng(11)
    t = grid(14)
    residuals = rng.standard_t(3, t.size) * 10
    profile = hourly_profile(t, residuals, 300.0)
    assert profile is not None
    assert profile.shrink < 0.5
    assert profile.amplitude < 1.0  # against a noise scale of about 10


@pytest.mark.parametrize("step, days", [(1800.0, 14), (420.0, 14), (300.0, 0.5)])
def test_no_profile_when_the_step_is_too_coarse_does_not_divide_an_hour_or_history_is_short(
    step, days
):
    t = grid(days, step)
    assert hourly_profile(t, np.ones(t.size), step) is None


def test_forecast_times_land_on_the_data_grid():
    spec = ForecastSpec(query="demand", demandPerReplica=1.0)
    now = T0 + 3 * 86400 + 1000.0
    on_data = forecast_times(spec, now, anchor=T0)
    assert np.allclose(np.mod(on_data - T0, 300.0), 0.0)
    assert on_data[0] <= now < on_data[0] + 300.0
    assert np.allclose(np.mod(forecast_times(spec, now), 300.0), 0.0)


@pytest.mark.slow
def test_prophet_foresees_the_hourly_spike_of_the_asg_series():
    """nab_aws_asg_cpu_5min peaks at minute 9 of most hours; the daily model alone cannot show it."""
    full = read_csv_history(series_path("nab_aws_asg_cpu_5min"))
    history = full.until(full.start + 21 * DAY_SECONDS)
    spec = ForecastSpec(query="demand", demandPerReplica=1.0, horizon=timedelta(hours=6))
    now = history.end
    with_hourly = ProphetForecaster().fit(history, *fit_args(spec, 240.0), now)
    daily_only = ProphetForecaster(hourly=False).fit(history, *fit_args(spec, 240.0), now)
    assert isinstance(with_hourly, Forecast) and isinstance(daily_only, Forecast)
    assert np.allclose(np.mod(with_hourly.times - history.start, 300.0), 0.0)
    minutes = (np.mod(with_hourly.times, 3600) // 60).astype(int)
    shape = with_hourly.ramp_curve
    peaks = [minutes[i + int(np.argmax(shape[i : i + 12]))] for i in range(0, shape.size - 12, 12)]
    assert np.mean(np.array(peaks) == 9) > 0.8
    # The ramp read in the 5 minutes before the spike: most of the spike with the profile, little without.
    spike = with_hourly.times[(minutes == 9)][1]
    ramp = float(
        ramp_at(with_hourly.times, with_hourly.ramp_curve, np.array([spike - 300]), 300)[0]
    )
    assert ramp > 20.0
    other = ramp_at(daily_only.times, daily_only.ramp_curve, np.array([spike - 300]), 300)
    assert float(other[0]) < ramp / 3


def test_gaps_in_the_history_are_skipped_not_filled():
    rng = np.random.default_rng(3)
    t = grid(7)
    minute = np.mod(t, 3600) // 60
    residuals = rng.normal(0, 1, t.size) + np.where(minute == 34, 12.0, 0.0)
    residuals[500:900] = np.nan  # a day and a half missing
    residuals[::37] = np.nan  # and scattered points
    profile = hourly_profile(t, residuals, 300.0)
    assert profile is not None and np.all(np.isfinite(profile.offsets))
    at = (T0 // 3600 + 2) * 3600 + np.arange(0, 3600, 60.0)
    assert int(np.argmax(profile(at))) == 34
