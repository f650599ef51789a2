"""The shadow of the live N in dry-run: the user's own placeholder count, as the daemon read it
on the target over time, replayed on the re-tune's simulated cluster beside what the daemon
would have held, over the same judged days (docs/promise.md, "Your N beside the plan").

A user who runs a fixed N of pause pods turns on the daemon in dry-run and reads, at each refit:
"your 20 kept 84.2% for 60.3 overhead node-hours a day; the plan would have kept 95.1% for
41.0". The N is the one the user set, whenever they changed it (`live_placeholders`: each count
read from its instant on); before the daemon's first read it is taken as that first count, and
the sentence says from when the N was read. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from predictive_headroom.core.series import iso_utc
from predictive_headroom.replay.promise import Ledger


def live_placeholders(times: np.ndarray, reads: Sequence[tuple[float, int]]) -> np.ndarray:
    """The user's placeholder count at each instant of `times` (POSIX seconds, ascending): the
    last count read at or before it (`reads`: (instant, replicas), ascending), the first one
    before any read. Raises ValueError for no reads."""
    if not reads:
        raise ValueError("no live replica count was read: nothing to replay")
    at = np.array([t for t, _ in reads], dtype=float)
    counts = np.array([n for _, n in reads], dtype=np.int64)
    index = np.searchsorted(at, np.asarray(times, dtype=float), side="right") - 1
    return counts[np.maximum(index, 0)]


@dataclass(frozen=True)
class Side:
    """What one side kept over the judged days (None: nothing waited) and its overhead
    node-hours a day over no headroom."""

    kept: float | None
    per_day: float

    def says(self) -> str:
        kept = "nothing waited" if self.kept is None else f"{100 * self.kept:.1f}%"
        return f"{kept} for {self.per_day:,.1f}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": None if self.kept is None else round(self.kept, 4),
            "overhead_node_hours_per_day": round(self.per_day, 3),
        }


def side_of(book: Ledger, index: int, first: int, stop: int) -> Side:
    """Candidate `index` of `book` over periods [first, stop)."""
    r = float(book.reactive[first:stop].sum())
    u = float(book.unserved[index, first:stop].sum())
    cost = float(
        book.node_hours[index, first:stop].sum() - book.reactive_node_hours[first:stop].sum()
    )
    return Side(None if r <= 0 else 1.0 - u / r, cost / max(1, stop - first))


@dataclass(frozen=True)
class Shadow:
    """The user's live N beside the plan over the same `days` judged days of the re-tune."""

    yours: Side
    plan: Side
    days: int
    replicas: tuple[int, ...]
    """The counts read, in order of change (the last one is in force now)."""
    read_since: float
    """When the daemon first read the count (before it, the first count is assumed)."""
    replayed_from: float
    """The start of the replayed days: when `read_since` is later, the N before it is assumed."""
    plan_holds: str
    """What the plan holds now, in words (`Tuning.holding`)."""

    def says(self) -> str:
        """ "your 20 kept 84.2% for 60.3 overhead node-hours a day over the last 7 days; the plan
        would have kept 95.1% for 41.0 (holding ...)", with when the N was read."""
        n = self.replicas
        yours = f"your {n[0]}" if len(n) == 1 else f"your N ({', then '.join(map(str, n))})"
        text = (
            f"{yours} kept {self.yours.says()} overhead node-hours a day over the last "
            f"{self.days} day{'' if self.days == 1 else 's'} judged; the plan would have kept {self.plan.says()} "
            f"(holding {self.plan_holds})"
        )
        if self.read_since > self.replayed_from:
            text += f"; your N as read since {iso_utc(self.read_since)}, taken as {n[0]} before"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "yours": self.yours.to_dict(),
            "plan": self.plan.to_dict(),
            "days_judged": self.days,
            "replicas": list(self.replicas),
            "read_since": iso_utc(self.read_since),
            "says": self.says(),
        }


def changes(reads: Sequence[tuple[float, int]]) -> tuple[int, ...]:
    """The counts of `reads` in order, each change once (20, 25, 20)."""
    out: list[int] = []
    for _, n in reads:
        if not out or out[-1] != n:
            out.append(n)
    return tuple(out)
