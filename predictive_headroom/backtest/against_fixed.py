"""Against the fixed pause pods users run today (docs/promise.md, "Against fixed headroom").

Every fixed number N of placeholders is one point of the static curve. `current` replays the
user's N on the backtest's app pods and simulated cluster (the same `replay.simulator` run the
static curve is made of) beside the promise replayed walk-forward at `FRONTIER_LEVELS` and the
level asked (the product's own cost/protection curve), and reads that curve at the N's cost and at
its protection.

`recommend_choice` is `tune`'s decision rule: the scored days are split in two; on the first part
(seen) it picks the highest protection level up to the one asked that the promise kept walk-forward,
and keeps it only when it cost no more than static headroom at the protection it kept there;
otherwise (no level kept, or the forecast did not pay) it recommends a fixed N: the fewest
placeholders that reached the asked protection on the seen part, as a user sizes a fixed
Deployment from the past. Whichever it picks is then judged on the second part (unseen).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from predictive_headroom.backtest.promise_measure import Replayed, prepare, promise_walk
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.core.curve import Point, cost_at, protection, protection_at
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import iso_utc
from predictive_headroom.core.verdict import Verdict, verdict
from predictive_headroom.replay.promise import WalkForward
from predictive_headroom.replay.promise_price import FRONTIER_LEVELS
from predictive_headroom.replay.simulator import Run, simulate
from predictive_headroom.replay.tuning import DAY_MINUTES

MAX_CURRENT = 100_000
"""The largest `--current` accepted (a placeholder Deployment of more is a typo)."""


class Recommended(StrEnum):
    """What `tune` pastes."""

    PROTECTION = "protection"
    """`protection: P`: the daemon re-tunes its forecast setting and reserve to keep P."""
    FIXED = "fixed"
    """`minReplicas: N` with the forecast off: fixed headroom did better on this history."""


@dataclass(frozen=True)
class Judged:
    """A strategy scored on some days: the protection it kept, its overhead node-hours a day over
    no headroom, and static headroom's cost a day at that protection on the same days (None: no
    fixed N reached it)."""

    kept: float
    per_day: float
    static_per_day: float | None

    @property
    def static_ratio(self) -> float | None:
        """Static headroom's cost at the protection kept over this one's (above 1: cheaper than
        any fixed N)."""
        if self.static_per_day is None:
            return None
        return self.static_per_day / self.per_day if self.per_day > 0 else None

    @property
    def over_static(self) -> float | None:
        """This cost over static headroom's at the protection kept (1.10: 10% above the curve)."""
        if self.static_per_day is None or self.static_per_day <= 0:
            return None
        return self.per_day / self.static_per_day

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": round(self.kept, 5),
            "overhead_node_hours_per_day": round(self.per_day, 3),
            "static_node_hours_per_day": None
            if self.static_per_day is None
            else round(self.static_per_day, 3),
            "static_ratio": _round(self.static_ratio),
        }


@dataclass(frozen=True)
class Span:
    """Minutes [lo, hi) of a backtest scored together, with reactive's totals and the static
    curve's points on them."""

    lo: int
    hi: int
    days: float
    reactive_unserved: float
    reactive_node_hours: float
    static: tuple[Point, ...]

    def judge(self, run: Run) -> Judged:
        """`run` scored on this span."""
        unserved, node_hours = _totals(run, self.lo, self.hi)
        kept = protection(unserved, self.reactive_unserved)
        overhead = node_hours - self.reactive_node_hours
        static = cost_at(self.static, self.reactive_unserved, kept).cost
        days = max(self.days, 1e-9)
        return Judged(kept, overhead / days, None if static is None else static / days)

    def point(self, run: Run, label: str) -> Point:
        """`run` as a point of a cost/protection curve on this span."""
        unserved, node_hours = _totals(run, self.lo, self.hi)
        return Point(node_hours - self.reactive_node_hours, unserved, label)


def _totals(run: Run, lo: int, hi: int) -> tuple[float, float]:
    return float(run.unserved[lo:hi].sum()), float(run.ready[lo:hi].sum()) / 60.0


def span(result: BacktestResult, replayed: Replayed, lo: int, hi: int) -> Span:
    """The span [lo, hi) of `result` (static runs from `replayed`)."""
    reactive = result.strategies["reactive"].run
    u, nh = _totals(reactive, lo, hi)
    probe = Span(lo, hi, (hi - lo) / DAY_MINUTES, u, nh, ())
    runs = replayed.static_runs
    static = tuple(probe.point(runs[n], f"N={n}") for n in sorted(runs))
    return Span(lo, hi, probe.days, u, nh, static)


@dataclass(frozen=True)
class Replays:
    """What the comparisons read: the backtest, its candidates, the promise walked forward at each
    level, and the whole scored span."""

    result: BacktestResult
    replayed: Replayed
    walks: dict[float, WalkForward]
    whole: Span


