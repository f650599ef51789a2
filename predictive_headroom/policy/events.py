"""The two shapes of a schedule window: recurring (`start`/`end` crons) or a dated event
(`from`/`to`, once), and the rules that tell them apart, shared by the model and by the check of
raw YAML (`policy.load`), so a file with several problems gets each reported once."""

from __future__ import annotations

import re
from collections.abc import Set
from datetime import date, datetime, time, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import WithJsonSchema

from predictive_headroom.policy.cron import expand, gap_end

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EXAMPLE = "write 2026-11-27 or 2026-11-27 06:00 (wall-clock time in the window's timezone)"

LocalTime = Annotated[
    datetime,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^\s*\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?)?\S*\s*$",
            "description": "a date (2026-11-27) or a date and time (2026-11-27 06:00), wall-clock "
            "time in the window's timezone; a date alone in `to` includes that whole day",
        }
    ),
]
"""A dated window's `from` or `to`: wall-clock time in the window's time zone (naive), or an
instant with its own UTC offset."""


def local_time(value: object, end_of_day: bool) -> object:
    """`value` (a string, date or datetime) as a datetime; a date alone is its midnight, or the
    next midnight when `end_of_day` (so `to: 2026-11-27` includes the 27th). ValueError with an
    example when it is neither."""
    if isinstance(value, datetime) or value is None:
        return value
    if isinstance(value, str) and _DATE.match(value.strip()):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a date: {exc}; {_EXAMPLE}") from None
    if isinstance(value, date):
        return datetime.combine(value + timedelta(days=1 if end_of_day else 0), time())
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a date or a date and time; {_EXAMPLE}") from None
    raise ValueError(f"expected a date or a date and time, got {value!r}; {_EXAMPLE}")


def event_instant(value: datetime, timezone: str) -> float:
    """`value` as POSIX seconds: its own UTC offset when it has one, else wall-clock time in
    `timezone`; a wall-clock time in a spring-forward gap (it never shows on a clock there) is the
    first real instant after the gap, as a recurring window's start or end in the gap fires."""
    if value.tzinfo is not None:
        return value.timestamp()
    local = value.replace(tzinfo=ZoneInfo(timezone))
    moved = gap_end(local)
    return local.timestamp() if moved is None else moved


def gap_move(value: datetime | None, timezone: str) -> str | None:
    """What happens to `value` when it is a wall-clock time in a spring-forward gap of
    `timezone`: the sentence saying the gap and where the time moves; None otherwise."""
    if value is None or value.tzinfo is not None:
        return None
    zone = ZoneInfo(timezone)
    moved = gap_end(value.replace(tzinfo=zone))
    if moved is None:
        return None
    after = datetime.fromtimestamp(moved, zone)
    before = datetime.fromtimestamp(moved - 1, zone).replace(tzinfo=None) + timedelta(seconds=1)
    return (
        f"{value:%Y-%m-%d %H:%M} does not exist in {timezone}: the clocks go from "
        f"{before:%H:%M} straight to {after:%H:%M} that day (daylight saving time begins); "
        f"it is read as {after:%Y-%m-%d %H:%M %Z}, where a recurring window's start or end in "
        "the gap moves too"
    )


def same_start_end_message(end: str) -> str:
    return f"end {end!r} equals start; a window needs different start and end times"


def window_shape_problems(
    given: Set[str], start: object = None, end: object = None
) -> list[tuple[str, str]]:
    """(field, message) for each way the keys `given` (as written: `start`, `end`, `from`, `to`,
    `skipHolidays`) fail to make one window shape; empty when they make one."""
    recurring, dated = given & {"start", "end"}, given & {"from", "to"}
    if recurring and dated:
        return [mixed_shape_problem(recurring, {"start": start, "end": end})]
    if not recurring and not dated:
        return [
            (
                "start",
                "a window needs start and end (crons, for a recurring window such as business "
                "hours) or from and to (dates, for a one-off event such as a sale)",
            )
        ]
    pairs = (("start", "end", "'0 8 * * 1-5'"), ("from", "to", "2026-11-27 06:00"))
    problems = [
        (missing, f"required with {present}: give both, e.g. {missing}: {example}")
        for a, b, example in pairs
        for present, missing in ((a, b), (b, a))
        if present in given and missing not in given
    ]
    if dated and "skipHolidays" in given:
        problems.append(
            (
                "skipHolidays",
                "skipHolidays applies to recurring windows (start/end); a dated event opens on "
                "the dates it names: remove skipHolidays",
            )
        )
    if isinstance(start, str) and isinstance(end, str) and _same(start, end):
        problems.append(("end", same_start_end_message(end)))
    return problems


DATED_KEY = {"start": "from", "end": "to"}
"""A recurring window's key and the dated event's key that plays its part."""


def looks_like_date(value: object) -> bool:
    """True when `value` begins with a date (2026-11-27), as a dated event's from/to does."""
    return isinstance(value, str) and bool(_DATE.match(value.strip()[:10]))


def mixed_shape_problem(recurring: Set[str], crons: dict[str, object]) -> tuple[str, str]:
    """(field, message) for a window with both recurring keys (`recurring`, their values in
    `crons`) and dated ones: a date written under start or end is told to move to from or to;
    otherwise which keys to remove."""
    for key in sorted(recurring):
        if looks_like_date(crons.get(key)):
            return (
                key,
                f"{crons[key]!r} is a date, and start/end take crons (a recurring window): "
                f"for a dated event write {DATED_KEY[key]}: {crons[key]!r} in place of {key}",
            )
    return (
        "from",
        "a window is recurring (start and end, crons) or a dated event (from and to), "
        "not both: remove start/end or from/to",
    )


def date_as_cron_problem(key: str, value: str) -> str:
    """The message for a date written as a recurring window's `key` (start or end) cron."""
    return (
        f"{value!r} is a date, not a cron: a dated event is written from and to "
        f"({DATED_KEY[key]}: {value!r}); start and end take crons, e.g. '0 8 * * 1-5'"
    )


def _same(start: str, end: str) -> bool:
    try:
        return expand(start).split() == expand(end).split()
    except ValueError:
        return False
