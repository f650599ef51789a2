"""The daemon walked forward (`backtest --protection P`, JSON key `daemon`; issue 62, items 1
and 6): on each replayed day, what the daemon holds after that day's refit, chosen on the days
before it only, spliced into one run and scored.

The daemon's refit makes `tune`'s choice (`backtest.pasted.tune_choice`, the call `tune` and the
daemon's refit make) on the history known at the day's start, and holds it for the day:

- `protection: L`: the promise walked forward at L (`backtest.promise_measure.promise_walk`: the
  re-tune's rule at L, each day's setting and reserve chosen on the days before it);
- fixed N: N placeholders;
- nothing within the budget: none on top of the floors.

The choice on day k reads the backtest cut where the minutes known at day k's start end (its
refits, runs and static headroom are those of a backtest of that prefix: each reads only the past;
only the static curve's N tried and the reserve sizes are read off the whole replay, as
`backtest.promise_measure` reads them). The first day, with no scored day before it, holds the
promise at P as the daemon's re-tune does before its history is long enough.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from predictive_headroom.backtest.against_fixed import Judged, Recommended, Replays, span
from predictive_headroom.backtest.choice import Recommendation, seen_unseen
from predictive_headroom.backtest.pasted import Budget, tune_choice
from predictive_headroom.core.series import iso_utc
from predictive_headroom.replay.simulator import Run, simulate

ChoiceAt = Callable[[Replays, float, Budget | None], Recommendation | None]
"""`tune`'s choice on a cut of the replays: what is pasted (None: nothing within the budget)."""


def choice_at(r: Replays, asked: float, budget: Budget | None = None) -> Recommendation | None:
    """What the daemon holds of `tune`'s choice on `r` for `asked` (within `budget`):
    `tune_choice`'s, the promise at P on too few scored days (`TuneChoice.held`)."""
    return tune_choice(r, asked, budget, judge=False).held


def cut(r: Replays, upto: int) -> Replays:
    """`r` as a backtest of its first `upto` minutes sees it: the app pods, times and days up
    to there (every run reads only the past, so their first `upto` minutes are that backtest's)."""
    res, rep = r.result, r.replayed
    short = replace(res, pods=res.pods[:upto], times=res.times[:upto])
    starts = tuple(b for b in rep.walk.period_starts if b < upto)
    walk = replace(rep.walk, pods=rep.walk.pods[:upto], period_starts=starts)
    replayed = replace(rep, walk=walk)
    return replace(
        r, result=short, replayed=replayed, whole=span(short, replayed, res.scored_from, upto)
    )


@dataclass(frozen=True)
class DaemonWalk:
    """The daemon's holds day by day and how they fared."""

    asked: float
    held: tuple[str, ...]
    """Each day's hold, in words (`protection: 90%`, `fixed N=19`, `floors`)."""
    run: Run
    whole: Judged
    """Over every scored day."""
    unseen: Judged | None
    """Over the days `tune`'s recommendation on the whole history did not see (the same split)."""
    unseen_from: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "held": list(self.held),
            "whole": self.whole.to_dict(),
            "unseen": None if self.unseen is None else self.unseen.to_dict(),
            "unseen_from": iso_utc(self.unseen_from),
            "says": self.says(),
        }

    def says(self) -> str:
        """`the daemon walked forward (tune's choice each day): kept 95.2% for 12.1 ...`."""
        w = self.whole
        text = (
            f"the daemon walked forward (tune's choice made each day on the days before it): "
            f"kept {100 * w.kept:.1f}% for {w.per_day:,.1f} overhead node-hours a day"
        )
        if self.unseen is not None:
            u = self.unseen
            text += f"; on the days from {iso_utc(self.unseen_from)} {100 * u.kept:.1f}% for {u.per_day:,.1f}"
        return text


def daemon_walk(
    r: Replays, asked: float, budget: Budget | None = None, choose: ChoiceAt = choice_at
) -> DaemonWalk:
    """The daemon's holds on `r` (whose walks include `asked`) day by day, as the module
    docstring says; `choose` makes the choice on each cut (default: `tune`'s)."""
    res, rep = r.result, r.replayed
    starts, lag = list(rep.walk.period_starts), rep.walk.known_lag
    spliced = r.walks[asked].run.placeholders.copy()  # the first day: the promise at P
    held = [f"protection: {100 * asked:g}%"]
    for k in range(1, len(starts)):
        b, stop = starts[k], rep.walk.stop(k)
        rec = choose(cut(r, b - lag), asked, budget)
        spliced[b:stop], words = _held(r, rec, b, stop)
        held.append(words)
    run = simulate(res.pods, spliced, res.cluster)
    _, unseen, split = seen_unseen(r)
    return DaemonWalk(
        asked,
        tuple(held),
        run,
        r.whole.judge(run),
        None if unseen is None else unseen.judge(run),
        float(res.times[min(split, res.pods.size - 1)]),
    )


def _held(r: Replays, rec: Recommendation | None, b: int, stop: int) -> tuple[np.ndarray, str]:
    """The placeholders `rec` holds over minutes [b, stop), and its label."""
    if rec is None:
        return np.zeros(stop - b, dtype=np.int64), "floors"
    if rec.kind == Recommended.PROTECTION and rec.level is not None:
        return r.walks[rec.level].run.placeholders[b:stop], rec.label()
    n = 0 if rec.replicas is None else rec.replicas
    return np.full(stop - b, n, dtype=np.int64), rec.label()
