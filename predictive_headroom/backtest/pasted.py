"""What `tune` pastes for a pool, decided by one function (`tune_choice`; issue 62, item 1):
`tune`'s rule at the protection asked (`backtest.choice.recommend_choice`) and, with a budget, the
most protection it bought (`backtest.budget.within_budget`), the pasted one being the budget's.
`tune`, the daemon's refit (`app.choice`, `app.hold`) and the daemon walked forward
(`backtest.daemon_walk`) all call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from predictive_headroom.backtest.against_fixed import Recommended, Replays, current
from predictive_headroom.backtest.budget import (
    BudgetAdvice,
    budget_recommendation,
    fixed_option,
    within_budget,
)
from predictive_headroom.backtest.choice import Recommendation, recommend_choice, seen_unseen
from predictive_headroom.backtest.promise_measure import fewest_fixed_n
from predictive_headroom.core.series import iso_utc
from predictive_headroom.core.verdict import Verdict, verdict

Budget = tuple[float, str]
"""A budget: overhead node-hours a day, and the budget in the user's words."""

MIN_JUDGED_DAYS = 7.0
"""Scored days the daemon needs before it holds `tune`'s choice (`TuneChoice.held`): on fewer,
the part the choice is judged on is a few days of a week, and a fixed N sized on them undershoots
(on nab_aws_elb, 3 and 5 days: kept 84.4% asked 90%, where the promise at P kept 89.1%;
docs/promise.md, "The promise on the daemon"); it holds the promise at P meanwhile."""


@dataclass(frozen=True)
class TuneChoice:
    """What `tune` pastes for one pool: its rule at the protection asked and, with a budget, the
    advice within it (whose recommendation is then the one pasted)."""

    asked: float
    at_protection: Recommendation
    budget: BudgetAdvice | None = None
    scored_days: float = MIN_JUDGED_DAYS
    """The scored days the choice was made on."""
    verdict: Verdict | None = None
    """Did the forecast beat fixed headroom over the scored days the choice read (`verdict_on`):
    what `tune`, `/last-run`, the metric, `plan` and `report` say for the same history."""
    yours: tuple[Verdict, ...] = ()
    """Did it beat each of the user's fixed N over the same days (`verdict_on`)."""

    @property
    def pasted(self) -> Recommendation | None:
        """The recommendation pasted: the budget's when one was given (None: nothing cost that
        little), else the rule's at the protection asked."""
        return self.at_protection if self.budget is None else self.budget.recommendation

    @property
    def judged(self) -> bool:
        """At least `MIN_JUDGED_DAYS` scored days: the daemon holds what is pasted."""
        return self.scored_days >= MIN_JUDGED_DAYS - 1e-9

    @property
    def held(self) -> Recommendation | None:
        """What the daemon holds: the pasted recommendation once `judged`, else the promise at
        the protection asked (the re-tune's rule at P), saying why."""
        if self.judged:
            return self.pasted
        why = (
            f"{self.scored_days:.1f} scored days, too few to judge tune's choice on (it needs "
            f"{MIN_JUDGED_DAYS:g}): the promise at {100 * self.asked:g}% until then"
        )
        return replace(self.at_protection, kind=Recommended.PROTECTION, level=self.asked, why=why)

    def reachable(self) -> bool:
        """The protection asked is what is held (not a lower level, not a fixed N)."""
        rec = self.held
        return (
            rec is not None
            and rec.kind == Recommended.PROTECTION
            and rec.level is not None
            and rec.level >= self.asked - 1e-9
        )

    def to_dict(self) -> dict[str, Any]:
        rec = self.pasted
        return {
            "asked": self.asked,
            "pasted": None if rec is None else rec.label(),
            "kind": None if rec is None else str(rec.kind),
            "level": None if rec is None else rec.level,
            "replicas": None if rec is None else rec.replicas,
            "reachable": self.reachable(),
            "held": None if self.held is None else self.held.label(),
            "why_held": None if self.held is None or self.judged else self.held.why,
            "scored_days": round(self.scored_days, 2),
            "budget": None if self.budget is None else self.budget.to_dict(),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "verdict_yours": [v.to_dict() for v in self.yours],
        }


