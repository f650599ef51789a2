"""IANA time zone names: the check the policy applies and the list the chart's schema enumerates.

The names come from `zones.txt` (written from the `tzdata` package by `make schema`), so the
policy, `validate` and the chart's schema accept the same zones whichever tzdata release is
installed; a zone must also load with `zoneinfo` to be accepted.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.resources import files
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@cache
def zone_names() -> list[str]:
    """The IANA zone names a window's `timezone` may use, sorted."""
    text = files(__package__).joinpath("zones.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def tzdata_zone_names() -> list[str]:
    """The zone names of the installed `tzdata` package (what `make schema` writes to zones.txt)."""
    text = files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return sorted({line.strip() for line in text.splitlines() if line.strip()} | {"UTC"})


def check_zone(value: str) -> str:
    """Return `value` when it names a time zone; raise ValueError with the closest name."""
    known = value in set(zone_names())
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        known = False
    if not known:
        close = difflib.get_close_matches(value, zone_names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (e.g. 'Europe/Berlin')"
        raise ValueError(f"unknown IANA time zone {value!r}{hint}")
    return value


if __name__ == "__main__":
    print("\n".join(tzdata_zone_names()))
