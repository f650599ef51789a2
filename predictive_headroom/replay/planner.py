"""The planner replayed minute by minute on the simulated cluster: `core.engine.PoolTimeline` as a
simulator strategy, fed the simulated nodes when the pool has a proportional rule."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import Part
from predictive_headroom.core.disruption import DisruptionPart, reserve_quantile, spot_reserve
from predictive_headroom.core.engine import InForce, PoolTimeline
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.share import SharePart, share_part
from predictive_headroom.core.vocabulary import Component, DisruptionSource
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


# Many arguments on purpose: the pool, its grid and forecasts, and each simulated input named.
def planner_strategy(
    pool: Pool,
    times: np.ndarray,
    forecasts: InForce,
    observed: History | None,
    cores_per_node: float,
    settings: PlanSettings,
    disruption: SimulatedDisruption | None = None,
    pods: np.ndarray | None = None,
) -> tuple[PoolTimeline, np.ndarray | Callable[..., int]]:
    """The pool's plans at every minute of `times` as a simulator strategy, and the timeline that
    makes them (which also answers what the forecast component was at each minute).

    With a proportional rule the placeholder count depends on the simulated nodes (cores =
    nodes x `cores_per_node`), so a function of (step, ready nodes) is returned; otherwise the
    per-minute array. `settings` are the pool's (the backtest's, flags applied). With
    `disruption` (the simulator injects interruptions), a function of (step, ready nodes, app pods
    on leaving nodes) that plans with the disruption component. With the app pods per minute
    (`pods`), a pool with a `share:` section plans with the share component (`share_parts`)."""
    timeline = PoolTimeline(pool, times, list(forecasts), observed, (), settings)
    shares: list[SharePart | None] = [None] * times.size
    if pods is not None and pool.share.enabled:
        shares = share_parts(pool, pods, math.ceil(settings.delay / 60.0 - 1e-9))

    def parts_at(i: int, extra: Mapping[str, Part] | None = None) -> dict[str, Part]:
        share = shares[i]
        return {**(extra or {}), **({str(Component.SHARE): share} if share else {})}

    if disruption is not None:

        def aware(i: int, nodes: int, on_leaving: int = 0) -> int:
            cores = nodes * cores_per_node
            cluster = ClusterState(nodes, cores, nodes, cores) if pool.proportional else None
            part = disruption_part(pool, disruption, nodes, on_leaving, settings)
            parts = {str(Component.DISRUPTION): part} if part is not None else {}
            return timeline.plan(i, cluster, parts_at(i, parts)).desired

        return timeline, aware
    if pool.proportional is not None:

        def decide(i: int, nodes: int) -> int:
            cores = nodes * cores_per_node
            return timeline.plan(i, ClusterState(nodes, cores, nodes, cores), parts_at(i)).desired

        return timeline, decide
    values = np.array([p.replicas if p else 0 for p in shares], dtype=np.int64)
    desired = timeline.desired_at_once(values if any(shares) else None)
    if desired is None:
        desired = np.fromiter(
            (timeline.plan(i, None, parts_at(i)).desired for i in range(times.size)),
            dtype=np.int64,
            count=times.size,
        )
    return timeline, desired


def _share_at(
    pool: Pool, pods: np.ndarray, i: int, settings: PlanSettings, _: SimulatedDisruption, __: int
) -> Part | None:
    """The share component at minute `i` (`share_parts`: the app pods known then)."""
    if not pool.share.enabled:
        return None
    delay = math.ceil(settings.delay / 60.0 - 1e-9)
    return share_parts(pool, pods[: i + 1], delay)[i]


def _disruption_at(
    pool: Pool,
    _: np.ndarray,
    __: int,
    settings: PlanSettings,
    sim: SimulatedDisruption,
    nodes: int,
) -> Part | None:
    """The disruption component on the simulated cluster (no node leaving)."""
    return disruption_part(pool, sim, nodes, 0, settings)


REPLAY_PARTS: dict[Component, Callable[..., Part | None]] = {
    Component.DISRUPTION: _disruption_at,
    Component.SHARE: _share_at,
}
"""What reads each registered component (`core.components.REGISTRY`) in a replay, by name (a
test checks every one has a reader), as `daemon.components` does in the daemon."""


def replay_parts(
    pool: Pool, pods: np.ndarray, i: int, settings: PlanSettings, node_slots: int, nodes: int
) -> dict[str, Part]:
    """Every registered component of `pool` at minute `i` of a replay, as the daemon would read
    it there: the share from the app pods known then (`pods`: per minute), the disruption
    component on `nodes` simulated nodes of `node_slots` placeholders, none leaving, with the
    pool's own interruption rate for the spot reserve; `settings` are those it plans with."""
    sim = SimulatedDisruption(node_slots, pool.disruption.interruption_rate)
    found = {
        str(name): read(pool, pods, i, settings, sim, nodes) for name, read in REPLAY_PARTS.items()
    }
    return {name: part for name, part in found.items() if part is not None}
