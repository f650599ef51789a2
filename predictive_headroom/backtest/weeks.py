"""How sure the promise is: what `tune`'s rule kept on every week of the history it did not see
(docs/promise.md, "How sure the promise is").

One split of the history into seen and unseen days is one sample: on news-driven traffic the
unseen days can hold a bigger spike than any seen. Here every week of the scored days, counted
back from the end, is the unseen part of one cut, and the rule chooses on the days before it
(at least `MIN_SEEN_DAYS`), as it would have that week. What it chose is judged on that week
alone. The range of the protection kept over those weeks (the weeks where nothing waited without
headroom judge nothing and are left out) is printed beside the single figure of the last unseen
days. Where the range's low end is more than `FAR_BELOW` under the protection asked, no rule
choosing on the past promises it on this history: the fewest fixed placeholders that kept it on
every week, sized on the worst, are what promising it would have cost.

The static curve's runs are summed once at the day edges, so each cut's spans cost no replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

import numpy as np

from predictive_headroom.backtest.against_fixed import Judged, Replays, Span
from predictive_headroom.backtest.frontier import Point, protection
from predictive_headroom.core.series import iso_utc
from predictive_headroom.replay.simulator import Run
from predictive_headroom.replay.tuning import DAY_MINUTES

WEEK_DAYS = 7
"""Days in each unseen part; a history too short for one whole week after `MIN_SEEN_DAYS` is cut
into single days instead."""
MIN_SEEN_DAYS = 3
"""The fewest scored days a cut chooses on (the rule needs days walked forward to judge)."""
FAR_BELOW = 0.05
"""A worst week more than this under the protection asked says no rule promises it here."""


@dataclass(frozen=True)
class Week:
    """One cut: the unseen days from `start` (POSIX seconds), what the rule chose on the days
    before them (`label`) and how it fared on them."""

    start: float
    days: float
    label: str
    judged: Judged

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": iso_utc(self.start),
            "days": round(self.days, 2),
            "chosen": self.label,
            **self.judged.to_dict(),
        }


@dataclass(frozen=True)
class PeakFixed:
    """The fewest fixed placeholders that kept the protection asked on every judged week (sized
    on the worst), and their overhead node-hours a day over all scored days; `replicas` None:
    no N of the static curve did (`kept` is then its largest N's worst week)."""

    replicas: int | None
    per_day: float
    kept: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "overhead_node_hours_per_day": round(self.per_day, 3),
            "worst_week_kept": round(self.kept, 5),
        }


@dataclass(frozen=True)
class UnseenRange:
    """What the rule kept on each unseen week (`weeks`: those where pods waited without
    headroom), `quiet` weeks where none did, and the peak-sized fixed N."""

    asked: float
    weeks: tuple[Week, ...]
    quiet: int
    peak: PeakFixed | None
    unit: str = "week"
    """The unseen part of each cut: a `week`, or a `day` on a history too short for weeks."""

    @property
    def kept(self) -> list[float]:
        return [w.judged.kept for w in self.weeks]

    @property
    def low(self) -> float | None:
        return min(self.kept) if self.weeks else None

    @property
    def high(self) -> float | None:
        return max(self.kept) if self.weeks else None

    @property
    def median(self) -> float | None:
        return median(self.kept) if self.weeks else None

    @property
    def out_of_reach(self) -> bool:
        """The worst week kept more than `FAR_BELOW` under the protection asked."""
        return self.low is not None and self.low < self.asked - FAR_BELOW - 1e-9

    def says(self) -> str:
        """ "on 8 unseen weeks, each chosen on the days before it, it kept 66-100%, median 85%",
        and when the worst is far below the protection asked, that no rule promises it here and
        what the peak-sized fixed N would cost."""
        quiet = (
            f"; {_plural(self.quiet, self.unit)} with nothing waiting left out"
            if self.quiet
            else ""
        )
        if not self.weeks:
            return f"no unseen {self.unit} had pods waiting without headroom to judge it on{quiet}"
        lo, hi, mid = (100 * v for v in (self.low or 0.0, self.high or 0.0, self.median or 0.0))
        span = f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"
        text = (
            f"on {_plural(len(self.weeks), self.unit)} it did not see, each chosen on the days "
            "before it, "
            f"it kept {span}, median {mid:.0f}%{quiet}"
        )
        if not self.out_of_reach:
            return text
        asked = f"{100 * self.asked:g}%"
        text += (
            f"; {asked} is not something this history lets any rule promise: its worst unseen "
            f"{self.unit} kept {lo:.1f}%"
        )
        peak = self.peak
        if peak is None:
            return text
        if peak.replicas is None:
            return text + f" (no fixed N tried kept {asked} on every {self.unit})"
        return text + (
            f"; sized on the peak, {peak.replicas} fixed placeholders kept {asked} on every "
            f"{self.unit} for {peak.per_day:,.1f} overhead node-hours a day"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "unit": self.unit,
            "low": _round(self.low),
            "median": _round(self.median),
            "high": _round(self.high),
            "weeks": [w.to_dict() for w in self.weeks],
            "quiet_weeks": self.quiet,
            "out_of_reach": self.out_of_reach,
            "peak_fixed": None if self.peak is None else self.peak.to_dict(),
            "says": self.says(),
        }


