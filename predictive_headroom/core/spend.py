"""What a policy can cost a day, said before `dryRun=false` (issue 62, item 2 and its bad input):
per pool the most its headroom can hold (maxReplicas all day, or the budget when it binds), what
`minReplicas` holds all day, and a budget that cannot cover the floor.

Placeholders are counted as every page counts them (`core.price`: a placeholder keeps its share of
a node warm, `slots` to a node): N placeholders all day are 24 x N / slots overhead node-hours.
Pure: no clock, no I/O.
"""

from __future__ import annotations

from predictive_headroom.core.budget import daily_budget
from predictive_headroom.core.price import Price, pool_price
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.lint import Finding, Level


def all_day(replicas: int, price: Price) -> float:
    """Overhead node-hours `replicas` placeholders hold over a whole day."""
    return 24.0 * replicas / price.slots


def _money(node_hours: float, price: Price) -> str:
    text = price.text(node_hours)
    return f" ({text})" if text else ""


def pool_spend(pool: Pool, price: Price, at: str) -> list[Finding]:
    """The findings of one pool (`at`: its field path): a note of what it can cost a day, and a
    warning when its budget is below what `minReplicas` holds all day."""
    slots = f"{price.slots} to a node"
    most = all_day(pool.max_replicas, price)
    budget = None
    if pool.budget is not None:
        try:
            budget = daily_budget(pool.budget, price)
        except ValueError:  # the policy's own check names it
            budget = None
    out = []
    floor = all_day(pool.min_replicas, price)
    if budget is not None and pool.min_replicas and floor > budget.node_hours + 1e-9:
        out.append(
            Finding(
                f"{at}.budget",
                f"{budget.given} is less than minReplicas {pool.min_replicas} holds all day "
                f"({pool.min_replicas} placeholders of {slots}: {floor:,.1f} overhead node-hours "
                f"a day{_money(floor, price)}): the budget binds below the floor every day; raise "
                "the budget or lower minReplicas",
            )
        )
    capped = (
        f"; the budget caps it at {budget.given}"
        if budget is not None and budget.node_hours < most
        else (
            "; no budget: caps it (`predictive-headroom tune --budget` pastes one)"
            if budget is None
            else ""
        )
    )
    out.append(
        Finding(
            at,
            f"at most {pool.max_replicas:,} placeholders of {slots} (maxReplicas) "
            f"cost up to {most:,.1f} overhead node-hours a day{_money(most, price)}{capped}; "
            "`predictive-headroom plan` says what it will hold",
            Level.NOTE,
        )
    )
    return out


def policy_spend(policy: Policy) -> list[Finding]:
    """`pool_spend` of every pool, each priced by the policy's `cost:` (`core.price.pool_price`)."""
    return [
        finding
        for i, pool in enumerate(policy.pools)
        for finding in pool_spend(pool, pool_price(pool, policy.cost), f"pools[{i}]")
    ]


def adoption_budget(pool: Pool, replicas: int, price: Price) -> str | None:
    """For a pool that adopts an existing Deployment (`placeholder.existing`) and sets no
    `budget:`, the warning naming what its live `replicas` spend a day and the `budget:` to paste
    so the daemon never holds more; None for any other pool."""
    if not pool.placeholder.existing or pool.budget is not None or replicas <= 0:
        return None
    spend = all_day(replicas, price)
    return (
        f"pool {pool.name} adopts {pool.target.namespace}/{pool.target.name} with no budget: its "
        f"live {replicas} placeholders ({price.slots} to a node) spend {spend:,.1f} overhead "
        f"node-hours a day{_money(spend, price)}; to never hold more than you spend today, paste "
        f"into the pool: budget: {{nodeHoursPerDay: {spend:.4g}}}"
    )
