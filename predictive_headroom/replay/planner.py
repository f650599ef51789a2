"""The planner replayed minute by minute on the simulated cluster: `core.engine.PoolTimeline` as a
simulator strategy, fed the simulated nodes when the pool has a proportional rule."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import BY_CONTEXT, Part, Registration, registration
from predictive_headroom.core.context import Held
from predictive_headroom.core.disruption import DisruptionPart, reserve_quantile, spot_reserve
from predictive_headroom.core.engine import InForce, PoolTimeline
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.share import SharePart, share_part
from predictive_headroom.core.vocabulary import Component, DisruptionSource, Kind
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


def disruption_part(
    pool: Pool, sim: SimulatedDisruption, nodes: int, on_leaving: int, settings: PlanSettings
) -> DisruptionPart | None:
    """The disruption component on the simulated cluster with the pool's `settings` (the lead
    time, the burst quantile); None when the pool or `sim` turns it off."""
    spec = pool.disruption
    if not spec.enabled or not sim.component:
        return None
    leaving = -(-on_leaving // sim.node_slots)
    reserve = 0
    if sim.rate_per_node_hour and sim.reserve and spec.spot is not False:
        rate = max(sim.rate_per_node_hour, spec.interruption_rate or 0.0)
        staying = max(0, nodes - leaving)
        quantile = reserve_quantile(settings)
        reserve = spot_reserve(rate, staying, settings.lead, sim.node_slots, quantile)[0]
    return DisruptionPart(on_leaving, reserve, leaving, DisruptionSource.SIMULATED)


def share_parts(pool: Pool, pods: np.ndarray, delay_steps: int) -> list[SharePart | None]:
    """The share component at every minute of a replay, from the demand series: the app pods
    known then (those `delay_steps` minutes before, the observation delay; None before the first
    is known) times their request, which is the placeholder's (the simulator's app pods and
    placeholders are the same size, one slot)."""
    size = pool.placeholder.amounts
    by_count: dict[int, SharePart] = {}
    out: list[SharePart | None] = [None] * min(delay_steps, pods.size)
    for count in pods[: max(0, pods.size - delay_steps)].tolist():
        if count not in by_count:
            requested = {name: int(count) * amount for name, amount in size.items()}
            by_count[count] = share_part(pool.share, requested, size)
        out.append(by_count[count])
    return out


@dataclass(frozen=True)
class World:
    """What a replay simulates that the registered components read (`REPLAY_READERS`): the app
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


ReplayReader = Callable[[Pool, PlanSettings, World], Reading | None]
"""What reads one registered component in a replay: None when the pool or the replay leaves it
out."""


def _share_reader(pool: Pool, settings: PlanSettings, world: World) -> Reading | None:
    """The share component at every minute: the app pods known then (`share_parts`)."""
    if world.pods is None or not pool.share.enabled:
        return None
    shares = share_parts(pool, world.pods, math.ceil(settings.delay / 60.0 - 1e-9))
    return Reading(lambda i, _nodes, _leaving: shares[i])


def _disruption_reader(pool: Pool, settings: PlanSettings, world: World) -> Reading | None:
    """The disruption component on the simulated nodes, when the simulator injects disruption."""
    sim = world.disruption
    if sim is None or not pool.disruption.enabled or not sim.component:
        return None
    return Reading(
        lambda _i, nodes, leaving: disruption_part(pool, sim, nodes, leaving, settings), True
    )


@dataclass
class ReplayContext:
    """A replay's `core.context.Context`: the minute planned, the node simulated (its price,
    `node_slots` placeholders a node) and what the replay held before it (`held`: the plans made
    earlier, or the held counts a single minute is read after)."""

    price_of: Price
    held_so_far: Held
    at: float = 0.0

    def price(self, pool: Pool) -> Price:
        """The node simulated (the same for every pool of a replay)."""
        return self.price_of

    def held(self, pool: Pool, since: float) -> float | None:
        """The node-hours held from `since` until the minute planned."""
        return self.held_so_far.seconds(since, self.at) / 3600.0 / self.price_of.slots


def replay_context(world: World) -> ReplayContext | None:
    """The context of a replay of `world` (None without its minutes: the components read from
    it are left out); with `world.held`, what the replay held before its last minute (a reading
    at that minute alone: the two days before it are told)."""
    if world.times is None:
        return None
    price = world.price or Price(None, world.node_slots, "USD", "no prices")
    held = Held()
    if world.held is not None and world.held.size:
        times = world.times
        first = int(np.searchsorted(times, float(times[-1]) - 2 * 86400.0)) - 1
        for k in range(max(0, first), world.held.size):
            held.record(float(times[k]), int(world.held[k]))
    return ReplayContext(replace(price, slots=world.node_slots), held)


def _context_reading(
    registered: Registration,
    pool: Pool,
    settings: PlanSettings,
    times: np.ndarray,
    context: ReplayContext,
) -> Reading | None:
    """A component read from the context at every minute (planned minute by minute, in order:
    `needs_nodes`); ValueError naming the pool when its section cannot be read."""
    read = registered.read
    if read is None or not registered.enabled(pool):
        return None

    def at(i: int, _nodes: int, _leaving: int) -> Part | None:
        context.at = float(times[i])
        try:
            return read(pool, settings, context)
        except ValueError as exc:
            raise ValueError(f"pool {pool.name}: {exc}") from None

    return Reading(at, True)


REPLAY_READERS: dict[Component, ReplayReader] = {
    Component.DISRUPTION: _disruption_reader,
    Component.SHARE: _share_reader,
}
"""What reads each registered component a shell reads (`core.components.BY_SHELL`) in a replay, by
name (a test checks every one has a reader), as `daemon.components` does in the daemon and
`commands.components` on the command line."""


def readings(
    pool: Pool, settings: PlanSettings, world: World, context: ReplayContext | None = None
) -> dict[str, Reading]:
    """The registered components `pool` plans with in a replay of `world`, by name (those read
    from the context from `context`; default: `replay_context(world)`)."""
    found = {str(name): read(pool, settings, world) for name, read in REPLAY_READERS.items()}
    context = context or replay_context(world)
    if context is not None and world.times is not None:
        for r in BY_CONTEXT:
            found[str(r.name)] = _context_reading(r, pool, settings, world.times, context)
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
    components are read from `world` (`REPLAY_READERS`, and its `replay_context`: what the plans
    made earlier held); when the simulator injects disruption, a function of (step, ready nodes,
    app pods on leaving nodes)."""
    timeline = PoolTimeline(pool, times, list(forecasts), observed, (), settings)
    context = replay_context(world)
    reads = readings(pool, settings, world, context)
    held = context.held_so_far if context and any(r.enabled(pool) for r in BY_CONTEXT) else None

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
