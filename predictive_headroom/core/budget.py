"""The budget cap: the most overhead node-hours a pool's headroom holds in a day.

    spent + ahead <= budget            (overhead node-hours, since midnight in the budget's zone)

`spent` is what the placeholders held since the start of the day, `ahead` what the plan would hold
to its end; a placeholder held for an hour is 1/`slots` of a node-hour (`core.price`: the node
the pool is priced on holds `slots` placeholders), and a budget in money is turned into
node-hours at that node-hour's price. When the sum is over the budget the cap binds: the plan
holds what is left spread over the rest of the day,

    cap = floor((budget - spent) x slots / hours left in the day)

and says `budget` when that is below what the floors ask for. A day is midnight to midnight in the
budget's time zone (`zoneinfo`): 23 or 25 hours on the days the clocks change, so the same budget
is spread over the hours the day has.

The planner takes the budget as a cap (`BudgetPart`), read at each instant from what every shell
gives alike (`core.context.Context`: the instant, the node's price, what the pool held since
midnight: the daemon's own plans, `plan --budget-spent`, the replay's simulated ones), by
`read_budget`, registered in `core.components`. Pure: no clock reads, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from predictive_headroom.core.price import Price
from predictive_headroom.policy.budget import Budget

if TYPE_CHECKING:
    from predictive_headroom.core.context import Context
    from predictive_headroom.policy.config import Pool

HOUR = 3600.0
_EPS = 1e-9


@dataclass(frozen=True)
class Day:
    """One day of the budget: from `start` to `end` (POSIX seconds), midnight to midnight in its
    time zone."""

    start: float
    end: float

    @property
    def hours(self) -> float:
        """How long the day is: 24, or 23/25 on the days the clocks change."""
        return (self.end - self.start) / HOUR


@cache
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _midnight(date: object, zone: ZoneInfo) -> float:
    """The first instant of `date` in `zone` (where midnight is skipped, the instant the clocks
    jump: the wall clock read before the change)."""
    return datetime(date.year, date.month, date.day, tzinfo=zone).timestamp()  # type: ignore[attr-defined]


def day_of(at: float, zone: str) -> Day:
    """The day in `zone` (an IANA name) that holds the instant `at`."""
    tz = _zone(zone)
    date = datetime.fromtimestamp(at, tz).date()
    return Day(_midnight(date, tz), _midnight(date + timedelta(days=1), tz))


@dataclass(frozen=True)
class DailyBudget:
    """A pool's budget as the rule reads it: overhead node-hours a day, the placeholders one node
    holds, the time zone of the day, and the budget in words."""

    node_hours: float
    slots: int
    zone: str
    given: str

    def node_hours_of(self, replicas: float, seconds: float) -> float:
        """The node-hours `replicas` placeholders hold for `seconds`."""
        return replicas * seconds / HOUR / self.slots

    def to_dict(self) -> dict[str, object]:
        return {
            "node_hours_per_day": round(self.node_hours, 6),
            "slots": self.slots,
            "timezone": self.zone,
            "given": self.given,
        }


def daily_budget(budget: Budget, price: Price) -> DailyBudget:
    """`budget` in node-hours a day on the node `price` prices (money through its node-hour).
    ValueError when a budget in money meets no price or another currency (the policy refuses
    both on load; a price given on the command line can still differ)."""
    money = budget.money
    if money is None:
        assert budget.node_hours_per_day is not None  # one of the two, checked on load
        per_day = float(budget.node_hours_per_day)
        return DailyBudget(
            per_day, price.slots, budget.timezone, f"{per_day:,.4g} overhead node-hours a day"
        )
    amount, currency = money
    if currency != price.currency.upper():
        raise ValueError(
            f"budget.perDay {budget.per_day}: headroom is priced in {price.currency}; give the "
            f"budget in {price.currency} or in node-hours (nodeHoursPerDay)"
        )
    if price.node_hour is None or price.node_hour <= 0:
        raise ValueError(
            f"budget.perDay {budget.per_day}: no price for a node-hour to turn it into "
            "node-hours; set cost.nodeHourPrice or give nodeHoursPerDay"
        )
    per_day = amount / price.node_hour
    return DailyBudget(
        per_day,
        price.slots,
        budget.timezone,
        f"{amount:,.2f} {currency} a day ({per_day:,.1f} overhead node-hours at "
        f"{price.node_hour:,.4g} {currency} a node-hour)",
    )


def held_node_hours(
    held: Sequence[tuple[float, float]], since: float, until: float, slots: int
) -> float:
    """The node-hours a count held from `since` to `until`: `held` is (instant, replicas) in
    ascending order, each count held from its instant until the next one's (the last until
    `until`); before the first instant nothing is counted."""
    total = 0.0
    for k, (at, replicas) in enumerate(held):
        lo = max(at, since)
        hi = min(held[k + 1][0] if k + 1 < len(held) else until, until)
        if hi > lo:
            total += replicas * (hi - lo)
    return total / HOUR / slots


@dataclass(frozen=True)
class BudgetCap:
    """The budget at one instant: the cap (None when the day's spend and the plan ahead stay
    within the budget), and the figures it came from (node-hours)."""

    cap: int | None
    spent: float
    ahead: float
    budget: DailyBudget
    day: Day

    @property
    def left(self) -> float:
        """Node-hours left in the day's budget (negative when over)."""
        return self.budget.node_hours - self.spent

    def limits(self, wanted: int) -> bool:
        """Whether the cap holds the plan below `wanted`."""
        return self.cap is not None and self.cap < wanted


