"""KEDA-cron window semantics: open from a start firing to the next end firing, wall-clock in the
window's time zone, overlaps take the max, lead time opens early, DST in both directions."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictive_headroom.core.engine import schedule_series
from predictive_headroom.core.schedules import firings, open_intervals
from predictive_headroom.policy.config import ScheduleWindow
from predictive_headroom.policy.cron import cron_trigger

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def window(start, end, tz="UTC", replicas=3, name="w"):
    return ScheduleWindow(name=name, timezone=tz, start=start, end=end, desiredReplicas=replicas)


def utc(*args):
    return datetime(*args, tzinfo=UTC).timestamp()


def local(tz, *args, fold=0):
    return datetime(*args, tzinfo=tz, fold=fold).timestamp()


def is_open(w, at, lead=0.0):
    """Whether `w` is open at `at`, as the planner asks it (`open_intervals` at one instant)."""
    return any(a <= at < b for a, b in open_intervals(w, at, at, lead))


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


# Daylight-saving days in the table below: Berlin springs forward on 2026-03-29 (02:00 CET ->
# 03:00 CEST) and falls back on 2026-10-25 (03:00 CEST -> 02:00 CET); New York springs forward
# on 2026-03-08 (02:00 EST -> 03:00 EDT) and falls back on 2026-11-01 (02:00 EDT -> 01:00 EST).
@pytest.mark.parametrize(
    "expression, tz, day, expected",
    [
        # A fixed time inside the gap fires once, at the first real instant after it (03:00).
        ("30 2 * * *", BERLIN, (2026, 3, 29), [(3, 0, 0)]),
        ("15 2 * * *", BERLIN, (2026, 3, 29), [(3, 0, 0)]),
        ("0 2 * * *", BERLIN, (2026, 3, 29), [(3, 0, 0)]),
        ("*/20 2 * * *", BERLIN, (2026, 3, 29), [(3, 0, 0)]),  # three gap times, one firing
        ("30 2,3 * * *", BERLIN, (2026, 3, 29), [(3, 0, 0), (3, 30, 0)]),
        ("30 2 * * *", NY, (2026, 3, 8), [(3, 0, 0)]),
        ("59 2 * * *", NY, (2026, 3, 8), [(3, 0, 0)]),
        ("30 2 * * *", BERLIN, (2026, 3, 30), [(2, 30, 0)]),  # the day after: back to 02:30
        # A fixed time in the repeated hour fires once, in the first pass.
        ("30 1 * * *", NY, (2026, 11, 1), [(1, 30, 0)]),
        ("30 2 * * *", BERLIN, (2026, 10, 25), [(2, 30, 0)]),
        ("0 1 * * *", NY, (2026, 11, 1), [(1, 0, 0)]),
        # An hourly expression follows elapsed time: it skips the gap, repeats with the hour.
        ("30 * * * *", BERLIN, (2026, 3, 29), [(h, 30, 0) for h in (0, 1, *range(3, 24))]),
        (
            "30 * * * *",
            NY,
            (2026, 11, 1),
            [(0, 30, 0), (1, 30, 0), (1, 30, 1), *[(h, 30, 0) for h in range(2, 24)]],
        ),
    ],
)
def test_firings_on_daylight_saving_days(expression, tz, day, expected):
    start = local(tz, *day, 0, 0)
    next_day = date(*day) + timedelta(days=1)
    end = (
        local(tz, next_day.year, next_day.month, next_day.day, 0, 0) - 1
    )  # gap and fall-back days are 23 h and 25 h
    got = list(firings(cron_trigger(expression, str(tz)), start, end))
    assert got == [local(tz, *day, h, m, fold=f) for h, m, f in expected]


@pytest.mark.parametrize(
    "start, end, tz, at, expected",
    [
        # The case: Berlin 2026-03-29, window 02:30-04:00 opens at 03:00 CEST.
        (
            "30 2 * * *",
            "0 4 * * *",
            BERLIN,
            (2026, 3, 29, 1, 59, 59),
            False,
        ),  # the last second before the gap
        ("30 2 * * *", "0 4 * * *", BERLIN, (2026, 3, 29, 3, 0), True),
        ("30 2 * * *", "0 4 * * *", BERLIN, (2026, 3, 29, 3, 15), True),
        ("30 2 * * *", "0 4 * * *", BERLIN, (2026, 3, 29, 4, 0), False),
        ("15 2 * * *", "0 6 * * *", BERLIN, (2026, 3, 29, 1, 59), False),
        ("15 2 * * *", "0 6 * * *", BERLIN, (2026, 3, 29, 4, 0), True),
        ("15 2 * * *", "0 6 * * *", BERLIN, (2026, 3, 29, 6, 0), False),
        # New York 2026-03-08.
        ("30 2 * * *", "0 5 * * *", NY, (2026, 3, 8, 1, 59), False),
        ("30 2 * * *", "0 5 * * *", NY, (2026, 3, 8, 3, 0), True),
        ("30 2 * * *", "0 5 * * *", NY, (2026, 3, 8, 4, 0), True),
        ("30 2 * * *", "0 5 * * *", NY, (2026, 3, 9, 2, 29), False),  # normal days: 02:30 local
        ("30 2 * * *", "0 5 * * *", NY, (2026, 3, 9, 2, 30), True),
        # An end inside the gap closes the window at the first real instant after the gap.
        ("0 1 * * *", "30 2 * * *", NY, (2026, 3, 8, 1, 59), True),
        ("0 1 * * *", "30 2 * * *", NY, (2026, 3, 8, 3, 0), False),
        # Fall back: 01:00-03:00 covers both passes of 01:30 in New York.
        ("0 1 * * *", "0 3 * * *", NY, (2026, 11, 1, 1, 30), True),
        ("0 1 * * *", "0 3 * * *", NY, (2026, 11, 1, 1, 30, 0, 1), True),
        ("0 1 * * *", "0 3 * * *", NY, (2026, 11, 1, 2, 30), True),
        ("0 1 * * *", "0 3 * * *", NY, (2026, 11, 1, 3, 0), False),
        # A window 01:30-01:45 opens once: not again in the repeated hour.
        ("30 1 * * *", "45 1 * * *", NY, (2026, 11, 1, 1, 40), True),
        ("30 1 * * *", "45 1 * * *", NY, (2026, 11, 1, 1, 40, 0, 1), False),
        ("30 2 * * *", "45 2 * * *", BERLIN, (2026, 10, 25, 2, 40), True),
        ("30 2 * * *", "45 2 * * *", BERLIN, (2026, 10, 25, 2, 40, 0, 1), False),
        # A window that opens before the repeated hour and closes in it closes in the first pass.
        ("0 0 * * *", "30 1 * * *", NY, (2026, 11, 1, 1, 15, 0, 1), False),
    ],
)
def test_windows_on_daylight_saving_days(start, end, tz, at, expected):
    fields, fold = (at[:6], at[6]) if len(at) == 7 else (at, 0)  # a 7th field marks the second pass
    assert is_open(window(start, end, tz=str(tz)), local(tz, *fields, fold=fold)) is expected


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
    cases = {
        (9, 0): (3, "day"),
        (12, 30): (7, "lunch"),
        (13, 30): (7, "lunch"),
        (15, 0): (5, "afternoon"),
        (19, 0): (5, "afternoon"),
        (21, 0): (0, None),
    }
    at = np.array([utc(2026, 11, 23, h, m) for h, m in cases])
    floor, which, _ = schedule_series(windows, at, 0.0)
    names = [windows[k].name if k >= 0 else None for k in which]
    assert list(zip(floor.tolist(), names, strict=True)) == list(cases.values())


WINDOWS = st.sampled_from(
    [
        ("0 8 * * 1-5", "0 18 * * 1-5", "Europe/Berlin"),
        ("0 22 * * *", "0 6 * * *", "America/New_York"),
        ("30 2 * * *", "0 4 * * *", "America/New_York"),
        ("*/20 * * * *", "10,50 * * * *", "UTC"),
        ("0 0 28 * *", "0 0 2 * *", "Asia/Kolkata"),
    ]
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(WINDOWS, st.integers(0, 20 * 86_400), st.sampled_from([0, 300, 1800]))
def test_a_long_scan_agrees_with_asking_at_one_instant(spec, offset, lead):
    start, end, tz = spec
    w = window(start, end, tz=tz)
    base = utc(2026, 2, 20, 0, 0)
    at = base + offset
    intervals = open_intervals(w, base, base + 21 * 86_400, lead)
    inside = any(a <= at < b for a, b in intervals)
    assert inside == is_open(w, at, lead)
