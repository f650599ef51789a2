"""The burst profile: the quantile of demand growth within the lead time that no model predicted."""

from __future__ import annotations

import numpy as np
import pytest

from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.forecast.burst import burst_profile, naive_burst_profile

STEP = 300.0
T0 = 1_700_006_400.0  # 2023-11-15T00:00:00Z, a Wednesday


def spiky(days: int, spike_days: set[int] | None = None, seed: int = 1) -> History:
    """Demand about 10 with small noise and a jump to 100 at 09:00 UTC (on `spike_days`, default all)."""
    t = T0 + STEP * np.arange(int(days * DAY_SECONDS / STEP))
    rng = np.random.default_rng(seed)
    values = 10 + rng.normal(0, 0.3, t.size)
    day = ((t - T0) // DAY_SECONDS).astype(int)
    at_nine = np.isclose(np.mod(t, DAY_SECONDS), 9 * 3600)
    chosen = at_nine if spike_days is None else at_nine & np.isin(day, sorted(spike_days))
    values[chosen] = 100.0
    return History(t, values, "spiky")


def allowance(profile, hhmm: str, day: int = 0) -> float:
    hours, minutes = map(int, hhmm.split(":"))
    return float(profile.at(T0 + day * DAY_SECONDS + hours * 3600 + minutes * 60))


@pytest.mark.parametrize(
    "lead, quantile, big, small",
    [
        (
            300,
            0.95,
            ["08:55", "08:30"],
            ["09:00", "09:30", "03:00", "08:00"],
        ),  # 1 of 6 samples in the bin jumps
        (600, 0.95, ["08:50", "08:55"], ["09:05", "12:00"]),
        (300, 0.5, [], ["08:55", "09:00", "12:00"]),  # the median of the 08:30 bin sees no jump
    ],
)
def test_daily_spike_gives_allowance_only_just_before_it(lead, quantile, big, small):
    profile = burst_profile(spiky(14), None, lead, quantile)
    for hhmm in big:
        assert allowance(profile, hhmm) > 80, hhmm
    for hhmm in small:
        assert allowance(profile, hhmm) < 2, hhmm


def test_growth_the_model_predicted_is_not_counted_again():
    history = spiky(14)
    assert (
        allowance(burst_profile(history, history.values, 300, 0.95), "08:55") < 2
    )  # a perfect yhat
    assert allowance(burst_profile(history, np.full(len(history), 10.0), 300, 0.95), "08:55") > 80


def test_weekday_profile_learns_monday_only_spikes_with_eight_weeks():
    mondays = {d for d in range(56) if (d + 2) % 7 == 0}  # T0 is a Wednesday
    history = spiky(56, mondays)
    profile = burst_profile(history, None, 300, 0.95)
    monday = min(mondays)
    assert profile.by_weekday and profile.values.shape == (7, 48)
    assert allowance(profile, "08:55", monday) > 80
    assert allowance(profile, "08:55", monday + 1) < 2
    # Four weeks (the default history) is too few days per weekday: one profile for every day.
    short = burst_profile(history.until(T0 + 28 * DAY_SECONDS), None, 300, 0.95)
    assert not short.by_weekday and short.values.shape == (1, 48)


def test_gaps_and_the_end_of_history_are_left_out():
    history = spiky(14)
    keep = np.ones(len(history), bool)
    keep[100:400] = False  # a day-long hole
    holed = History(history.times[keep], history.values[keep], "holed")
    profile = burst_profile(holed, None, 300, 0.95, step_seconds=STEP)
    assert allowance(profile, "08:55") > 80 and allowance(profile, "12:00") < 2
    assert np.all(np.isfinite(profile.values)) and np.all(profile.values >= 0)


def test_naive_baseline_uses_only_the_14_days_before_now():
    now = T0 + 20 * DAY_SECONDS
    history = spiky(30, spike_days={3})  # 17 days before `now`: outside the window
    before = naive_burst_profile(history, 300, 0.99, now)
    assert allowance(before, "08:55") < 2
    later = History(
        np.append(history.times, history.end + STEP), np.append(history.values, 1e6), "later"
    )
    assert np.array_equal(naive_burst_profile(later, 300, 0.99, now).values, before.values)
    recent = spiky(30, spike_days={18})
    assert allowance(naive_burst_profile(recent, 300, 0.99, now), "08:55") > 10


def test_bin_width_must_divide_a_day():
    with pytest.raises(ValueError, match="divide a day"):
        burst_profile(spiky(2), None, 300, 0.95, bin_seconds=7 * 60 * 60)


def test_lead_shorter_than_the_data_step_counts_only_its_share_of_the_growth():
    # Demand rises by 30 every 30-minute step; within a 6-minute lead only a fifth of that arrives.
    import numpy as np

    from predictive_headroom.core.series import History
    from predictive_headroom.forecast.burst import burst_profile

    times = np.arange(0, 3 * 86_400, 1800, dtype=float)
    values = 30.0 * np.arange(times.size)
    whole_step = burst_profile(History(times, values), None, 1800, 0.5)
    short_lead = burst_profile(History(times, values), None, 360, 0.5)
    assert np.allclose(whole_step.values, 30.0)
    assert np.allclose(short_lead.values, 6.0)
