"""Standard 5-field cron expressions (as in KEDA's cron scaler) turned into APScheduler triggers.

Used to validate the policy's schedule windows and refit times, and to evaluate them.

Daylight-saving rules follow classic cron (Vixie cron, as most users know it): an expression with
fixed hours fires once a day at wall-clock time, so a time inside a spring-forward gap fires at
the first real instant after the gap, and a time in the repeated fall-back hour fires once (in the
first pass). An expression whose hour field is a wildcard (`*` or `*/n`) follows elapsed time
instead: it fires in both passes of the repeated hour and skips times that do not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.cron.expressions import AllExpression

_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_WEEKDAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# The descriptors KEDA's cron scaler accepts (robfig/cron's), as the 5-field expressions they mean.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
CRON_PATTERN = r"^\s*(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+(\s+\S+){4})\s*$"
"""What a JSON schema can check of a cron expression: a descriptor, or exactly 5 fields."""


def expand(expression: str) -> str:
    """The 5-field form of `expression` (descriptors such as @daily expanded)."""
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() in DESCRIPTORS:
            return DESCRIPTORS[text.lower()]
        if text.lower().startswith("@every"):
            raise ValueError(
                f"{expression!r}: @every is not supported; a window needs wall-clock times, "
                "e.g. '*/30 * * * *' for every 30 minutes"
            )
        raise ValueError(
            f"unknown cron descriptor {expression!r}; use one of {', '.join(DESCRIPTORS)} "
            "or a 5-field expression"
        )
    return expression


def _weekday_number(token: str) -> int:
    token = token.strip().lower()
    if token in _WEEKDAYS or token in _WEEKDAY_NAMES:
        return _WEEKDAYS.index(token[:3])
    if not token.isdigit():
        raise ValueError(
            f"day of week {token!r} is not a day: use {', '.join(_WEEKDAYS)} or 0-7 "
            "(0 and 7 are Sunday), e.g. mon-fri or 1-5"
        )
    day = int(token)
    if not 0 <= day <= 7:
        raise ValueError(f"day of week {day} is out of range 0-7")
    return day % 7


def _standard_day_of_week(field: str) -> str:
    """Cron's day-of-week field (0 or 7 = Sunday) as APScheduler 3 day names.

    APScheduler 3 numbers days from Monday = 0, so `1-5` would mean Tuesday to Saturday there;
    naming the days keeps the standard cron meaning users copy from KEDA.
    """
    days: set[int] = set()
    for part in field.split(","):
        rng, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step {step} in day of week must be at least 1")
        if rng == "*":
            lo, hi = 0, 6
        elif "-" in rng:
            a, b = rng.split("-", 1)
            lo, hi = _weekday_number(a), _weekday_number(b)
            if b.strip() == "7":
                hi = 7
            if hi < lo:
                raise ValueError(f"day-of-week range {rng!r} runs backwards")
        else:
            lo = hi = _weekday_number(rng)
            if step_text:
                hi = 6
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_WEEKDAYS[d] for d in sorted(days))


def cron_trigger(expression: str, tz: str = "UTC") -> CronTrigger:
    """Return APScheduler's trigger for a standard 5-field cron expression (or a descriptor such
    as @daily) in time zone `tz`."""
    fields = expand(expression).split()
    if len(fields) != 5:
        raise ValueError(
            f"cron expression {expression!r} has {len(fields)} field{'s' if len(fields) != 1 else ''}; "
            "expected 5 "
            "(minute hour day-of-month month day-of-week), e.g. '0 8 * * 1-5', or a descriptor "
            "such as @daily"
        )
    minute, hour, day, month, day_of_week = fields
    try:
        return CronTrigger(
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=_standard_day_of_week(day_of_week),
            timezone=ZoneInfo(tz),
        )
    except ValueError as exc:
        raise ValueError(
            f"invalid cron expression {expression!r}: {_which_field(fields, exc)}"
        ) from None


_RANGES = {"minute": (0, 59), "hour": (0, 23), "day-of-month": (1, 31), "month": (1, 12)}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_EXAMPLES = {
    "minute": "0 or */15",
    "hour": "8 or 8-18",
    "day-of-month": "1 or 1,15",
    "month": "11, nov or 1-3",
}


def _which_field(fields: list[str], exc: ValueError) -> str:
    """The error `exc` of a 5-field expression in the product's words: the field at fault, its
    value, the values it takes and an example."""
    for label, value in zip(_FIELDS, fields, strict=False):
        if label == "day-of-week":
            try:
                _standard_day_of_week(value)
            except ValueError as own:
                return f"day-of-week field {value!r}: {own}"
            continue
        if problem := _field_problem(label, value):
            lo, hi = _RANGES[label]
            return (
                f"{label} field {value!r}: {problem}; the {label} field takes {lo}-{hi}"
                f"{' or jan-dec' if label == 'month' else ''}, e.g. {_EXAMPLES[label]}"
            )
    return str(exc)


def _field_problem(label: str, value: str) -> str | None:
    """What is wrong with one of the first four fields (None: nothing this check sees)."""
    lo, hi = _RANGES[label]
    for part in value.split(","):
        span, slash, step = part.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            return f"the step {step!r} is not a whole number of at least 1"
        if span == "*":
            continue
        ends = span.split("-", 1)
        numbers = []
        for end in ends:
            text = end.strip().lower()
            if label == "month" and text in _MONTHS:
                numbers.append(_MONTHS.index(text) + 1)
            elif text.isdigit():
                numbers.append(int(text))
            else:
                return f"{end!r} is not a number"
        for number in numbers:
            if not lo <= number <= hi:
                return f"{number} is out of range"
        if len(numbers) == 2 and numbers[1] < numbers[0]:
            return f"the range {span!r} runs backwards"
    return None


def check_fires(expression: str) -> str:
    """Return `expression` when it is a valid cron that fires on some date; ValueError naming it
    when it never can (`0 0 30 2 *`: no 30 February), as a window would never open, or never close."""
    if cron_trigger(expression).get_next_fire_time(None, _EPOCH) is None:
        raise ValueError(
            f"cron expression {expression!r} never fires: no date matches its day-of-month, month "
            "and day-of-week together (such as 30 February or 31 April); check those fields"
        )
    return expression


def hour_is_wildcard(trigger: CronTrigger) -> bool:
    """True when the trigger's hour field is `*` or `*/n` (it fires by elapsed time, not once a day)."""
    hour = next(f for f in trigger.fields if f.name == "hour")
    return all(type(e) is AllExpression for e in hour.expressions)  # subclasses are ranges


