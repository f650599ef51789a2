"""KEDA-cron style schedule windows, evaluated with APScheduler's CronTrigger.

A window is open from a `start` firing until the next `end` firing, in the window's own time
zone (so daylight-saving changes never shift it), and `lead` seconds early. Pure functions: the
time is always passed in.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache

from apscheduler.triggers.cron import CronTrigger

from predictive_headroom.policy.config import ScheduleWindow
from predictive_headroom.policy.cron import cron_trigger, fire_instant, gap_end, hour_is_wildcard

# How far back to look for the last firing, shortest first (a yearly cron needs the last).
_LOOKBACKS = (3600.0, 86_400.0, 8 * 86_400.0, 32 * 86_400.0, 367 * 86_400.0, 4 * 367 * 86_400.0)


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


def open_intervals(
    window: ScheduleWindow, start: float, end: float, lead: float = 0.0
) -> list[tuple[float, float]]:
    """The [open, close) intervals of `window` that overlap [start, end], lead time included.

    Asked at one instant (`start == end`) it says whether the window is open then; over a long
    span it is fast enough for a backtest, with the same answer at every instant.
    """
    t_start = _trigger(window.start, window.timezone)
    t_end = _trigger(window.end, window.timezone)
    first_start = last_firing(t_start, start + lead)
    # From just before the last start: a start moved out of a spring-forward gap fires at the
    # gap's end, which a scan beginning exactly there would not see.
    scan_from = first_start - 1 if first_start is not None else start
    starts = list(firings(t_start, scan_from, end + lead))
    intervals: list[tuple[float, float]] = []
    for s in starts:
        if intervals and s < intervals[-1][1]:
            continue  # a start while already open changes nothing
        close = next(firings(t_end, s + 1, float("inf")), float("inf"))
        opened = s - lead
        if intervals and opened <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], close)
        else:
            intervals.append((opened, close))
    return [(a, b) for a, b in intervals if b > start and a <= end]
