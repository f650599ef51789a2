"""The daemon's `core.context.Context` (`DaemonContext`: each input the registered components
read, given once from the daemon's reads) and what keeps each component's last part for
`/last-run` and the report (`ContextWatch`, the same for every component).

`watches` builds one `ContextWatch` per component read at each instant, all on one context; the
reconcile, the report hook and `/last-run` iterate them (`parts_of`, `last_parts`, `status`)
instead of naming them. No component has code here: each is its registration's own `read`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from predictive_headroom.core.budget import day_of
from predictive_headroom.core.components import BY_CONTEXT, Part, Registration
from predictive_headroom.core.context import Held, Leaving, NotRead, QuotaRoom
from predictive_headroom.core.disruption import sum_requests
from predictive_headroom.core.price import Price, pool_price
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import Input
from predictive_headroom.daemon.closedloop import pool_node_selector
from predictive_headroom.daemon.disruption import DisruptionSettings, DisruptionWatch
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
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

logger = logging.getLogger(__name__)


HOUR = 3600.0
KEPT = 2 * 86400.0
"""Seconds of each pool's own plans the daemon keeps for the `Context` (a day is at most 25
hours; a count is kept once until it changes)."""


@dataclass(frozen=True)
class ClusterReads:
    """What the daemon's context reads the cluster through: the pools' node lists (`Inputs`),
    the nodes on their way out with the pods on them (`DisruptionWatch`) and the namespaces'
    ResourceQuotas (`QuotaReader`)."""

    inputs: Inputs
    disruption: DisruptionWatch
    quotas: QuotaReader | None = None


@runtime_checkable
class QuotaReader(Protocol):
    """What the daemon reads a pool's namespace's ResourceQuotas through (`kube.watched`)."""

    def quota_room(self, pool: Pool) -> QuotaRoom:
        """The quotas of `pool`'s target namespace and what its own placeholders use of them."""
        ...


class DaemonContext:
    """The daemon's `core.context.Context`: the reconcile's instant, the node priced from the
    policy's `cost:` now, what each pool held, from the daemon's own plans (dry run included)
    and, after a restart or a takeover, from the spend the last leader kept on the Lease
    (`daemon.spend`: `resume`, `spent`), what the pods on each pool's nodes request and its
    nodes on their way out (`reads`; None: not read, components reading them left out)."""

    def __init__(
        self,
        cost: Callable[[], Cost | None],
        at: float = 0.0,
        reads: ClusterReads | None = None,
        keeper: SpendKeeper | None = None,
    ) -> None:
        self._cost = cost
        self.at = at
        self.reads = reads
        self.keeper = keeper
        """Reads and keeps the day's spend on the leader Lease (None: in memory only)."""
        self._held: dict[str, Held] = {}
        self._carried: dict[str, Spent] = {}
        """Per pool: what the record said was held from its day's start until its instant."""
        self._budgeted: dict[str, tuple[str, float]] = {}
        """Per budgeted pool: its budget's time zone and the instant of its last plan."""
        self._notes: dict[str, str] = {}
        """Per pool: how old the pods its requests were read from are (the pod list's note)."""
        self._lock = threading.Lock()

    def instant(self, at: float) -> DaemonContext:
        """The context at `at` (sharing what was held: pools reconciled at once each get one)."""
        view = DaemonContext(self._cost, at, self.reads, self.keeper)
        view._held, view._carried, view._budgeted = self._held, self._carried, self._budgeted
        view._notes, view._lock = self._notes, self._lock
        return view

    def begin(self, deadline: float) -> None:
        """A new reconcile, to be done by `deadline` (monotonic): the pods are listed afresh and,
        on a takeover, the day's spend is read from the record the last leader kept."""
        if self.reads is not None:
            self.reads.disruption.begin(deadline)
        if self.keeper is not None:
            self.keeper.begin(self)

    def requests(self, pool: Pool) -> Mapping[str, float] | None:
        """What the pods on `pool`'s nodes request (one pod list a reconcile, shared); NotRead
        saying why when the nodes or the pods cannot be had."""
        if self.reads is None:
            return None
        try:
            nodes = self.reads.inputs.nodes(pool_node_selector(pool)).nodes
        except Exception as exc:  # counted by Inputs as a cluster error
            raise NotRead(f"the pool's nodes could not be listed ({exc})") from None
        listed, note = self.reads.disruption.pods_now()
        if listed is None:
            raise NotRead(note or "pods could not be listed")
        with self._lock:
            if note:
                self._notes[pool.name] = note
            else:
                self._notes.pop(pool.name, None)
        on_pool = (p.requests for n in nodes for p in listed.get(n.name, ()) if not p.excluded)
        return sum_requests(on_pool)

    def leaving(self, pool: Pool, settings: PlanSettings) -> Leaving | None:
        """`pool`'s nodes on their way out now (`DisruptionWatch.leaving`)."""
        if self.reads is None:
            return None
        return self.reads.disruption.leaving(pool, self.at, settings.lead)

    def quotas(self, pool: Pool) -> QuotaRoom | None:
        """The ResourceQuotas of `pool`'s namespace and its own placeholder pods, from their
        watch caches (`QuotaReader`); None: not read; NotRead saying why they cannot be had."""
        if self.reads is None or self.reads.quotas is None:
            return None
        try:
            return self.reads.quotas.quota_room(pool)
        except Exception as exc:  # the API server refused, or the cache cannot answer
            raise NotRead(f"the ResourceQuotas could not be read ({exc})") from None

    def input_status(self, read: Input, name: str) -> dict[str, Any]:
        """What /last-run shows of input `read` for pool `name`, beside its component's part."""
        if read == Input.HELD and self.keeper is not None:
            return {"record": self.keeper.status()}
        if read == Input.LEAVING and self.reads is not None:
            return self.reads.disruption.status_of(name)
        if read == Input.REQUESTS and name in self._notes:
            return {"note": self._notes[name]}
        return {}

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
        """Record the plan made for `pool` at `at` (it holds `desired` from then on; every
        pool's: what it held is counted whether or not a component reading it was on then), and
        keep the day's spend for the next leader."""
        held = self._held.setdefault(pool.name, Held())
        held.record(at, desired)
        held.forget_before(at - KEPT)
        if pool.budget is not None:
            self._budgeted[pool.name] = (pool.budget.timezone, at)
        if self.keeper is not None:
            self.keeper.after(self, at)

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
        """Drop what removed pools held and what was seen of their nodes."""
        for name in names:
            self._held.pop(name, None)
            self._carried.pop(name, None)
            self._budgeted.pop(name, None)
            self._notes.pop(name, None)
        if self.reads is not None:
            self.reads.disruption.forget(names)


