"""The daemon's reader of each registered component (`core.components.REGISTRY`), in one place.

A `ComponentWatch` reads what its component needs at each reconcile and keeps what `/last-run`
and the report show (a component read from the `core.context.Context` has a `ContextWatch`,
the same for each); `watches` builds one per registered name, and the reconcile, the report
hook and `/last-run` iterate them (`parts_of`, `last_parts`, `status`) instead of naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from predictive_headroom.core.budget import day_of
from predictive_headroom.core.components import BY_CONTEXT, Part, Registration
from predictive_headroom.core.context import Held
from predictive_headroom.core.price import Price, pool_price
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import Component
from predictive_headroom.daemon.disruption import DisruptionSettings, DisruptionWatch
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.share import ShareWatch
from predictive_headroom.daemon.spend import SpendKeeper, SpendStore, Spent
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


HOUR = 3600.0
KEPT = 2 * 86400.0
"""Seconds of each pool's own plans the daemon keeps for the `Context` (a day is at most 25
hours; a count is kept once until it changes)."""


class DaemonContext:
    """The daemon's `core.context.Context`: the reconcile's instant, the node priced from the
    policy's `cost:` now, and what each pool held, from the daemon's own plans (dry run included)
    and, after a restart or a takeover, from the spend the last leader kept on the Lease
    (`daemon.spend`: `resume`, `spent`)."""

    def __init__(self, cost: Callable[[], Cost | None], at: float = 0.0) -> None:
        self._cost = cost
        self.at = at
        self._held: dict[str, Held] = {}
        self._carried: dict[str, Spent] = {}
        """Per pool: what the record said was held from its day's start until its instant."""
        self._budgeted: dict[str, tuple[str, float]] = {}
        """Per budgeted pool: its budget's time zone and the instant of its last plan."""

    def instant(self, at: float) -> DaemonContext:
        """The context at `at` (sharing what was held: pools reconciled at once each get one)."""
        view = DaemonContext(self._cost, at)
        view._held, view._carried, view._budgeted = self._held, self._carried, self._budgeted
        return view

    def price(self, pool: Pool) -> Price:
        """The node `pool` is priced on, from the policy's `cost:` now."""
        return pool_price(pool, self._cost())

    def _seconds(self, name: str, since: float, until: float) -> float:
        """Placeholder-seconds `name` held from `since` until `until`: its plans, plus the
        record's seconds when `since` is the start of the record's day."""
        seconds = self._held.get(name, Held()).seconds(since, until)
        carried = self._carried.get(name)
        if carried is not None and abs(carried.day - since) < 1.0:
            seconds += carried.seconds
        return seconds

    def held(self, pool: Pool, since: float) -> float | None:
        """The node-hours `pool` held from `since` until `at`, by the daemon's own plans (and
        the record it resumed from)."""
        return self._seconds(pool.name, since, self.at) / HOUR / self.price(pool).slots

    def planned(self, pool: Pool, at: float, desired: int) -> None:
        """Record the plan made for `pool` at `at` (it holds `desired` from then on)."""
        held = self._held.setdefault(pool.name, Held())
        held.record(at, desired)
        held.forget_before(at - KEPT)
        if pool.budget is not None:
            self._budgeted[pool.name] = (pool.budget.timezone, at)

    def spent(self) -> dict[str, Spent]:
        """Each budgeted pool's spend of its day until its last plan (for the record)."""
        out: dict[str, Spent] = {}
        for name, (zone, at) in self._budgeted.items():
            day = day_of(at, zone).start
            latest = self._held[name].latest() if name in self._held else 0
            out[name] = Spent(day, at, self._seconds(name, day, at), latest)
        return out

    def resume(self, spent: Mapping[str, Spent]) -> None:
        """Count each pool of `spent` from the record: its seconds up to its instant, then the
        count held then until the next plan (the placeholders kept running meanwhile)."""
        for name, carried in spent.items():
            held = Held()
            held.record(carried.at, carried.replicas)
            self._held[name], self._carried[name] = held, carried

    def forget(self, names: Collection[str]) -> None:
        """Drop what removed pools held."""
        for name in names:
            self._held.pop(name, None)
            self._carried.pop(name, None)
            self._budgeted.pop(name, None)


