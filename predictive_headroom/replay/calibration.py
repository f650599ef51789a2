"""A calibrated working level for the promise: adaptive conformal inference over the inner rule
(issue 40; docs/promise.md, "A calibrated level").

The inner rule of `replay.promise` holds the cheapest candidate whose waiting over the window
before it stays within (1 - level) of what would wait without headroom. Today's rule learns a
strictness from the last week; this one aims at a working level P_t moved after each day by the
miss of that day, as in adaptive conformal inference (Gibbs & Candès 2021):

    P_{t+1} = clip(P_t + gamma * w_t * (P - kept_t), P - DROP, 1)

where kept_t is the protection the held candidate kept on day t and w_t that day's waiting
pod-minutes without headroom over a typical day's (days with nothing waiting move nothing: a
day's weight is its share of the evidence). Summed over days the updates bound the weighted
miss: the long-run protection kept tends to P for any sequence of days, with an error that
shrinks as 1 / (gamma x days) (their Proposition 4.1, with the clip's range as the bound).

Pure: no I/O; the level is the only state carried from one day to the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from predictive_headroom.replay.promise import (
    WINDOW,
    Candidate,
    Ledger,
    WalkForward,
    inner_choices,
    placeholders_of,
    reserve_sizes,
    spliced_walk,
)
from predictive_headroom.replay.tuning import DAY_MINUTES, Setting, Walk

GAMMA = 0.05
"""The step: how far one typical day's miss of one point moves the level, in points."""
DROP = 0.3
"""How far below the target the level may go (where the forecast alone over-protects)."""


@dataclass(frozen=True)
class Level:
    """The working level and the target it serves."""

    target: float
    value: float

    @classmethod
    def start(cls, target: float) -> Level:
        return cls(target, target)

    def after(self, kept: float | None, waited: float, typical: float, gamma: float) -> Level:
        """The level after a day that kept `kept` with `waited` pod-minutes waiting without
        headroom (`typical` on a usual day); unchanged when nothing waited."""
        if kept is None or waited <= 0 or typical <= 0:
            return self
        moved = self.value + gamma * (waited / typical) * (self.target - kept)
        return Level(self.target, float(np.clip(moved, max(0.0, self.target - DROP), 1.0)))


def pick_at(book: Ledger, level: float, window: int = WINDOW) -> int:
    """The candidate index the inner rule holds after the last period of `book` when it aims at
    `level` (strictness 1), -1 when no period was replayed."""
    return int(inner_choices(book, min(level, 1.0), 1.0, window)[book.periods])


def typical_day(book: Ledger, last: int, window: int = WINDOW) -> float:
    """The mean waiting pod-minutes without headroom of the days with any, among the `window`
    days ending with period `last`."""
    days = book.reactive[max(0, last - window + 1) : last + 1]
    days = days[days > 0]
    return float(days.mean()) if days.size else 0.0


def calibrated_walk_forward(
    book: Ledger,
    base: Mapping[Setting, np.ndarray],
    walk: Walk,
    target: float,
    default: Candidate,
    gamma: float = GAMMA,
) -> tuple[WalkForward, list[float]]:
    """The calibrated rule replayed day by day on `walk` (as `promise.walk_forward` replays
    today's): day k's level is moved by day k - 1's miss, read from the ledger, and the inner
    rule aims at it. Returns the walk and the level held each day."""
    pods, cap = walk.pods, walk.max_replicas
    spliced = placeholders_of(default, base, pods.size, cap).copy()
    level, held = Level.start(target), default
    levels: list[float] = []
    span = 14 * DAY_MINUTES
    for k, b in enumerate(walk.period_starts):
        if k:
            known = book.cut(0, k)
            last = k - 1
            if held in known.candidates:
                i = known.candidates.index(held)
                r = float(known.reactive[last])
                kept = None if r <= 0 else 1.0 - float(known.unserved[i, last]) / r
                level = level.after(kept, r, typical_day(known, last), gamma)
            largest = max(reserve_sizes(pods[max(0, b - span) : b]))
            sub = known.upto(largest)
            i = pick_at(sub, level.value)
            held = default if i < 0 else sub.candidates[i]
        levels.append(level.value)
        stop = walk.stop(k)
        spliced[b:stop] = placeholders_of(held, base, pods.size, cap)[b:stop]
    return spliced_walk(walk, target, [], spliced), levels