def _offset(ts: int, tz) -> object:
    return datetime.fromtimestamp(ts, UTC).astimezone(tz).utcoffset()


def gap_end(fire: datetime) -> float | None:
    """The first real instant after the spring-forward gap that local time `fire` falls in.

    None when `fire` is a real local time (no gap).
    """
    ts = fire.timestamp()
    if datetime.fromtimestamp(ts, UTC).astimezone(fire.tzinfo).replace(tzinfo=None) == fire.replace(
        tzinfo=None
    ):
        return None
    lo = int(
        fire.replace(fold=1).timestamp()
    )  # read at the offset after the change: before the gap
    hi = int(fire.replace(fold=0).timestamp())  # read at the offset before the change: after it
    after = _offset(hi, fire.tzinfo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, fire.tzinfo) == after:
            hi = mid
        else:
            lo = mid
    return float(hi)


def fire_instant(fire: datetime, wildcard_hour: bool) -> float | None:
    """The POSIX instant at which a firing at local wall time `fire` happens, or None if it does not.

    `fire` is a trigger's next fire time (wall-clock fields in its time zone, `fold` set for the
    second pass of a repeated hour). The daylight-saving rules are in the module docstring.
    """
    after_gap = gap_end(fire)
    if after_gap is not None:
        return None if wildcard_hour else after_gap
    ts = fire.timestamp()
    second_pass = fire.fold == 1 and fire.replace(fold=0).timestamp() != ts
    return None if second_pass and not wildcard_hour else ts
