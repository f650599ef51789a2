"""What `tune` pastes for a pool, decided by one function (`tune_choice`; issue 62, item 1):
`tune`'s rule at the protection asked (`backtest.choice.recommend_choice`) and, with a budget, the
most protection it bought (`backtest.budget.within_budget`), the pasted one being the budget's.
`tune`, the daemon's refit (`app.choice`, `app.hold`) and the daemon walked forward
(`backtest.daemon_walk`) all call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from predictive_headroom.backtest.against_fixed import Recommended, Replays
from predictive_headroom.backtest.budget import BudgetAdvice, within_budget
from predictive_headroom.backtest.choice import Recommendation, recommend_choice

Budget = tuple[float, str]
"""A budget: overhead node-hours a day, and the budget in the user's words."""


@dataclass(frozen=True)
class TuneChoice:
    """What `tune` pastes for one pool: its rule at the protection asked and, with a budget, the
    advice within it (whose recommendation is then the one pasted)."""

    asked: float
    at_protection: Recommendation
    budget: BudgetAdvice | None = None

    @property
    def pasted(self) -> Recommendation | None:
        """The recommendation pasted: the budget's when one was given (None: nothing cost that
        little), else the rule's at the protection asked."""
        return self.at_protection if self.budget is None else self.budget.recommendation

    def reachable(self) -> bool:
        """The protection asked is what is pasted (not a lower level, not a fixed N)."""
        rec = self.pasted
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
            "budget": None if self.budget is None else self.budget.to_dict(),
        }


def tune_choice(r: Replays, asked: float, budget: Budget | None = None) -> TuneChoice:
    """`tune`'s choice on `r` (whose walks include `asked`): the rule at `asked`, and within
    `budget` (overhead node-hours a day, in words) the most protection it bought."""
    at = recommend_choice(r, asked)
    advice = None if budget is None else within_budget(r, budget[0], asked, budget[1])
    return TuneChoice(asked, at, advice)