class ContextWatch:
    """A component read from the `DaemonContext` by its registration's own `read`, with its last
    part per pool and why a pool's was left out (both said on `/last-run`)."""

    def __init__(self, registered: Registration, context: DaemonContext) -> None:
        self.registered = registered
        self.context = context
        self._parts: dict[str, Part] = {}
        self._problems: dict[str, str] = {}
        self._lock = threading.Lock()
        """Pools are reconciled concurrently; `/last-run` reads from another thread."""

    def begin(self, deadline: float) -> None:
        """A new reconcile (the context's: once, whichever component's watch asks first)."""
        self.context.begin(deadline)

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> Part | None:
        """The component of `pool` at `at` (None: off, left out, or unreadable)."""
        with self._lock:
            self._parts.pop(pool.name, None)
            was = self._problems.pop(pool.name, None)
        if not self.registered.enabled(pool) or self.registered.read is None:
            return None
        try:
            part = self.registered.read(pool, settings, self.context.instant(at))
        except (ValueError, NotRead) as exc:
            if isinstance(exc, NotRead) and str(exc) != was:
                logger.warning(
                    "pool %s: the %s component is left out: %s",
                    pool.name,
                    self.registered.name,
                    exc,
                )
            with self._lock:
                self._problems[pool.name] = str(exc)
            return None
        if part is not None:
            with self._lock:
                self._parts[pool.name] = part
        return part

    def parts(self) -> Mapping[str, Part]:
        """The last part of each pool."""
        with self._lock:
            return dict(self._parts)

    def status(self) -> dict[str, Any]:
        """Per pool: what the part shows (`to_status`, else its value and details) and what its
        inputs show, or why it could not be read."""
        with self._lock:
            parts, problems = dict(self._parts), dict(self._problems)
        out: dict[str, Any] = {n: {"left_out": why} for n, why in problems.items()}
        for name, part in parts.items():
            shown = getattr(part, "to_status", None)
            out[name] = shown() if shown else {"replicas": part.replicas, **part.to_details()}
            for read in self.registered.inputs:
                out[name].update(self.context.input_status(read, name))
        return out

    def forget(self, names: Collection[str]) -> None:
        """Drop what was kept of removed pools."""
        self.context.forget(names)
        with self._lock:
            for name in names:
                self._parts.pop(name, None)
                self._problems.pop(name, None)


@dataclass(frozen=True)
class Readers:
    """Everything the components' inputs are read through in the daemon, in one value (built
    once by the shell, `commands.run.build_daemon`, or by a test)."""

    inputs: Inputs
    """The pools' node lists (and the demand source's observations), counted on `metrics`."""
    metrics: Metrics
    pods: NodePodReader | None = None
    """The cluster's pods by node (None: not read); when it reads them too, the target
    namespaces' ResourceQuotas (`QuotaReader`; else the quota cap is left out)."""
    read_pods: bool = False
    """Whether the pods on leaving nodes may be listed (`PH_DISRUPTION_READ_PODS`)."""
    monotonic: Callable[[], float] = time.monotonic
    """The clock a reconcile's deadline is on."""
    cost: Callable[[], Cost | None] = lambda: None
    """The policy's `cost:` section now (the node's price)."""
    spend: SpendStore | None = None
    """Where the day's spend is kept for the next leader (the leader Lease; None: memory)."""


def watches(readers: Readers) -> Watches:
    """One `ContextWatch` per component read at each instant, by name, all on one
    `DaemonContext` reading through `readers` (a test checks every component has a watch)."""
    disruption = DisruptionWatch(
        readers.inputs,
        readers.pods,
        readers.metrics,
        DisruptionSettings(read_pods=readers.read_pods),
        readers.monotonic,
    )
    keeper = SpendKeeper(readers.spend) if readers.spend is not None else None
    quotas = readers.pods if isinstance(readers.pods, QuotaReader) else None
    reads = ClusterReads(readers.inputs, disruption, quotas)
    context = DaemonContext(readers.cost, reads=reads, keeper=keeper)
    return {str(r.name): ContextWatch(r, context) for r in BY_CONTEXT}


def context_of(watches: Watches) -> DaemonContext | None:
    """The context the watches read from (None: no component is read at each instant)."""
    return next((w.context for w in watches.values() if isinstance(w, ContextWatch)), None)


def disruption_of(watches: Watches) -> DisruptionWatch:
    """The watch of the nodes on their way out the watches' context reads from."""
    context = context_of(watches)
    assert context is not None and context.reads is not None
    return context.reads.disruption


def planned(watches: Watches, pool: Pool, at: float, desired: int) -> None:
    """Tell the context the plan made for `pool` at `at` (what the pool holds from then on)."""
    context = context_of(watches)
    if context is not None:
        context.planned(pool, at, desired)


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