@dataclass(frozen=True)
class DaySums:
    """Reactive's and every static N's unserved pod-minutes and node-hours, summed from the first
    scored minute to each day edge (`edges`: the scored start, each day start, the end)."""

    edges: np.ndarray
    reactive: tuple[np.ndarray, np.ndarray]
    static: dict[int, tuple[np.ndarray, np.ndarray]]

    def span(self, i: int, j: int) -> Span:
        """Edges i..j as the `Span` `backtest.against_fixed.span` makes of the same minutes."""
        u = float(self.reactive[0][j] - self.reactive[0][i])
        nh = float(self.reactive[1][j] - self.reactive[1][i])
        points = tuple(
            Point(float(s_nh[j] - s_nh[i]) - nh, float(s_u[j] - s_u[i]), f"N={n}")
            for n, (s_u, s_nh) in sorted(self.static.items())
        )
        lo, hi = int(self.edges[i]), int(self.edges[j])
        return Span(lo, hi, (hi - lo) / DAY_MINUTES, u, nh, points)


def day_sums(r: Replays) -> DaySums:
    """`DaySums` of `r`: each static run simulated once, summed at the day edges, let go."""
    res = r.result
    edges = np.array(sorted({res.scored_from, *r.replayed.starts, res.pods.size}))

    def at_edges(run: Run) -> tuple[np.ndarray, np.ndarray]:
        u = np.concatenate([[0.0], np.cumsum(run.unserved, dtype=np.float64)])
        ready = np.concatenate([[0.0], np.cumsum(run.ready, dtype=np.float64)]) / 60.0
        return u[edges] - u[edges[0]], ready[edges] - ready[edges[0]]

    runs = r.replayed.static_runs
    static = {n: at_edges(runs[n]) for n in sorted(runs)}
    return DaySums(edges, at_edges(res.strategies["reactive"].run), static)


def cuts(sums: DaySums) -> tuple[list[tuple[int, int]], str]:
    """The unseen parts as edge index pairs (first, stop), oldest first, and their unit: whole
    weeks counted back from the end, each after at least `MIN_SEEN_DAYS` scored days, or single
    days when no whole week fits; none when not even a day does."""
    last = len(sums.edges) - 1
    length, unit = (WEEK_DAYS, "week") if last - WEEK_DAYS >= MIN_SEEN_DAYS else (1, "day")
    out = []
    stop = last
    while stop - length >= MIN_SEEN_DAYS:
        out.append((stop - length, stop))
        stop -= length
    return out[::-1], unit


def unseen_weeks(
    r: Replays, asked: float, choose: Callable[[Span], tuple[str, Run]]
) -> UnseenRange | None:
    """What `choose` (the rule: a label and the run of what it holds, from the days a span
    covers) kept on each unseen week of `r`, chosen on the days before it (see the module
    docstring). None when the history has not a day after `MIN_SEEN_DAYS`."""
    sums = day_sums(r)
    pairs, unit = cuts(sums)
    if not pairs:
        return None
    weeks, quiet = [], 0
    for first, stop in pairs:
        label, run = choose(sums.span(0, first))
        unseen = sums.span(first, stop)
        if unseen.reactive_unserved <= 0:
            quiet += 1
            continue
        start = float(r.result.times[min(unseen.lo, r.result.pods.size - 1)])
        weeks.append(Week(start, unseen.days, label, unseen.judge(run)))
    return UnseenRange(asked, tuple(weeks), quiet, _peak(sums, pairs, asked), unit)


def _peak(sums: DaySums, pairs: Sequence[tuple[int, int]], asked: float) -> PeakFixed | None:
    """The fewest static N keeping `asked` on every week where pods waited, priced a day over all
    scored days (see `PeakFixed`)."""
    ru, rnh = sums.reactive
    judged = [(a, b) for a, b in pairs if ru[b] - ru[a] > 0]
    if not judged or not sums.static:
        return None
    last = len(sums.edges) - 1
    days = (int(sums.edges[last]) - int(sums.edges[0])) / DAY_MINUTES
    worst = 0.0
    for n, (su, snh) in sorted(sums.static.items()):
        worst = min(protection(su[b] - su[a], ru[b] - ru[a]) for a, b in judged)
        per_day = float((snh[last] - rnh[last]) / max(days, 1e-9))
        if worst >= asked - 1e-9:
            return PeakFixed(n, per_day, worst)
    return PeakFixed(None, per_day, worst)


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 5)