class ContextWatch:
    """A component read from the `DaemonContext` (`Feed.CONTEXT`), by its registration's own
    `read`; why a pool's could not be read is said on `/last-run`."""

    def __init__(
        self, registered: Registration, context: DaemonContext, keeper: SpendKeeper | None = None
    ) -> None:
        """`keeper` reads and keeps the day's spend on the leader Lease (None: in memory only)."""
        self.registered = registered
        self.context = context
        self.keeper = keeper
        self._parts: dict[str, Part] = {}
        self._problems: dict[str, str] = {}

    def begin(self, deadline: float) -> None:
        """Nothing to read but, on a takeover, the spend the last leader kept (`keeper`)."""
        if self.keeper is not None:
            self.keeper.begin(self.context)

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> Part | None:
        """The component of `pool` at `at` (None: off, left out, or unreadable)."""
        self._problems.pop(pool.name, None)
        self._parts.pop(pool.name, None)
        if not self.registered.enabled(pool) or self.registered.read is None:
            return None
        try:
            part = self.registered.read(pool, settings, self.context.instant(at))
        except ValueError as exc:
            self._problems[pool.name] = str(exc)
            return None
        if part is not None:
            self._parts[pool.name] = part
        return part

    def planned(self, pool: Pool, at: float, desired: int) -> None:
        """Tell the context the plan made for `pool` (every pool's: what it held is counted
        whether or not the component was on then)."""
        self.context.planned(pool, at, desired)
        if self.keeper is not None:
            self.keeper.after(self.context, at)

    def parts(self) -> Mapping[str, Part]:
        """The last part of each pool."""
        return dict(self._parts)

    def status(self) -> dict[str, Any]:
        """Per pool: what the part shows (`to_status`, else its value and details), or why it
        could not be read."""
        out: dict[str, Any] = {n: {"left_out": why} for n, why in self._problems.items()}
        for name, part in self._parts.items():
            shown = getattr(part, "to_status", None)
            out[name] = shown() if shown else {"value": part.replicas, **part.to_details()}
            if self.keeper is not None:
                out[name]["record"] = self.keeper.status()
        return out

    def forget(self, names: Collection[str]) -> None:
        """Drop what was kept of removed pools."""
        self.context.forget(names)
        for name in names:
            self._parts.pop(name, None)
            self._problems.pop(name, None)


def watches(
    inputs: Inputs,
    pods: NodePodReader | None,
    metrics: Metrics,
    read_pods: bool,
    monotonic: Callable[[], float],
    cost: Callable[[], Cost | None] = lambda: None,
    spend: SpendStore | None = None,
) -> Watches:
    """One watch per component read at each instant, by name (a test checks every one has a
    watch): the shell's own readers, and one `ContextWatch` for each read from the context;
    `cost` gives the policy's `cost:` section now (the node's price); `spend` is where the day's
    spend is kept for the next leader (the leader Lease; None: in memory only)."""
    disruption = DisruptionWatch(
        inputs, pods, metrics, DisruptionSettings(read_pods=read_pods), monotonic
    )
    context = DaemonContext(cost)
    keeper = SpendKeeper(spend) if spend is not None else None
    return {
        str(Component.DISRUPTION): disruption,
        str(Component.SHARE): ShareWatch(inputs, disruption),
        **{str(r.name): ContextWatch(r, context, keeper) for r in BY_CONTEXT},
    }


def planned(watches: Watches, pool: Pool, at: float, desired: int) -> None:
    """Tell each watch that counts what was held the plan made for `pool` at `at`."""
    for watch in watches.values():
        heard = getattr(watch, "planned", None)
        if heard is not None:
            heard(pool, at, desired)


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
