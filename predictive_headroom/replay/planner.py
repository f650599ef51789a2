"""The planner replayed minute by minute on the simulated cluster: `core.engine.PoolTimeline` as a
simulator strategy, fed the simulated nodes when the pool has a proportional rule, and the
registered components read at each minute from the replay's `Context` (`ReplayContext`: each input
from the simulated world)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import BY_CONTEXT, Part, Registration, registration
from predictive_headroom.core.context import Held, Leaving, QuotaRoom
from predictive_headroom.core.disruption import DisruptionPart
from predictive_headroom.core.engine import InForce, PoolTimeline
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import PlanSettings, resolve_settings
from predictive_headroom.core.share import SharePart
from predictive_headroom.core.vocabulary import Component, DisruptionSource, Input, Kind
from predictive_headroom.policy.config import Pool


@dataclass(frozen=True)
class SimulatedDisruption:
    """What the disruption component sees on the simulated cluster: placeholders are slot-sized,
    so the room for the leaving nodes' app pods is their count; the spot reserve uses the
    interruption rate the backtest injects (per node-hour; None: no reserve)."""

    node_slots: int
    rate_per_node_hour: float | None = None
    component: bool = True
    """False: plan without the disruption component (to price it)."""
    reserve: bool = True
    """False: plan without the spot reserve (to price it)."""


def simulated_leaving(
    pool: Pool, sim: SimulatedDisruption, nodes: int, on_leaving: int
) -> Leaving | None:
    """The nodes leaving the simulated cluster (`Context.leaving` in a replay): the room for
    `on_leaving` app pods (placeholders are slot-sized), and the spot reserve at the interruption
    rate the backtest injects (or the pool's, if larger); None when `sim` turns the component
    off."""
    if not sim.component:
        return None
    spec = pool.disruption
    leaving = -(-on_leaving // sim.node_slots)
    rate = None
    if sim.rate_per_node_hour and sim.reserve and spec.spot is not False:
        rate = max(sim.rate_per_node_hour, spec.interruption_rate or 0.0)
    staying = max(0, nodes - leaving)
    return Leaving(
        on_leaving, leaving, DisruptionSource.SIMULATED, True, rate, staying, sim.node_slots
    )


def disruption_part(
    pool: Pool, sim: SimulatedDisruption, nodes: int, on_leaving: int, settings: PlanSettings
) -> DisruptionPart | None:
    """The disruption component on the simulated cluster with the pool's `settings` (the lead
    time, the burst quantile); None when the pool or `sim` turns it off."""
    context = ReplayContext(Price(None, sim.node_slots, "USD", "no prices"), Held())
    context.disruption, context.nodes, context.on_leaving = sim, nodes, on_leaving
    return _read(Component.DISRUPTION, pool, settings, context)


def _read(name: Component, pool: Pool, settings: PlanSettings, context: ReplayContext) -> Any:
    """The registered component `name` of `pool` read from the replay's `context`."""
    read = registration(name).read
    assert read is not None
    return read(pool, settings, context)


def share_parts(pool: Pool, pods: np.ndarray, delay_steps: int) -> list[SharePart | None]:
    """The share component at every minute of a replay, from the demand series, as the replay's
    context gives what the pods request (`ReplayContext.requests`: the app pods known then, those
    `delay_steps` minutes before, times the placeholder's request; None before the first is
    known)."""
    context = ReplayContext(Price(None, 1, "USD", "no prices"), None, pods=pods)
    context.delay_steps = delay_steps
    settings = resolve_settings(pool)  # the share reads none; its delay is `delay_steps`
    reading = _context_reading(registration(Component.SHARE), pool, settings, context)
    if reading is None:
        return [None] * pods.size
    return [reading.at(i, 0, 0) for i in range(pods.size)]  # type: ignore[misc]


