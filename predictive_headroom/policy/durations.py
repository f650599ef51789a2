"""Durations as users write them in config and on the command line (`90s`, `10m`, `6h`, `28d`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, PlainValidator, WithJsonSchema
from pytimeparse2 import parse as _parse_timespan


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """Return the duration `text` names; numbers are seconds. Raises ValueError when unreadable or negative."""
    if isinstance(text, timedelta):
        seconds = text.total_seconds()
    elif isinstance(text, bool):
        raise ValueError(f"expected a duration such as 90s, 10m, 6h or 28d, got {text!r}")
    elif isinstance(text, (int, float)):
        seconds = float(text)
    else:
        parsed = _parse_timespan(str(text).strip())
        if parsed is None:
            raise ValueError(f"expected a duration such as 90s, 10m, 6h or 28d, got {text!r}")
        seconds = float(parsed.total_seconds() if isinstance(parsed, timedelta) else parsed)
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {text!r}")
    return timedelta(seconds=seconds)


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
            "type": ["string", "number"],
            "pattern": r"^\s*[0-9.]",
            "minimum": 0,
            "description": "a duration such as 90s, 10m, 6h or 28d (a number: seconds)",
        }
    ),
]
"""A pydantic field type that accepts `90s`, `10m`, `6h`, `28d` (or seconds) and holds a timedelta."""


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
        raise ValueError(f"{exc}, or auto (measured in the cluster)") from None


def _format_lead_time(value: timedelta) -> str:
    return AUTO if isinstance(value, AutoLeadTime) else format_duration(value)


LeadTime = Annotated[
    timedelta,
    PlainValidator(_lead_time),
    PlainSerializer(_format_lead_time, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": ["string", "number"],
                    "pattern": r"^\s*[0-9.]",
                    "minimum": 0,
                },
                {"const": AUTO},
            ],
            "description": "a duration such as 90s or 5m, or auto (measured from the pool's node "
            "boots and placeholder starts; 5m until 5 boots were seen)",
        }
    ),
]
"""A pool's `leadTime`: a Duration, or `auto`, held as an `AutoLeadTime` of the default 5 minutes."""
