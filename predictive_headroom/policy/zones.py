"""IANA time zone names: the check the policy applies and the list the chart's schema enumerates."""

from __future__ import annotations

import difflib
from functools import cache
from importlib.resources import files
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@cache
def zone_names() -> list[str]:
    """The zone names of the `tzdata` package (a dependency), so the chart's schema lists the
    same zones wherever it is generated."""
    text = files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return sorted({line.strip() for line in text.splitlines() if line.strip()} | {"UTC"})


def check_zone(value: str) -> str:
    """Return `value` when it names a time zone; raise ValueError with the closest name."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(value, zone_names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (e.g. 'Europe/Berlin')"
        raise ValueError(f"unknown IANA time zone {value!r}{hint}") from None
    return value
