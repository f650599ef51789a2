"""The real cause of a protection shortfall, in one function for `tune`, the backtest, the report
and `/last-run` (docs/promise.md, "Why it fell short").

Three causes, checked in this order:

- the warm-up: the history is too short to re-tune, so `protection:` holds the untuned defaults
  until the date the re-tune starts;
- the cap: `maxReplicas` held the plan on days pods waited, and more placeholders than it allows
  kept the protection in the replay ("raise it to N");
- no setting: on some days nothing the history showed had kept the protection at any price.

Pure: the callers count the days from their own replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from predictive_headroom.core.series import iso_utc


class Cause(StrEnum):
    """Why a pool kept less protection than asked."""

    WARMUP = "warm-up"
    CAP = "cap"
    NO_SETTING = "no-setting"


@dataclass(frozen=True)
class Shortfall:
    """A shortfall and its cause, with what the sentence needs."""

    cause: Cause
    asked: float
    short_days: int
    of_days: int
    capped_days: int = 0
    max_replicas: int | None = None
    raise_to: int | None = None
    """The fixed N that kept `asked` in the replay (above `max_replicas`), for the cap."""
    kept_raised: float | None = None
    retunes_from: float | None = None
    cap_name: str = "maxReplicas"
    """The cap `max_replicas` is: maxReplicas, or `limits` where they allow fewer."""

    def says(self) -> str:
        """The cause in words, with what to do about it."""
        asked = f"{100 * self.asked:g}%"
        if self.cause == Cause.WARMUP:
            until = "" if self.retunes_from is None else f" until {iso_utc(self.retunes_from)}"
            return (
                f"the history is too short to re-tune: protection: {asked} holds the untuned "
                f"defaults{until}, when the re-tune starts"
            )
        if self.cause == Cause.CAP:
            kept = "" if self.kept_raised is None else f" kept {100 * self.kept_raised:.1f}%"
            return (
                f"{self.cap_name} {self.max_replicas} held the plan on {self.capped_days} of "
                f"{self.of_days} days: raise it to {self.raise_to} ({self.raise_to} fixed "
                f"placeholders{kept} in this replay)"
            )
        return (
            f"on {self.short_days} of {self.of_days} days nothing the history showed had kept "
            f"{asked} at any price, so it held the most protective setting and reserve reached"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": str(self.cause),
            "short_days": self.short_days,
            "of_days": self.of_days,
            "capped_days": self.capped_days,
            "max_replicas": self.max_replicas,
            "raise_to": self.raise_to,
            "kept_raised": None if self.kept_raised is None else round(self.kept_raised, 5),
            "retunes_from": None if self.retunes_from is None else iso_utc(self.retunes_from),
            "says": self.says(),
        } | ({} if self.cap_name == "maxReplicas" else {"cap_name": self.cap_name})


def reserve_words(reserve: int, max_replicas: int | None, cap_name: str = "maxReplicas") -> str:
    """`a reserve of 3 placeholders`; a reserve above `max_replicas` as the cap holds it, in the
    cap cause's words: `a reserve capped at 60 placeholders (the promise would need 4,451;
    maxReplicas 60 held it at 60)`."""
    if max_replicas is not None and reserve > max_replicas:
        return (
            f"a reserve capped at {max_replicas:,} placeholders (the promise would need "
            f"{reserve:,}; {cap_name} {max_replicas} held it at {max_replicas})"
        )
    return f"a reserve of {reserve:,} placeholder{'' if reserve == 1 else 's'}"


def shortfall_cause(
    asked: float,
    *,
    short_days: int = 0,
    of_days: int = 0,
    capped_days: int = 0,
    max_replicas: int | None = None,
    fixed: tuple[int, float] | None = None,
    retunes_from: float | None = None,
    cap_name: str = "maxReplicas",
) -> Shortfall:
    """The cause of keeping less than `asked` (see the module docstring): `retunes_from` set is
    the warm-up; `capped_days` > 0 with `fixed` = (N, kept), the fewest fixed placeholders that
    kept `asked` in the replay, above `max_replicas`, is the cap; else no setting."""
    if retunes_from is not None:
        return Shortfall(Cause.WARMUP, asked, short_days, of_days, retunes_from=retunes_from)
    if capped_days and fixed is not None and max_replicas is not None and fixed[0] > max_replicas:
        return Shortfall(
            Cause.CAP,
            asked,
            short_days,
            of_days,
            capped_days,
            max_replicas,
            fixed[0],
            fixed[1],
            cap_name=cap_name,
        )
    return Shortfall(
        Cause.NO_SETTING, asked, short_days, of_days, capped_days, max_replicas, cap_name=cap_name
    )
