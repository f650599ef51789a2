"""Shares as users write them (`95%` or `0.95`): protection, burst quantiles, size's fraction."""

from __future__ import annotations

import math
from typing import Any


def parse_share(value: Any, *, what: str = "a share") -> float:
    """The share `value` names, as a fraction: `95%` and `0.95` both give 0.95.

    A bare number above 1 and at most 100 is refused with the suggestion `<number>%` (`95` is
    95%, never 95 times); a ValueError also for text that is not a number. The caller checks the
    range its field allows."""
    if isinstance(value, bool):
        raise ValueError(f"expected {what} such as 95% or 0.95, got {value!r}")
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        number = float(text.removesuffix("%").strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number; write {what} like 95% or 0.95") from None
    if not math.isfinite(number):
        raise ValueError(f"{text!r} is not a finite number; write {what} like 95% or 0.95")
    if percent:
        return number / 100
    if 1 < number <= 100:
        raise ValueError(f"{number:g} is not {what}: did you mean {number:g}%? (write 95% or 0.95)")
    return number


def parse_quantiles(text: str) -> tuple[float, ...]:
    """Parse `0.8,0.9,0.95` (or `80%,90%`) into sorted unique quantiles; ValueError says which
    item is wrong."""
    values = []
    for item in text.split(","):
        q = parse_share(item, what="a quantile")
        if not 0 < q < 1:
            raise ValueError(f"quantile {item.strip()} must be between 0 and 1 (exclusive)")
        values.append(q)
    return tuple(sorted(set(values)))


def parse_protection(text: str) -> float:
    """Parse `95%` or `0.95` into a share in (0, 1]; ValueError says what is wrong (`95`: did
    you mean 95%?)."""
    item = text.strip()
    value = parse_share(item, what="a protection")
    if not 0 < value <= 1:
        raise ValueError(f"protection {item} must be above 0% and at most 100%")
    return value


def parse_protections(text: str) -> tuple[float, ...]:
    """Parse `90%,95%` into sorted unique shares."""
    return tuple(sorted({parse_protection(item) for item in text.split(",")}))