@dataclass(frozen=True)
class World:
    """What a replay simulates that the registered components read (its `ReplayContext`): the app
    pods per minute (None: not known) and the disruption the simulator injects (None: none, and
    the disruption component is left out)."""

    pods: np.ndarray | None = None
    disruption: SimulatedDisruption | None = None
    times: np.ndarray | None = None
    """The replay's instants (POSIX seconds; None: not known, and the budget is left out)."""
    price: Price | None = None
    """The price of the node simulated (None: no prices; a budget in node-hours still reads)."""
    node_slots: int = 8
    """Placeholders a simulated node holds."""
    held: np.ndarray | None = None
    """What the replay held at each minute before the last of `times` (a reading at that minute
    alone: the budget's spend so far); None: the readings are walked from the first minute."""


@dataclass(frozen=True)
class Reading:
    """One component read over a replay: its part at (minute, ready nodes, app pods on leaving
    nodes), None when it has none then; `needs_nodes`: it depends on the simulated nodes."""

    at: Callable[[int, int, int], Part | None]
    needs_nodes: bool = False


@dataclass
class ReplayContext:
    """A replay's `core.context.Context`: the minute planned, the node simulated (its price,
    `node_slots` placeholders a node), what the replay held before it (`held`: the plans made
    earlier, or the held counts a single minute is read after), what the app pods known then
    request (`shares`) and the nodes leaving the simulated cluster (`disruption`, with the ready
    `nodes` and the app pods `on_leaving` of the minute planned)."""

    price_of: Price
    held_so_far: Held | None
    """None: the replay's instants are not known (what was held is not either)."""
    at: float = 0.0
    minute: int = 0
    times: np.ndarray | None = None
    """The replay's instants (None: not known)."""
    pods: np.ndarray | None = None
    """The app pods at each minute (None: not known)."""
    delay_steps: int = 0
    """Minutes after which the app pods are known (the observation delay)."""
    disruption: SimulatedDisruption | None = None
    nodes: int = 0
    on_leaving: int = 0
    _requested: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict)
    _counts: list[int] | None = None

    def _known(self) -> int | None:
        """The count of app pods known at the minute planned (None: none known yet)."""
        if self.pods is None:
            return None
        if self._counts is None:
            self._counts = self.pods.tolist()
        known = self.minute - self.delay_steps
        return self._counts[known] if 0 <= known < len(self._counts) else None

    def requests(self, pool: Pool) -> Mapping[str, float] | None:
        """What the app pods known at the minute planned request (those `delay_steps` minutes
        before; the simulator's app pods are placeholder-sized)."""
        count = self._known()
        if count is None:
            return None
        key = (id(pool), count)
        if key not in self._requested:
            size = pool.placeholder.amounts
            self._requested[key] = {name: count * amount for name, amount in size.items()}
        return self._requested[key]

    def inputs_key(self, pool: Pool, reads: tuple[Input, ...]) -> tuple[Any, ...]:
        """What `reads` are at the minute planned, as a key (equal keys: the same inputs)."""
        key: list[Any] = []
        for read in reads:
            if read == Input.REQUESTS:
                key.append(self._known())
            elif read == Input.TIME:
                key.append(self.at)
            elif read != Input.PRICE:  # the node simulated is the same all along
                raise ValueError(f"{read} is read minute by minute, in order (IN_ORDER)")
        return tuple(key)

    def gives(self, read: Input) -> bool:
        """Whether the replay simulates `read` at all (else a component reading it is left out
        of the whole replay)."""
        if read == Input.REQUESTS:
            return self.pods is not None
        if read == Input.LEAVING:
            return self.disruption is not None and self.disruption.component
        if read == Input.HELD:
            return self.held_so_far is not None
        return read != Input.QUOTAS

    def quotas(self, pool: Pool) -> QuotaRoom | None:
        """Not simulated: the quota cap is left out of a replay (`Registration.replayed`)."""
        return None

    def leaving(self, pool: Pool, settings: PlanSettings) -> Leaving | None:
        """The nodes leaving the simulated cluster at the minute planned (`simulated_leaving`)."""
        if self.disruption is None:
            return None
        return simulated_leaving(pool, self.disruption, self.nodes, self.on_leaving)

    def price(self, pool: Pool) -> Price:
        """The node simulated (the same for every pool of a replay)."""
        return self.price_of

    def held(self, pool: Pool, since: float) -> float | None:
        """The node-hours held from `since` until the minute planned (None when the replay's
        instants are not known)."""
        if self.held_so_far is None:
            return None
        return self.held_so_far.seconds(since, self.at) / 3600.0 / self.price_of.slots


