"""Advice within a budget (docs/promise.md, "Within a budget"): the most protection a budget of
overhead node-hours a day buys on the history, and what the user's own spend buys.

Judged as `tune`'s recommendation is (`backtest.choice.seen_unseen`): chosen on the first part of
the scored days (seen), judged on the second (unseen). The options are every fixed N of
placeholders (simulated on the backtest's app pods and cluster; the largest N whose cost on the
seen days is within the budget is the most protective fixed one) and `protection:` at each level
the promise was walked forward at (`FRONTIER_LEVELS` and the one asked), each day's setting chosen
on the days before it. `within_budget` holds the option that kept the most on the seen days among
those that cost at most the budget there, or nothing when none did (never the cheapest miss);
`at_your_spend` takes the cost of the user's fixed N on the seen days as the budget and says
whether a protection level kept more for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from predictive_headroom.backtest.against_fixed import (
    MAX_CURRENT,
    Judged,
    Recommended,
    Replays,
    Span,
)
from predictive_headroom.backtest.choice import Recommendation, seen_unseen
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import iso_utc
from predictive_headroom.replay.simulator import Run, simulate


@dataclass(frozen=True)
class Option:
    """One thing `tune` could paste (a protection level or a fixed N), scored on the seen days,
    with the run it made."""

    kind: Recommended
    value: float
    """The protection level (kind `protection`) or the number of placeholders (kind `fixed`)."""
    seen: Judged
    run: Run

    def label(self) -> str:
        """`protection: 80%` or `fixed N=21`."""
        if self.kind == Recommended.FIXED:
            return f"fixed N={int(self.value)}"
        return f"protection: {100 * self.value:g}%"


@dataclass(frozen=True)
class BudgetAdvice:
    """What `tune --budget` recommends: `recommendation` (None when no option cost at most the
    budget on the seen days) and every option it weighed."""

    per_day: float
    """The budget: overhead node-hours a day."""
    given: str
    """The budget as the user gave it, in words (`30 overhead node-hours a day`)."""
    recommendation: Recommendation | None
    cheapest: Option
    """The cheapest option on the seen days (named when nothing met the budget)."""
    seen_days: float
    yours: tuple[tuple[int, float, float], ...] = ()
    """The user's fixed N beside the budget: (N, its nominal spend a day, its simulated cost a
    day on the seen days)."""

    def says(self) -> str:
        """The advice in one sentence: the recommendation with its unseen-day figures (and
        whether it stayed within the budget there), or that nothing met the budget."""
        rec = self.recommendation
        if rec is None:
            c = self.cheapest
            return (
                f"within {self.given}: nothing recommended: no setting cost that little on the "
                f"first {self.seen_days:.1f} days (the cheapest, {c.label()}, cost "
                f"{c.seen.per_day:,.1f} overhead node-hours a day for {100 * c.seen.kept:.1f}%); "
                "raise --budget or keep what you run" + self._yours()
            )
        text = f"recommended within {self.given}: " + rec.says().removeprefix("recommended: ")
        if rec.unseen is not None and rec.unseen.per_day > self.per_day + 1e-9:
            text += f", over the budget of {self.per_day:,.1f} there"
        return text + self._yours()

    def _yours(self) -> str:
        """`; your 20: nominally 30.0 overhead node-hours a day, 30.3 simulated on ...`."""
        return "".join(
            f"; your {n}: nominally {nominal:,.1f} overhead node-hours a day, {simulated:,.1f} "
            f"simulated on the first {self.seen_days:.1f} days"
            for n, nominal, simulated in self.yours
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "overhead_node_hours_per_day": round(self.per_day, 3),
            "given": self.given,
            "recommendation": None
            if self.recommendation is None
            else self.recommendation.to_dict(),
            "cheapest": {
                "label": self.cheapest.label(),
                "seen": self.cheapest.seen.to_dict(),
            },
            "yours": [
                {
                    "replicas": n,
                    "nominal_node_hours_per_day": round(nominal, 3),
                    "simulated_node_hours_per_day": round(simulated, 3),
                }
                for n, nominal, simulated in self.yours
            ],
            "says": self.says(),
        }


@dataclass(frozen=True)
class AtYourSpend:
    """What the user's fixed N costs, taken as the budget: keep it, or a protection level that
    kept more for no more on the seen days."""

    replicas: int
    theirs: Option
    better: Option | None
    """The level that kept the most for at most the N's cost on the seen days, when it kept more
    than the N there (None: keep the N)."""
    seen_days: float
    unseen_days: float
    split_at: float
    theirs_unseen: Judged | None
    better_unseen: Judged | None

    def says(self, price: Price | None = None) -> str:
        """`at your spend: keep 20 (...)` or `at your spend: protection: 80% keeps more (...)`,
        with the seen and unseen days' figures."""
        n, t = self.replicas, self.theirs.seen
        spend = f"{t.per_day:,.1f} overhead node-hours a day{_money(t.per_day, price)}"
        seen = f"on the first {self.seen_days:.1f} days"
        unseen = (
            ""
            if self.theirs_unseen is None
            else f"on the last {self.unseen_days:.1f} days, which it did not see (from "
            f"{iso_utc(self.split_at)}), "
        )
        if self.better is None:
            text = (
                f"at your spend: keep {n} ({seen} your {n} kept {100 * t.kept:.1f}% for {spend}; "
                "no protection level kept more for that)"
            )
            if self.theirs_unseen is not None:
                u = self.theirs_unseen
                text += f"; {unseen}your {n} kept {100 * u.kept:.1f}% for {u.per_day:,.1f} a day"
            return text
        b = self.better.seen
        text = (
            f"at your spend: {self.better.label()} keeps more ({seen} it kept {100 * b.kept:.1f}% "
            f"for {b.per_day:,.1f} a day, your {n} {100 * t.kept:.1f}% for {spend})"
        )
        if self.better_unseen is not None and self.theirs_unseen is not None:
            bu, tu = self.better_unseen, self.theirs_unseen
            text += (
                f"; {unseen}{100 * bu.kept:.1f}% for {bu.per_day:,.1f} a day against "
                f"{100 * tu.kept:.1f}% for {tu.per_day:,.1f}"
            )
        return text

    def to_dict(self, price: Price | None = None) -> dict[str, Any]:
        pick = self.better or self.theirs
        unseen = self.theirs_unseen if self.better is None else self.better_unseen
        return {
            "replicas": self.replicas,
            "budget_node_hours_per_day": round(self.theirs.seen.per_day, 3),
            "keep": self.better is None,
            "label": f"keep {self.replicas}" if self.better is None else pick.label(),
            "protection": None if self.better is None else self.better.value,
            "seen": pick.seen.to_dict(),
            "unseen": None if unseen is None else unseen.to_dict(),
            "theirs_seen": self.theirs.seen.to_dict(),
            "theirs_unseen": None if self.theirs_unseen is None else self.theirs_unseen.to_dict(),
            "says": self.says(price),
        }