def affords(budget: DailyBudget, now: float, spent: float) -> int:
    """The placeholders the node-hours left in `now`'s day afford, spread evenly over the hours
    left (at least 0): the cap when the budget binds."""
    day = day_of(now, budget.zone)
    hours_left = (day.end - now) / HOUR
    left = max(0.0, budget.node_hours - spent)
    return int(math.floor(left * budget.slots / hours_left + _EPS))


def budget_cap(
    budget: DailyBudget, now: float, spent: float, ahead: Sequence[tuple[float, float]]
) -> BudgetCap:
    """The cap at `now`, given the node-hours held since the start of its day (`spent`) and the
    plan ahead (`ahead`: (instant, replicas) from `now`, each held until the next, the last to
    the end of the day). Binds when spent plus the plan ahead is over the budget: then the cap is
    what is left spread over the rest of the day (`affords`)."""
    day = day_of(now, budget.zone)
    will_hold = held_node_hours(ahead, now, day.end, budget.slots)
    if spent + will_hold <= budget.node_hours + _EPS:
        return BudgetCap(None, spent, will_hold, budget, day)
    return BudgetCap(affords(budget, now, spent), spent, will_hold, budget, day)


@dataclass(frozen=True)
class BudgetPart:
    """The budget as the planner takes it at one instant: a cap of `affords` placeholders.

    The plan ahead is what the plan holds now, held to the end of the day: then spent plus the
    plan ahead is over the budget exactly when the plan holds more than `affords`, so the
    planner's smallest cap (`min(plan, affords)`) is `budget_cap`'s rule, and the reason is
    `budget` just when it binds (`tests/test_budget_cap.py` checks both agree)."""

    replicas: int
    spent: float
    budget: DailyBudget
    at: float

    def to_details(self) -> dict[str, object]:
        """The day's budget, its spend so far and what is left, in node-hours."""
        day = day_of(self.at, self.budget.zone)
        return {
            "budget_node_hours_per_day": round(self.budget.node_hours, 3),
            "budget_spent_node_hours": round(self.spent, 3),
            "budget_left_node_hours": round(self.budget.node_hours - self.spent, 3),
            "budget_hours_left": round((day.end - self.at) / HOUR, 3),
        }

    def to_status(self) -> dict[str, object]:
        """What `/last-run` shows: the budget in words, the cap now and `to_details`."""
        return {"budget": self.budget.given, "cap": self.replicas, **self.to_details()}

    def later(self) -> BudgetPart:
        """The same cap: ahead of now the spend is not replayed, so a horizon holds what is left
        spread as it is now."""
        return self


def budget_part(budget: DailyBudget, now: float, spent: float) -> BudgetPart:
    """The budget's part at `now`, `spent` node-hours held since the start of its day."""
    return BudgetPart(affords(budget, now, spent), spent, budget, now)


def read_budget(pool: Pool, _settings: object, context: Context) -> BudgetPart | None:
    """The budget of `pool` at the context's instant, from what the pool held since midnight in
    the budget's zone (None without a `budget:` section, or when the context does not know what
    was held); ValueError when it cannot be priced (`daily_budget`)."""
    if pool.budget is None:
        return None
    spent = context.held(pool, day_of(context.at, pool.budget.timezone).start)
    if spent is None:
        return None
    return budget_part(daily_budget(pool.budget, context.price(pool)), context.at, spent)
