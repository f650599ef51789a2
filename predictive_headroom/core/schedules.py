"""Schedule windows: KEDA-cron style ones evaluated with APScheduler's CronTrigger, and dated events.

A recurring window is open from a `start` firing until the next `end` firing, in the window's own
time zone (so daylight-saving changes never shift it), and `lead` seconds early; a start firing
on a public holiday of its `skipHolidays` calendar (the local date of the firing) opens nothing.
A dated event is open from `from` to `to`, also `lead` seconds early. Pure functions: the time is
always passed in.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from predictive_headroom.policy.calendars import holiday_name
from predictive_headroom.policy.config import ScheduleWindow
from predictive_headroom.policy.cron import cron_trigger, fire_instant, gap_end, hour_is_wildcard

# How far back to look for the last firing, shortest first (a yearly cron needs the last).
_LOOKBACKS = (3600.0, 86_400.0, 8 * 86_400.0, 32 * 86_400.0, 367 * 86_400.0, 4 * 367 * 86_400.0)


# How many holidays in a row a window's last opening is looked for past (a start on each of them).
_MAX_SKIPPED = 32


@lru_cache(maxsize=1024)
def _trigger(expression: str, tz: str) -> CronTrigger:
    return cron_trigger(expression, tz)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def firings(trigger: CronTrigger, start: float, end: float) -> Iterator[float]:
    """Yield the trigger's firing times in [start, end] as POSIX seconds, ascending.

    Daylight-saving changes follow `policy.cron`'s rules: a fixed-hour time inside a
    spring-forward gap fires at the first real instant after it, and once in a repeated hour.
    """
    wildcard = hour_is_wildcard(trigger)
    now = _utc(start)
    previous = None
    last = float("-inf")
    while True:
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None:
            return
        previous = fire
        ts = fire_instant(fire, wildcard)
        if ts is None or ts <= last or ts < start:
            # Not a firing (skipped by the DST rules, or a repeat of one already given): scan on
            # from the gap's end when inside a gap, else from just after this fire time.
            resume = gap_end(fire)
            if resume is None or resume <= now.timestamp():
                resume = max(fire.timestamp(), now.timestamp()) + 1
            now = _utc(resume)
            continue
        if ts > end:
            return
        yield ts
        last = ts
        now = _utc(ts + 1)


def last_firing(trigger: CronTrigger, at: float) -> float | None:
    """The latest firing at or before `at` (POSIX seconds), or None if it never fired."""
    for lookback in _LOOKBACKS:
        last = None
        for ts in firings(trigger, at - lookback, at):
            last = ts
        if last is not None:
            return last
    return None


def _on_holiday(window: ScheduleWindow, at: float) -> bool:
    """True when instant `at` falls on a public holiday of the window's `skipHolidays` calendar."""
    if window.skip_holidays is None:
        return False
    day = datetime.fromtimestamp(at, ZoneInfo(window.timezone)).date()
    return holiday_name(window.skip_holidays, day) is not None


def _last_opening(window: ScheduleWindow, trigger: CronTrigger, at: float) -> float | None:
    """The latest start firing at or before `at` that opens the window (not on a holiday)."""
    last = last_firing(trigger, at)
    for _ in range(_MAX_SKIPPED):
        if last is None or not _on_holiday(window, last):
            return last
        last = last_firing(trigger, last - 1)
    return last


def open_intervals(
    window: ScheduleWindow, start: float, end: float, lead: float = 0.0
) -> list[tuple[float, float]]:
    """The [open, close) intervals of `window` that overlap [start, end], lead time included.

    Asked at one instant (`start == end`) it says whether the window is open then; over a long
    span it is fast enough for a backtest, with the same answer at every instant.
    """
    if window.dated:
        opens, closes = window.event_span()
        return [(opens - lead, closes)] if closes > start and opens - lead <= end else []
    assert window.start is not None and window.end is not None, "a recurring window has both"
    t_start = _trigger(window.start, window.timezone)
    t_end = _trigger(window.end, window.timezone)
    first_start = _last_opening(window, t_start, start + lead)
    # From just before the last start: a start moved out of a spring-forward gap fires at the
    # gap's end, which a scan beginning exactly there would not see.
    scan_from = first_start - 1 if first_start is not None else start
    starts = list(firings(t_start, scan_from, end + lead))
    intervals: list[tuple[float, float]] = []
    for s in starts:
        if _on_holiday(window, s):
            continue
        if intervals and s < intervals[-1][1]:
            continue  # a start while already open changes nothing
        close = next(firings(t_end, s + 1, float("inf")), float("inf"))
        opened = s - lead
        if intervals and opened <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], close)
        else:
            intervals.append((opened, close))
    return [(a, b) for a, b in intervals if b > start and a <= end]