def _money(node_hours: float, price: Price | None) -> str:
    text = "" if price is None else price.text(node_hours)
    return f" ({text})" if text else ""


def _levels(r: Replays, seen: Span) -> list[Option]:
    """`protection:` at each level walked forward, scored on the seen days."""
    return [
        Option(Recommended.PROTECTION, p, seen.judge(w.run), w.run)
        for p, w in sorted(r.walks.items())
    ]


def fixed_option(r: Replays, seen: Span, n: int) -> Option:
    """`n` fixed placeholders replayed on `r`'s app pods and cluster, scored on the seen days."""
    res = r.result
    run = simulate(res.pods, np.full(res.pods.size, n, dtype=np.int64), res.cluster)
    return Option(Recommended.FIXED, float(n), seen.judge(run), run)


def largest_fixed(r: Replays, seen: Span, per_day: float) -> Option | None:
    """The most fixed placeholders (at least 1) whose cost on `seen` is at most `per_day`
    overhead node-hours a day (a cost that does not fall as N grows: galloping, then bisection),
    None when even one costs more."""
    lo = fixed_option(r, seen, 1)
    if lo.seen.per_day > per_day + 1e-9:
        return None
    n, hi = 1, None
    while hi is None and n < MAX_CURRENT:  # gallop: 2, 4, 8, ... until one costs more
        step = fixed_option(r, seen, min(2 * n, MAX_CURRENT))
        if step.seen.per_day > per_day + 1e-9:
            hi = int(step.value)
        else:
            lo, n = step, int(step.value)
    while hi is not None and hi - int(lo.value) > 1:
        mid = fixed_option(r, seen, (int(lo.value) + hi) // 2)
        if mid.seen.per_day > per_day + 1e-9:
            hi = int(mid.value)
        else:
            lo = mid
    return lo


def budget_recommendation(r: Replays, option: Option, asked: float, why: str) -> Recommendation:
    """`option` as `tune` pastes and judges it (`backtest.choice.Recommendation`)."""
    res = r.result
    seen, unseen, split = seen_unseen(r)
    fixed = option.kind == Recommended.FIXED
    asked_run = r.walks[asked].run
    return Recommendation(
        option.kind,
        asked,
        None if fixed else option.value,
        int(option.value) if fixed else None,
        seen.days,
        0.0 if unseen is None else unseen.days,
        float(res.times[min(split, res.pods.size - 1)]),
        option.seen,
        None if unseen is None else unseen.judge(option.run),
        r.whole.judge(asked_run),
        None if unseen is None else unseen.judge(asked_run),
        why,
    )


def _weighed(option: Option, per_day: float) -> str:
    """`protection: 80% cost 129.0 a day, over it` or `protection: 80% kept 20.1% for 12.0`."""
    if option.seen.per_day > per_day + 1e-9:
        return f"{option.label()} cost {option.seen.per_day:,.1f} a day, over it"
    return f"{option.label()} kept {100 * option.seen.kept:.1f}% for {option.seen.per_day:,.1f}"


def within_budget(r: Replays, per_day: float, asked: float, given: str) -> BudgetAdvice:
    """The most protection `per_day` overhead node-hours a day bought on the seen days, fixed N
    or a protection level (ties: the cheaper), judged on the unseen days; `asked` is the
    protection the comparison figures are read at (its walk must be in `r`), `given` the budget
    in the user's words. Nothing is recommended when no option cost at most `per_day` there."""
    seen, _, _ = seen_unseen(r)
    levels = _levels(r, seen)
    fixed = largest_fixed(r, seen, per_day)
    options = [o for o in levels if o.seen.per_day <= per_day + 1e-9]
    options += [] if fixed is None else [fixed]
    cheapest = min([*levels, fixed or fixed_option(r, seen, 1)], key=lambda o: o.seen.per_day)
    if not options:
        return BudgetAdvice(per_day, given, None, cheapest, seen.days)
    best = max(options, key=lambda o: (round(o.seen.kept, 9), -o.seen.per_day))
    others = "; ".join(_weighed(o, per_day) for o in levels if o is not best)
    why = (
        f"the most protection {per_day:,.1f} overhead node-hours a day bought on the first "
        f"{seen.days:.1f} days: {100 * best.seen.kept:.1f}% for {best.seen.per_day:,.1f} a day "
        f"there; {others}"
    )
    return BudgetAdvice(
        per_day, given, budget_recommendation(r, best, asked, why), cheapest, seen.days
    )


def at_your_spend(r: Replays, replicas: int) -> AtYourSpend:
    """`replicas` fixed placeholders' cost on the seen days taken as the budget: the protection
    level that kept the most for at most that cost there, when it kept more than the N (else
    keep the N), each judged on the unseen days."""
    res = r.result
    seen, unseen, split = seen_unseen(r)
    theirs = fixed_option(r, seen, replicas)
    fits = [
        o
        for o in _levels(r, seen)
        if o.seen.per_day <= theirs.seen.per_day + 1e-9 and o.seen.kept > theirs.seen.kept + 1e-9
    ]
    better = max(fits, key=lambda o: (o.seen.kept, -o.seen.per_day)) if fits else None
    return AtYourSpend(
        replicas,
        theirs,
        better,
        seen.days,
        0.0 if unseen is None else unseen.days,
        float(res.times[min(split, res.pods.size - 1)]),
        None if unseen is None else unseen.judge(theirs.run),
        None if unseen is None or better is None else unseen.judge(better.run),
    )
