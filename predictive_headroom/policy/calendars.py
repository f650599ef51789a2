"""Public-holiday calendars for windows with `skipHolidays`, from the `holidays` package (the one
the forecast's holiday effects use): a country code such as `DE`, or a subdivision such as `DE-BY`."""

from __future__ import annotations

from datetime import date
from functools import cache, lru_cache

import holidays
from holidays.registry import EntityLoader

CALENDAR_PATTERN = r"^[A-Z]{2}(-[A-Z0-9]{1,3})?$"
"""What a JSON schema can check of a calendar code: `DE` or `DE-BY`."""


@cache
def country_codes() -> frozenset[str]:
    """The country codes the `holidays` package has a calendar for (with its aliases, as
    `holidays.list_supported_countries()` gives them), read from its registry: that function
    imports every one of its ~280 country modules to list their subdivisions too, a fifth of a
    second (and more from a cold disk) that `validate` need not spend."""
    return frozenset(EntityLoader.get_country_codes())


def check_calendar(code: str) -> str:
    """Return `code` when the `holidays` package has its calendar; ValueError saying which codes
    exist (the subdivisions of the country, when the country is known) when not."""
    country, _, subdiv = code.partition("-")
    if country not in country_codes():
        raise ValueError(
            f"no holiday calendar for {code!r}; use an ISO 3166 country code such as DE, US or GB, "
            "optionally with a subdivision such as DE-BY"
        )
    if subdiv:
        known = holidays.country_holidays(country).subdivisions
        if subdiv not in known:
            raise ValueError(
                f"{country} has no subdivision {subdiv!r}; use one of "
                f"{', '.join(f'{country}-{s}' for s in known)}, or {country} for national holidays"
            )
    return code


@lru_cache(maxsize=64)
def _calendar(code: str) -> holidays.HolidayBase:
    country, _, subdiv = code.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None)


def holiday_name(code: str, day: date) -> str | None:
    """The name of the public holiday on `day` in calendar `code` (`DE`, `DE-BY`), or None."""
    return _calendar(code).get(day)
