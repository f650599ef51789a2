"""`--budget` of `tune`: what the user will spend a day on headroom, in overhead node-hours or in
money (priced the one way money is priced, `core.price`), for `backtest.budget`.

`--budget 30` (or `30nh`, `30 node-hours`) is overhead node-hours a day; `--budget 40USD` (or
`40 USD`) is money a day, in the policy's currency, turned into node-hours by the node-hour's
price. Zero, a negative amount, a currency sign without its code (`$40`) or a word that is not a
currency code exits 2 naming the flag, before any history is read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from predictive_headroom.commands import CommandError
from predictive_headroom.core.price import Price
from predictive_headroom.policy.budget import parse_amount

EXAMPLES = "e.g. --budget 30 (overhead node-hours a day) or --budget 40USD (money a day)"


@dataclass(frozen=True)
class BudgetFlag:
    """`--budget` as given: an amount a day and its currency (None: overhead node-hours)."""

    amount: float
    currency: str | None
    text: str


def budget_arg(text: str) -> BudgetFlag:
    """argparse type of `--budget`: a positive amount, bare or in node-hours, or with a
    three-letter currency code (read as `budget:` reads it, `policy.budget.parse_amount`)."""
    try:
        amount, currency = parse_amount(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; {EXAMPLES}") from None
    return BudgetFlag(amount, currency, text.strip())


def add_budget_argument(parser: argparse.ArgumentParser) -> None:
    """`--budget AMOUNT[UNIT]`."""
    parser.add_argument(
        "--budget",
        type=budget_arg,
        metavar="AMOUNT",
        help="recommend the most protection this buys a day on the history, fixed N or a "
        "protection level: overhead node-hours (30) or money in the policy's currency (40USD)",
    )


def budget_node_hours(flag: BudgetFlag, price: Price) -> tuple[float, str]:
    """The budget in overhead node-hours a day and in words; money through `price` (a
    CommandError naming the flag when there is no price or another currency)."""
    if flag.currency is None:
        return flag.amount, f"{flag.amount:,.4g} overhead node-hours a day"
    if flag.currency != price.currency.upper():
        raise CommandError(
            f"--budget {flag.text}: the policy prices headroom in {price.currency} "
            f"(cost.currency); give the budget in {price.currency}, or in node-hours (--budget 30)"
        )
    if price.node_hour is None or price.node_hour <= 0:
        raise CommandError(
            f"--budget {flag.text}: money needs a price for a node-hour and the policy gives "
            "none; set cost.nodeHourPrice (or costPerCpuHour and costPerGiBHour) or "
            "--node-hour-price, or give the budget in node-hours (--budget 30)"
        )
    per_day = flag.amount / price.node_hour
    return per_day, (
        f"{flag.amount:,.2f} {price.currency} a day ({per_day:,.1f} overhead node-hours at "
        f"{price.node_hour:,.4g} {price.currency} a node-hour)"
    )
