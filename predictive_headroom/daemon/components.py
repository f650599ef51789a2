"""The daemon's reader of each registered component (`core.components.REGISTRY`), in one place.

A `ComponentWatch` reads what its component needs at each reconcile and keeps what `/last-run`
and the report show; `watches` builds one per registered name, and the reconcile, the report
hook and `/last-run` iterate them (`parts_of`, `last_parts`, `status`) instead of naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from predictive_headroom.core.budget import BudgetPart, Ledger, budget_part, daily_budget
from predictive_headroom.core.components import Part
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import Component
from predictive_headroom.daemon.disruption import DisruptionSettings, DisruptionWatch
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.share import ShareWatch
from predictive_headroom.policy.config import Cost, Pool
from predictive_headroom.protocols import NodePodReader


class ComponentWatch(Protocol):
    """What reads one component's inputs in the daemon."""

    def begin(self, deadline: float) -> None:
        """A new reconcile, to be done by `deadline` (monotonic)."""
        ...

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> Part | None:
        """The component of `pool` at `at`; None: left out of the plan (off, or unreadable)."""
        ...

    def parts(self) -> Mapping[str, Part]:
        """The last part of each pool, by pool name."""
        ...

    def status(self) -> dict[str, Any]:
        """Per pool, what `/last-run` shows."""
        ...

    def forget(self, names: Collection[str]) -> None:
        """Drop what was kept of removed pools."""
        ...


Watches = dict[str, ComponentWatch]


class BudgetWatch:
    """The budget in the daemon: what each pool held since midnight, from the daemon's own plans
    (each plan made with the budget's part is recorded in the pool's ledger, dry run included).
    Kept in memory: after a restart the day is counted from the restart."""

    def __init__(self, cost: Callable[[], Cost | None]) -> None:
        self._cost = cost
        """The policy's `cost:` section now (it prices the node-hours a budget in money buys)."""
        self._ledgers: dict[str, Ledger] = {}
        self._parts: dict[str, BudgetPart] = {}
        self._problems: dict[str, str] = {}

    def begin(self, deadline: float) -> None:
        """Nothing to read: the spend is the daemon's own."""

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> Part | None:
        """The budget of `pool` at `at` (None without a `budget:` section, or when it cannot be
        priced: said on `/last-run`)."""
        self._problems.pop(pool.name, None)
        if pool.budget is None:
            self.forget([pool.name])
            return None
        try:
            budget = daily_budget(pool.budget, pool_price(pool, self._cost()))
        except ValueError as exc:
            self._problems[pool.name] = str(exc)
            return None
        ledger = self._ledgers.get(pool.name)
        if ledger is None or ledger.zone != budget.zone:
            ledger = self._ledgers[pool.name] = Ledger(budget.zone)
        part = self._parts[pool.name] = budget_part(budget, at, ledger=ledger)
        return part

    def parts(self) -> Mapping[str, Part]:
        """The last part of each pool with a budget."""
        return dict(self._parts)

    def status(self) -> dict[str, Any]:
        """Per pool: the budget in words, the day's spend and what is left (node-hours), the cap
        now, or why it could not be priced."""
        out: dict[str, Any] = {n: {"left_out": why} for n, why in self._problems.items()}
        for name, part in self._parts.items():
            out[name] = {"budget": part.budget.given, "cap": part.replicas, **part.to_details()}
        return out

    def forget(self, names: Collection[str]) -> None:
        """Drop the ledgers of removed pools."""
        for name in names:
            self._ledgers.pop(name, None)
            self._parts.pop(name, None)


def watches(
    inputs: Inputs,
    pods: NodePodReader | None,
    metrics: Metrics,
    read_pods: bool,
    monotonic: Callable[[], float],
    cost: Callable[[], Cost | None] = lambda: None,
) -> Watches:
    """One watch per registered component, by name (a test checks every one has a watch);
    `cost` gives the policy's `cost:` section now (the budget's price)."""
    disruption = DisruptionWatch(
        inputs, pods, metrics, DisruptionSettings(read_pods=read_pods), monotonic
    )
    return {
        str(Component.DISRUPTION): disruption,
        str(Component.SHARE): ShareWatch(inputs, disruption),
        str(Component.BUDGET): BudgetWatch(cost),
    }


def parts_of(watches: Watches, pool: Pool, at: float, settings: PlanSettings) -> dict[str, Part]:
    """Each component of `pool` now that could be had, by name."""
    found = {name: w.part(pool, at, settings) for name, w in watches.items()}
    return {name: part for name, part in found.items() if part is not None}


def last_parts(watches: Watches) -> dict[str, dict[str, Part]]:
    """Each pool's last parts, by pool then component name (for the report)."""
    out: dict[str, dict[str, Part]] = {}
    for name, watch in watches.items():
        for pool, part in watch.parts().items():
            out.setdefault(pool, {})[name] = part
    return out