def replay_context(world: World) -> ReplayContext:
    """The context of a replay of `world`: its app pods, the disruption it injects, its node;
    with `world.held`, what the replay held before its last minute (a reading at that minute
    alone: the two days before it are told); without its minutes, nothing held is known (a
    component reading it is left out)."""
    price = world.price or Price(None, world.node_slots, "USD", "no prices")
    held = None if world.times is None else Held()
    if held is not None and world.times is not None and world.held is not None and world.held.size:
        times = world.times
        first = int(np.searchsorted(times, float(times[-1]) - 2 * 86400.0)) - 1
        for k in range(max(0, first), world.held.size):
            held.record(float(times[k]), int(world.held[k]))
    context = ReplayContext(
        replace(price, slots=world.node_slots), held, times=world.times, pods=world.pods
    )
    context.disruption = world.disruption
    return context


IN_ORDER = frozenset({Input.HELD, Input.LEAVING})
"""Inputs a replay gives only minute by minute, in order (what was held before; the simulated
nodes): a component reading one is read as the replay plans (`Reading.needs_nodes`)."""


def _context_reading(
    registered: Registration, pool: Pool, settings: PlanSettings, context: ReplayContext
) -> Reading | None:
    """A component read from the context at every minute (minute by minute, in order, when it
    reads an input in `IN_ORDER`); ValueError naming the pool when its section cannot be read."""
    read = registered.read
    if read is None or not registered.enabled(pool):
        return None
    if not all(context.gives(i) for i in registered.inputs):
        return None
    times = context.times

    def at(i: int, nodes: int, leaving: int) -> Part | None:
        context.minute, context.nodes, context.on_leaving = i, nodes, leaving
        if times is not None:
            context.at = float(times[i])
        try:
            return read(pool, settings, context)
        except ValueError as exc:
            raise ValueError(f"pool {pool.name}: {exc}") from None

    if IN_ORDER.intersection(registered.inputs):
        return Reading(at, True)
    seen: dict[tuple[Any, ...], Part | None] = {}

    def same_inputs_once(i: int, nodes: int, leaving: int) -> Part | None:
        """The read is pure: minutes whose inputs are the same share one part."""
        context.minute = i
        if times is not None:
            context.at = float(times[i])
        key = context.inputs_key(pool, registered.inputs)
        if key not in seen:
            seen[key] = at(i, nodes, leaving)
        return seen[key]

    return Reading(same_inputs_once)


def readings(
    pool: Pool, settings: PlanSettings, world: World, context: ReplayContext | None = None
) -> dict[str, Reading]:
    """The registered components `pool` plans with in a replay of `world`, by name, read from
    `context` (default: `replay_context(world)`)."""
    context = context or replay_context(world)
    context.delay_steps = math.ceil(settings.delay / 60.0 - 1e-9)
    found = {str(r.name): _context_reading(r, pool, settings, context) for r in BY_CONTEXT}
    return {name: r for name, r in found.items() if r is not None}


def _parts(reads: Mapping[str, Reading], i: int, nodes: int, leaving: int) -> dict[str, Part]:
    found = {name: r.at(i, nodes, leaving) for name, r in reads.items()}
    return {name: part for name, part in found.items() if part is not None}