def tune_choice(
    r: Replays,
    asked: float,
    budget: Budget | None = None,
    yours: Sequence[int] = (),
    *,
    judge: bool = True,
) -> TuneChoice:
    """`tune`'s choice on `r` (whose walks include `asked`): the rule at `asked`, and within
    `budget` (overhead node-hours a day, in words) the most protection it bought, read as the user
    means it against their own fixed N (`yours`, `at_least_yours`); with `judge`, the verdicts
    over the same days (`verdict_on`) and the weekly range (off where only the choice is held,
    `backtest.daemon_walk`)."""
    at = recommend_choice(r, asked, weeks=judge)
    days = r.whole.days
    said = verdict_on(r, asked) if judge else None
    theirs = tuple(verdict_on(r, asked, n) for n in yours) if judge else ()
    if budget is None:
        return TuneChoice(asked, at, scored_days=days, verdict=said, yours=theirs)
    advice = within_budget(r, budget[0], asked, budget[1])
    return TuneChoice(asked, at, at_least_yours(r, advice, asked, yours), days, said, theirs)


def verdict_on(r: Replays, asked: float, yours: int | None = None) -> Verdict:
    """The one verdict (`core.verdict`) over every scored day of `r`, the days named: did
    `protection: asked` walked forward cost no more than static headroom at the protection it
    kept (naming the fewest fixed N that kept it), or with `yours`, than the user's fixed N at
    the protection that N kept (`backtest.against_fixed.current`, as `tune --current` says)."""
    res, whole = r.result, r.whole
    last = min(whole.hi, res.pods.size) - 1
    over = (
        f"over the {whole.days:.1f} scored days judged, {iso_utc(float(res.times[whole.lo]))} "
        f"to {iso_utc(float(res.times[last]))}"
    )
    if yours is not None:  # "on this history": the same days, as tune --current says it
        return current(r, yours).verdict()
    j = whole.judge(r.walks[asked].run)
    fewest = fewest_fixed_n(res, j.kept)
    return verdict(
        j.kept,
        j.per_day,
        j.static_per_day,
        fixed_replicas=None if fewest is None else fewest[0],
        over=over,
    )


def nominal_per_day(replicas: int, slots: int) -> float:
    """What `replicas` placeholders nominally cost a day: their share of a node all day."""
    return 24.0 * replicas / slots


def at_least_yours(
    r: Replays, advice: BudgetAdvice, asked: float, yours: Sequence[int]
) -> BudgetAdvice:
    """`advice` with the user's fixed N beside it (`BudgetAdvice.yours`: its nominal and its
    simulated cost a day on the seen days), and when the budget covers the largest N's nominal
    spend but the advice holds fewer fixed placeholders (or nothing), that N instead, saying why
    with both figures: a budget equal to what N placeholders nominally cost means N."""
    if not yours:
        return advice
    seen, _, _ = seen_unseen(r)
    slots = r.result.cluster.node_slots
    theirs = [(n, nominal_per_day(n, slots), fixed_option(r, seen, n)) for n in sorted(yours)]
    out = replace(advice, yours=tuple((n, nom, o.seen.per_day) for n, nom, o in theirs))
    covered = [t for t in theirs if t[1] <= advice.per_day + 1e-9]
    rec = advice.recommendation
    if not covered or (rec is not None and rec.kind != Recommended.FIXED):
        return out
    n, nominal, option = covered[-1]
    if rec is not None and rec.replicas is not None and rec.replicas >= n:
        return out
    why = (
        f"your {n} fixed placeholders: the budget of {advice.per_day:,.1f} covers their nominal "
        f"spend ({n} of {slots} a node all day: {nominal:,.1f} overhead node-hours a day); "
        f"simulated on the first {seen.days:.1f} days they cost {option.seen.per_day:,.1f} a day "
        f"for {100 * option.seen.kept:.1f}% (the nodes they keep warm part-filled), "
        + (
            "and nothing else fit"
            if rec is None
            else f"so the simulated cost alone would have held {rec.replicas}"
        )
    )
    return replace(out, recommendation=budget_recommendation(r, option, asked, why))