def replays(result: BacktestResult, levels: tuple[float, ...] = ()) -> Replays:
    """The promise walked forward at `FRONTIER_LEVELS` and `levels` on `result` (which needs its
    grid: a backtest with `--protection`, or `tune`'s)."""
    asked = tuple(sorted({*FRONTIER_LEVELS, *levels}))
    made = result.replayed
    replayed = (
        made if made is not None and set(made.tails) == set(asked) else prepare(result, asked)
    )
    walks = {p: promise_walk(result, replayed, p) for p in asked}
    whole = span(result, replayed, result.scored_from, result.pods.size)
    return Replays(result, replayed, walks, whole)


@dataclass(frozen=True)
class CurrentReplay:
    """The user's fixed N replayed beside the product (the whole scored span)."""

    replicas: int
    theirs: Judged
    ours_kept_same_cost: float
    """What the promise's curve kept for the N's cost."""
    ours_cost_same_kept: float | None
    """What the promise's curve cost a day at the N's protection (None: it never kept it)."""

    def verdict(self) -> Verdict:
        """The one verdict (`core.verdict`) on the whole scored span: the promise's curve at the
        protection the N kept against the N's cost."""
        return verdict(
            self.theirs.kept,
            self.ours_cost_same_kept,
            self.theirs.per_day,
            fixed_replicas=self.replicas,
            yours=True,
            over="on this history",
        )

    @property
    def theirs_better(self) -> bool:
        """The fixed N was cheaper at its protection than the product (or the product never
        kept it)."""
        return not self.verdict().forecast_better

    def sentence(self, price: Price | None = None) -> str:
        """The answer in the user's words (see the module docstring)."""
        n, t = self.replicas, self.theirs
        head = (
            f"your {n} fixed placeholder{'s' if n != 1 else ''} kept {100 * t.kept:.1f}% for "
            f"{t.per_day:,.1f} overhead node-hours a day{_money(t.per_day, price)}"
        )
        ours = self.ours_cost_same_kept
        at_kept = (
            "never kept that protection"
            if ours is None
            else f"at the same protection cost {ours:,.1f}{_money(ours, price)}"
        )
        body = (
            f"predictive headroom at the same cost kept {100 * self.ours_kept_same_cost:.1f}%, "
            + at_kept
        )
        judged = self.verdict()
        if not judged.forecast_better:
            said = head.removeprefix(f"your {n} fixed placeholder{'s' if n != 1 else ''} ")
            return f"{judged.says()}: it {said}; {body}"
        return f"{head}; {body}"

    def to_dict(self, price: Price | None = None) -> dict[str, Any]:
        ours = self.ours_cost_same_kept
        return {
            "replicas": self.replicas,
            "kept": round(self.theirs.kept, 5),
            "overhead_node_hours_per_day": round(self.theirs.per_day, 3),
            "money_per_day": _money_value(self.theirs.per_day, price),
            "ours_kept_same_cost": round(self.ours_kept_same_cost, 5),
            "ours_node_hours_per_day_same_protection": _round(ours),
            "ours_money_per_day_same_protection": None
            if ours is None
            else _money_value(ours, price),
            "theirs_better": self.theirs_better,
            "verdict": self.verdict().to_dict(),
            "says": self.sentence(price),
        }


def current(r: Replays, replicas: int) -> CurrentReplay:
    """`replicas` fixed placeholders replayed on `r`'s app pods and cluster, read against the
    promise's curve (its levels walked forward) on the whole scored span."""
    res, whole = r.result, r.whole
    run = r.replayed.static_runs.get(replicas) or simulate(
        res.pods, np.full(res.pods.size, replicas, dtype=np.int64), res.cluster
    )
    theirs = whole.judge(run)
    ours = [whole.point(w.run, f"promise {p:g}") for p, w in sorted(r.walks.items())]
    kept_same_cost = protection_at(ours, whole.reactive_unserved, theirs.per_day * whole.days)
    same_kept = cost_at(ours, whole.reactive_unserved, theirs.kept).cost
    return CurrentReplay(
        replicas, theirs, kept_same_cost, None if same_kept is None else same_kept / whole.days
    )


def _money(node_hours: float, price: Price | None) -> str:
    value = None if price is None else price.money(node_hours)
    return "" if value is None or price is None else f" ({value:,.2f} {price.currency})"


def _money_value(node_hours: float, price: Price | None) -> float | None:
    value = None if price is None else price.money(node_hours)
    return None if value is None else round(value, 2)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


__all__ = [
    "MAX_CURRENT",
    "CurrentReplay",
    "Judged",
    "Recommended",
    "Replays",
    "current",
    "iso_utc",
    "protection_at",
    "replays",
]
