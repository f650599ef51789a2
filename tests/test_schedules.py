"""KEDA-cron window semantics: open from a start firing to the next end firing, wall-clock in the
window's time zone, overlaps take the max, lead time opens early, DST in both directions."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictive_headroom.core.schedules import is_open, open_intervals, schedule_floor
from predictive_headroom.policy.config import ScheduleWindow

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def window(start, end, tz="UTC", replicas=3, name="w"):
    return ScheduleWindow(name=name, timezone=tz, start=start, end=end, desiredReplicas=replicas)


def utc(*args):
    return datetime(*args, tzinfo=timezone.utc).timestamp()


def local(tz, *args, fold=0):
    return datetime(*args, tzinfo=tz, fold=fold).timestamp()


# 2026-11-23 is a Monday.
@pytest.mark.parametrize(
    "start, end, at, expected",
    [
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 23, 7, 59), False),
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 23, 8, 0), True),  # start firing opens
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 23, 17, 59), True),
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 23, 18, 0), False),  # end firing closes
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 28, 12, 0), False),  # Saturday (cron 6)
        ("0 8 * * 1-5", "0 18 * * 1-5", utc(2026, 11, 29, 12, 0), False),  # Sunday (cron 0)
        ("0 8 * * 0,6", "0 18 * * 0,6", utc(2026, 11, 29, 12, 0), True),  # Sunday is 0
        ("0 8 * * 7", "0 18 * * 7", utc(2026, 11, 29, 12, 0), True),  # ... and 7
        ("0 8 * * mon-fri", "0 18 * * mon-fri", utc(2026, 11, 27, 12, 0), True),  # names
        # Across midnight.
        ("0 22 * * *", "0 6 * * *", utc(2026, 11, 23, 23, 30), True),
        ("0 22 * * *", "0 6 * * *", utc(2026, 11, 24, 5, 59), True),
        ("0 22 * * *", "0 6 * * *", utc(2026, 11, 24, 6, 0), False),
        ("0 22 * * *", "0 6 * * *", utc(2026, 11, 24, 12, 0), False),
        # A window that opens Friday evening and closes Monday morning.
        ("0 18 * * 5", "0 6 * * 1", utc(2026, 11, 29, 3, 0), True),
        ("0 18 * * 5", "0 6 * * 1", utc(2026, 11, 25, 3, 0), False),
        # Monthly: open from the 28th until the 2nd.
        ("0 0 28 * *", "0 0 2 * *", utc(2026, 12, 1, 12, 0), True),
        ("0 0 28 * *", "0 0 2 * *", utc(2026, 12, 15, 12, 0), False),
    ],
)
def test_window_open(start, end, at, expected):
    assert is_open(window(start, end), at) is expected


@pytest.mark.parametrize(
    "tz, day, hour, minute, fold, expected",
    [
        # Spring forward in New York, 2026-03-08: 02:00 EST -> 03:00 EDT. The window 09:00-17:00
        # local stays at 09:00 local (13:00 UTC, one hour earlier in UTC than the day before).
        (NY, 7, 8, 59, 0, False),
        (NY, 7, 9, 0, 0, True),
        (NY, 8, 8, 59, 0, False),
        (NY, 8, 9, 0, 0, True),
        (NY, 8, 16, 59, 0, True),
        (NY, 8, 17, 0, 0, False),
        # Fall back in Berlin, 2026-10-25: 03:00 CEST -> 02:00 CET.
        (BERLIN, 25, 8, 59, 0, False),
        (BERLIN, 25, 9, 0, 0, True),
        (BERLIN, 25, 17, 0, 0, False),
    ],
)
def test_business_hours_follow_wall_clock_across_dst(tz, day, hour, minute, fold, expected):
    month = 3 if tz is NY else 10
    w = window("0 9 * * *", "0 17 * * *", tz=str(tz))
    assert is_open(w, local(tz, 2026, month, day, hour, minute, fold=fold)) is expected


def test_start_in_spring_forward_gap_still_opens_the_window():
    # 02:30 does not exist in New York on 2026-03-08; the window must still open that day.
    w = window("30 2 * * *", "0 5 * * *", tz="America/New_York")
    assert is_open(w, local(NY, 2026, 3, 8, 4, 0))
    assert not is_open(w, local(NY, 2026, 3, 8, 1, 59))
    # and on normal days it opens at 02:30 local
    assert is_open(w, local(NY, 2026, 3, 9, 2, 30))
    assert not is_open(w, local(NY, 2026, 3, 9, 2, 29))


def test_start_in_spring_forward_gap_in_berlin():
    # 02:15 does not exist in Berlin on 2026-03-29.
    w = window("15 2 * * *", "0 6 * * *", tz="Europe/Berlin")
    assert is_open(w, local(BERLIN, 2026, 3, 29, 4, 0))
    assert not is_open(w, local(BERLIN, 2026, 3, 29, 6, 0))


def test_repeated_hour_at_fall_back_does_not_close_or_shift_the_window():
    # 01:30 happens twice in New York on 2026-11-01; a window 01:00-03:00 covers both.
    w = window("0 1 * * *", "0 3 * * *", tz="America/New_York")
    assert is_open(w, local(NY, 2026, 11, 1, 1, 30, fold=0))
    assert is_open(w, local(NY, 2026, 11, 1, 1, 30, fold=1))
    assert is_open(w, local(NY, 2026, 11, 1, 2, 30))
    assert not is_open(w, local(NY, 2026, 11, 1, 3, 0))


@pytest.mark.parametrize(
    "at, lead, expected",
    [
        (utc(2026, 11, 23, 7, 50), 0, False),
        (utc(2026, 11, 23, 7, 50), 600, True),  # a 10-minute lead opens it at 07:50
        (utc(2026, 11, 23, 7, 49), 600, False),
        (utc(2026, 11, 23, 18, 0), 600, False),  # the lead does not delay the end
    ],
)
def test_lead_time_opens_early(at, lead, expected):
    assert is_open(window("0 8 * * *", "0 18 * * *"), at, lead) is expected


def test_overlapping_windows_take_the_maximum():
    windows = [
        window("0 8 * * *", "0 18 * * *", replicas=3, name="day"),
        window("0 12 * * *", "0 14 * * *", replicas=7, name="lunch"),
        window("0 13 * * *", "0 20 * * *", replicas=5, name="afternoon"),
    ]
    cases = {(9, 0): (3, "day"), (12, 30): (7, "lunch"), (13, 30): (7, "lunch"), (15, 0): (5, "afternoon"), (19, 0): (5, "afternoon"), (21, 0): (0, None)}
    for (h, m), (replicas, name) in cases.items():
        floor = schedule_floor(windows, utc(2026, 11, 23, h, m))
        assert (floor.replicas, floor.window) == (replicas, name), (h, m)


WINDOWS = st.sampled_from(
    [
        ("0 8 * * 1-5", "0 18 * * 1-5", "Europe/Berlin"),
        ("0 22 * * *", "0 6 * * *", "America/New_York"),
        ("30 2 * * *", "0 4 * * *", "America/New_York"),
        ("*/20 * * * *", "10,50 * * * *", "UTC"),
        ("0 0 28 * *", "0 0 2 * *", "Asia/Kolkata"),
    ]
)


@settings(max_examples=60, deadline=None)
@given(WINDOWS, st.integers(0, 20 * 86_400), st.sampled_from([0, 300, 1800]))
def test_intervals_agree_with_pointwise_evaluation(spec, offset, lead):
    start, end, tz = spec
    w = window(start, end, tz=tz)
    base = utc(2026, 2, 20, 0, 0)
    at = base + offset
    intervals = open_intervals(w, base, base + 21 * 86_400, lead)
    inside = any(a <= at < b for a, b in intervals)
    assert inside == is_open(w, at, lead)