def planner_strategy(
    pool: Pool,
    times: np.ndarray,
    forecasts: InForce,
    observed: History | None,
    cores_per_node: float,
    settings: PlanSettings,
    world: World = World(),
) -> tuple[PoolTimeline, np.ndarray | Callable[..., int]]:
    """The pool's plans at every minute of `times` as a simulator strategy, and the timeline that
    makes them (which also answers what the forecast component was at each minute).

    With a proportional rule the placeholder count depends on the simulated nodes (cores =
    nodes x `cores_per_node`), so a function of (step, ready nodes) is returned; otherwise the
    per-minute array. `settings` are the pool's (the backtest's, flags applied). The registered
    components are read from `world` (its `replay_context`: the app pods, the disruption injected, what the plans
    made earlier held); when the simulator injects disruption, a function of (step, ready nodes,
    app pods on leaving nodes)."""
    timeline = PoolTimeline(pool, times, list(forecasts), observed, (), settings)
    context = replay_context(world)
    reads = readings(pool, settings, world, context)
    holds = any(r.enabled(pool) and Input.HELD in r.inputs for r in BY_CONTEXT)
    held = context.held_so_far if holds else None

    def cluster(nodes: int) -> ClusterState | None:
        cores = nodes * cores_per_node
        return ClusterState(nodes, cores, nodes, cores) if pool.proportional else None

    def aware(i: int, nodes: int, on_leaving: int = 0) -> int:
        desired = timeline.plan(i, cluster(nodes), _parts(reads, i, nodes, on_leaving)).desired
        if held is not None:  # what the pool holds from this minute, for the context
            held.record(float(times[i]), desired)
        return desired

    if world.disruption is not None:
        return timeline, aware
    if any(r.needs_nodes for r in reads.values()):
        return timeline, lambda i, nodes: aware(i, nodes)
    floors = _floors(reads, times.size)
    if pool.proportional is not None:
        stepper = timeline.desired_with_cluster(floors)
        if stepper is None:
            return timeline, lambda i, nodes: aware(i, nodes)
        return timeline, lambda i, nodes: stepper(i, cluster(nodes))
    desired = timeline.desired_at_once(floors)
    if desired is None:
        parts = [_parts(reads, i, 0, 0) for i in range(times.size)] if reads else []
        desired = np.fromiter(
            (
                timeline.plan(i, None, parts[i] if parts else None).desired
                for i in range(times.size)
            ),
            dtype=np.int64,
            count=times.size,
        )
    return timeline, desired


def _floors(reads: Mapping[str, Reading], n: int) -> np.ndarray | None:
    """The largest floor among the components `reads` at each of `n` minutes (none of them
    depending on the simulated nodes), as `PoolTimeline.desired_at_once` is given them; None
    when no component has a part at any minute."""
    parts = [_parts(reads, i, 0, 0) for i in range(n)] if reads else []
    floors = [
        max(
            (p.replicas or 0 for name, p in at.items() if registration(name).kind == Kind.FLOOR),
            default=0,
        )
        for at in parts
    ]
    return np.array(floors, dtype=np.int64) if any(parts) else None


def replay_parts(
    pool: Pool,
    pods: np.ndarray,
    i: int,
    settings: PlanSettings,
    node_slots: int,
    nodes: int,
    held: tuple[np.ndarray, np.ndarray, Price | None] | None = None,
) -> dict[str, Part]:
    """Every registered component of `pool` at minute `i` of a replay, as the daemon would read
    it there: the share from the app pods known then (`pods`: per minute), the disruption
    component on `nodes` simulated nodes of `node_slots` placeholders, none leaving, with the
    pool's own interruption rate for the spot reserve, and the budget from what the replay held
    earlier that day (`held`: the minutes, the placeholders held at each, the node's price;
    None leaves the budget out); `settings` are those it plans with."""
    sim = SimulatedDisruption(node_slots, pool.disruption.interruption_rate)
    world = World(pods[: i + 1], sim, node_slots=node_slots)
    if held is not None:
        times, counts, price = held
        world = replace(world, times=times[: i + 1], price=price, held=counts[:i])
    return _parts(readings(pool, settings, world), i, nodes, 0)
