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

The planner takes the budget as a cap (`BudgetPart`); what was held since midnight is told to a
`Ledger` plan by plan (the daemon's plans, the replay's simulated ones). Pure: no clock reads, no
I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo

from predictive_headroom.core.price import Price
from predictive_headroom.policy.budget import Budget

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


class Planned(Protocol):
    """A plan as the budget hears it: when, and the count it holds."""

    @property
    def at(self) -> float: ...

    @property
    def desired(self) -> int: ...


class Ledger:
    """What a pool held since the start of its day, told plan by plan: the daemon's own plans
    (kept in memory: a restart starts an empty ledger) or a replay's. Each count is held from its
    instant until the next one's. Pure: no clock, no I/O; O(1) a record."""

    def __init__(self, zone: str) -> None:
        self.zone = zone
        self._day: Day | None = None
        self._total = 0.0
        """Placeholder-seconds held from the start of `_day` until the last record."""
        self._last: tuple[float, int] | None = None

    def _held_seconds(self, now: float) -> float:
        """Placeholder-seconds held from the start of `now`'s day until `now`."""
        if self._last is None:
            return 0.0
        at, replicas = self._last
        day = day_of(now, self.zone)
        before = self._total if self._day is not None and self._day.start == day.start else 0.0
        return before + replicas * max(0.0, now - max(at, day.start))

    def record(self, at: float, replicas: int) -> None:
        """`replicas` held from `at` on (an instant not after the last one's is ignored)."""
        if self._last is not None and at <= self._last[0]:
            return
        self._total = self._held_seconds(at)
        self._day, self._last = day_of(at, self.zone), (at, int(replicas))

    def spent(self, budget: DailyBudget, now: float) -> float:
        """The node-hours held from the start of `now`'s day until `now`, in `budget`'s node
        (before the first record nothing is counted)."""
        return budget.node_hours_of(1.0, self._held_seconds(now))


@dataclass(frozen=True)
class BudgetPart:
    """The budget as the planner takes it at one instant: a cap of `affords` placeholders.

    The plan ahead is what the plan holds now, held to the end of the day: then spent plus the
    plan ahead is over the budget exactly when the plan holds more than `affords`, so the
    planner's smallest cap (`min(plan, affords)`) is `budget_cap`'s rule, and the reason is
    `budget` just when it binds (`tests/test_budget_cap.py` checks both agree). With a `ledger`,
    the plan made at `at` is recorded there (`planned`)."""

    replicas: int
    spent: float
    budget: DailyBudget
    at: float
    ledger: Ledger | None = field(default=None, compare=False, repr=False)

    def to_details(self) -> dict[str, object]:
        """The day's budget, its spend so far and what is left, in node-hours."""
        day = day_of(self.at, self.budget.zone)
        return {
            "budget_node_hours_per_day": round(self.budget.node_hours, 3),
            "budget_spent_node_hours": round(self.spent, 3),
            "budget_left_node_hours": round(self.budget.node_hours - self.spent, 3),
            "budget_hours_left": round((day.end - self.at) / HOUR, 3),
        }

    def planned(self, plan: Planned) -> None:
        """Record what the plan made at this part's instant holds (other instants: a horizon
        planned ahead, not held)."""
        if self.ledger is not None and plan.at == self.at:
            self.ledger.record(plan.at, plan.desired)

    def later(self) -> BudgetPart:
        """The same cap, recording nothing: ahead of now the spend is not replayed, so a horizon
        holds what is left spread as it is now."""
        return replace(self, ledger=None)


def budget_part(
    budget: DailyBudget, now: float, spent: float | None = None, ledger: Ledger | None = None
) -> BudgetPart:
    """The budget's part at `now`: `spent` node-hours held since the start of its day (None:
    what `ledger` recorded; neither: nothing), recording the plan made with it in `ledger`."""
    if spent is None:
        spent = 0.0 if ledger is None else ledger.spent(budget, now)
    return BudgetPart(affords(budget, now, spent), spent, budget, now, ledger)
