"""A pool's `budget:` section: the most its headroom may hold in a day.

    budget: {perDay: 40 USD}                 # money a day, in the currency `cost:` prices in
    budget: {nodeHoursPerDay: 50}            # overhead node-hours a day
    budget: {perDay: 40 USD, timezone: Europe/Berlin}   # the day starts at midnight there

A day runs from midnight to midnight in `timezone` (UTC by default; 23 or 25 hours on the days the
clocks change). The placeholders' node-hours are counted as every page counts them (`core.price`:
a placeholder keeps its share of a node warm); money turns into node-hours at the price of a
node-hour of the policy's `cost:` section, so `perDay` needs that price and its currency. The
cap's arithmetic is `core.budget`.

`parse_amount` reads an amount a day with its unit (`40USD`, `40 USD`, `50`, `50nh`), the one
reading of a budget, shared with `tune --budget`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from predictive_headroom.policy.model import PolicyModel
from predictive_headroom.policy.zones import check_zone, zone_names

_FORM = re.compile(
    r"^\s*(?P<amount>[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z-]*)\s*$"
)
NODE_HOURS = ("", "nh", "node-h", "node-hours", "node-hour")
"""Units read as overhead node-hours (none: node-hours)."""
MONEY_PATTERN = r"^\s*[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?\s*[A-Za-z]{3}\s*$"


def parse_amount(text: str) -> tuple[float, str | None]:
    """(amount, currency) from `40USD`, `40 USD` (an upper-cased three-letter code) or `30`,
    `30nh`, `30 node-hours` (currency None: node-hours). ValueError saying why for anything else,
    a sign such as `$` without its code, or an amount that is not more than 0."""
    match = _FORM.match(text)
    if match is None:
        sign = next((c for c in "$€£¥" if c in text), None)
        raise ValueError(
            f"{text!r}: money needs its currency code, not {sign!r}"
            if sign
            else f"{text!r} is not an amount a day"
        )
    amount, unit = float(match["amount"]), match["unit"]
    if unit.lower() not in NODE_HOURS and not re.fullmatch(r"[A-Za-z]{3}", unit):
        raise ValueError(
            f"{text!r}: {unit!r} is neither node-hours nor a currency code such as USD"
        )
    if not (amount > 0 and math.isfinite(amount)):
        raise ValueError(f"{text!r}: a budget must be more than 0 a day (0 buys no headroom)")
    return amount, (None if unit.lower() in NODE_HOURS else unit.upper())


class Budget(PolicyModel):
    """The `budget:` section: money (`perDay`) or overhead node-hours (`nodeHoursPerDay`) a day,
    one of the two, and the time zone whose midnight starts the day."""

    per_day: str | None = Field(
        default=None,
        json_schema_extra={"pattern": MONEY_PATTERN},
        description="money a day with its currency, in cost.currency, e.g. 40 USD",
    )
    node_hours_per_day: float | None = Field(
        default=None,
        json_schema_extra={"exclusiveMinimum": 0},
        description="overhead node-hours a day, e.g. 50",
    )
    timezone: str = Field(
        default="UTC",
        json_schema_extra={"enum": zone_names()},
        description="the day runs from midnight to midnight here (23 or 25 hours on DST days)",
    )

    @model_validator(mode="before")
    @classmethod
    def _a_mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(
                f"budget: {data!r} has no unit: write budget: {{perDay: 40 USD}} (money a day, "
                "in cost.currency) or budget: {nodeHoursPerDay: 50} (overhead node-hours a day)"
            )
        return data

    @field_validator("per_day", mode="before")
    @classmethod
    def _money(cls, value: object) -> object:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"{value!r} is not money a day; write it like 40 USD")
        try:
            amount, currency = parse_amount(str(value))
        except ValueError as exc:
            raise ValueError(f"{exc}; write perDay like 40 USD (in cost.currency)") from None
        if currency is None:
            raise ValueError(
                f"{value!r} has no currency: write perDay: {amount:g} USD (in the currency of "
                f"cost.currency), or nodeHoursPerDay: {amount:g} for overhead node-hours"
            )
        return f"{amount:g} {currency}"

    @field_validator("node_hours_per_day", mode="before")
    @classmethod
    def _node_hours(cls, value: object) -> object:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"{value!r} is not node-hours a day; write it like 50")
        try:
            amount, currency = parse_amount(str(value))
        except ValueError as exc:
            raise ValueError(f"{exc}; write nodeHoursPerDay like 50") from None
        if currency is not None:
            raise ValueError(
                f"{value!r} is money: write it as perDay: {amount:g} {currency}, or give "
                f"nodeHoursPerDay in node-hours (e.g. 50)"
            )
        return amount

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        return check_zone(value)

    @model_validator(mode="after")
    def _one(self) -> Budget:
        if (self.per_day is None) == (self.node_hours_per_day is None):
            given = "both" if self.per_day is not None else "neither"
            raise ValueError(
                f"budget gives {given} of perDay and nodeHoursPerDay: give one, perDay: 40 USD "
                "(money a day, in cost.currency) or nodeHoursPerDay: 50 (overhead node-hours a day)"
            )
        return self

    @property
    def money(self) -> tuple[float, str] | None:
        """(amount, currency) of `perDay`; None for a budget in node-hours."""
        if self.per_day is None:
            return None
        amount, currency = parse_amount(self.per_day)
        assert currency is not None  # checked on load
        return amount, currency


def priced_problem(budget: Budget, cost: Any | None) -> str | None:
    """What keeps `perDay` from turning into node-hours with the policy's `cost:` section
    (`policy.config.Cost` or None), in words: another currency, or no price for a node-hour;
    None when nothing does (or the budget is in node-hours)."""
    money = budget.money
    if money is None:
        return None
    _, currency = money
    priced_in = str(getattr(cost, "currency", None) or "USD").upper()
    if currency != priced_in:
        return (
            f"perDay {budget.per_day} is in {currency}, and cost: prices in {priced_in} "
            f"(cost.currency): give perDay in {priced_in}, or set cost.currency: {currency}"
        )
    priced = cost is not None and bool(
        getattr(cost, "node_hour_price", None)
        or getattr(cost, "cost_per_cpu_hour", 0.0)
        or getattr(cost, "cost_per_gib_hour", 0.0)
    )
    if not priced:
        return (
            f"perDay {budget.per_day} needs the price of a node-hour to turn money into "
            "node-hours, and the policy has none: set cost.nodeHourPrice (or cost.costPerCpuHour "
            "and costPerGiBHour), or give the budget in node-hours (nodeHoursPerDay: 50)"
        )
    return None
