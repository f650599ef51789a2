"""Durations as users write them in config and on the command line (`90s`, `10m`, `6h`, `28d`)."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, PlainValidator, WithJsonSchema
from pytimeparse2 import parse as _parse_timespan

UNIT_PATTERN = r"^\s*[0-9.]+\s*[A-Za-z]"
"""What Helm's schema check can say of a duration: a number followed by a unit."""
_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)\s*$")
EXAMPLES = "90s, 10m, 6h or 28d"
BARE_NUMBER_HINT = {
    "if": {"type": "number", "not": {"const": 0}},
    "then": {
        "const": "a bare number is not a duration: add its unit, e.g. 5m (minutes), 90s, 6h or 28d",
    },
}
"""Schema keywords that make Helm's own check say why a bare number fails: JSON schema has no
error messages, but Helm prints the value a `const` wants, so the advice is that value."""


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """Return the duration `text` names, which must carry a unit (`90s`, `10m`, `6h`, `28d`).

    A bare number other than 0 is refused, since `4` could mean 4 minutes as easily as 4
    seconds: the ValueError suggests both. Raises ValueError too when unreadable or negative."""
    if isinstance(text, timedelta):
        seconds = text.total_seconds()
    elif isinstance(text, bool):
        raise ValueError(f"expected a duration such as {EXAMPLES}, got {text!r}")
    elif isinstance(text, (int, float)) or _NUMBER.match(str(text)):
        seconds = float(text)
        if math.isfinite(seconds) and seconds > 0:
            raise ValueError(_no_unit(seconds))
    else:
        parsed = _parse_timespan(str(text).strip())
        if parsed is None:
            raise ValueError(f"expected a duration such as {EXAMPLES}, got {text!r}")
        seconds = float(parsed.total_seconds() if isinstance(parsed, timedelta) else parsed)
    if not math.isfinite(seconds):
        raise ValueError(f"a duration must be finite, got {text!r}; write it like {EXAMPLES}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {text!r}")
    return timedelta(seconds=seconds)


def _no_unit(number: float) -> str:
    shown = f"{number:g}"
    return f"{shown} has no unit: did you mean {shown}m or {shown}s? (durations are written {EXAMPLES})"


def format_duration(value: timedelta) -> str:
    """Return the shortest of `28d`, `6h`, `10m`, `90s` that states `value` exactly."""
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _validate(value: Any) -> timedelta:
    return parse_duration(value)


Duration = Annotated[
    timedelta,
    BeforeValidator(_validate),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string", "pattern": UNIT_PATTERN}, {"const": 0}],
            **BARE_NUMBER_HINT,
            "description": "a duration with its unit, such as 90s, 10m, 6h or 28d",
        }
    ),
]
"""A pydantic field type that accepts `90s`, `10m`, `6h`, `28d` (a unit is required) and holds a timedelta."""


class AutoLeadTime(timedelta):
    """`leadTime: auto`: the daemon measures the pool's lead time (node boot plus placeholder
    start, `daemon.closedloop`); this value (the default lead time) is used until it has."""

    auto = True


AUTO = "auto"
DEFAULT_LEAD_TIME = timedelta(minutes=5)


def _lead_time(value: Any) -> timedelta:
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AutoLeadTime(seconds=DEFAULT_LEAD_TIME.total_seconds())
    if isinstance(value, AutoLeadTime):
        return value
    try:
        return parse_duration(value)
    except ValueError as exc:
        if str(exc).startswith("expected"):
            raise ValueError(f"{exc}, or auto (measured in the cluster)") from None
        raise


def _format_lead_time(value: timedelta) -> str:
    return AUTO if isinstance(value, AutoLeadTime) else format_duration(value)


LeadTime = Annotated[
    timedelta,
    PlainValidator(_lead_time),
    PlainSerializer(_format_lead_time, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": UNIT_PATTERN},
                {"const": 0},
                {"const": AUTO},
            ],
            **BARE_NUMBER_HINT,
            "description": "a duration such as 90s or 5m, or auto (measured from the pool's node "
            "boots and placeholder starts; 5m until 5 boots were seen)",
        }
    ),
]
"""A pool's `leadTime`: a Duration, or `auto`, held as an `AutoLeadTime` of the default 5 minutes."""


def parse_windows(text: str) -> tuple[float, ...]:
    """Parse `5m,15m,30m` into sorted unique windows in seconds; ValueError says which item is wrong."""
    values = []
    for item in text.split(","):
        try:
            values.append(parse_duration(item.strip()).total_seconds())
        except ValueError as exc:
            raise ValueError(
                f"{item.strip()!r} is not a duration: {exc}; give windows like 5m,15m,30m"
            ) from None
    return tuple(sorted(set(values)))
