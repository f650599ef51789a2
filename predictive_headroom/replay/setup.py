"""One replay resolved before anything runs (`Replay`): the pool replayed, the settings it plans
with, the simulated cluster, the minute grid and the app pods, from a demand series and the
replay's what-if (`WhatIf`: the flags over the pool, the simulated nodes, the warm-up). The
backtest command, `tune` and the daemon's re-tune all start here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np

from predictive_headroom.core.engine import InForce
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.core.settings import (
    Given,
    ModelSpec,
    PlanSettings,
    model_spec,
    resolve_settings,
)
from predictive_headroom.policy.config import (
    ForecastSpec,
    Linear,
    Pool,
    Proportional,
    ScheduleWindow,
    Target,
)
from predictive_headroom.replay.planner import World, planner_strategy
from predictive_headroom.replay.simulator import (
    ClusterSpec,
    Decide,
    Run,
    app_pods,
    minute_grid,
    simulate,
)


@dataclass(frozen=True)
class SimulatedNodes:
    """The simulated node pool: placeholders (slots) a node holds, the boot lag, the scale-down
    delay, and the cores a node counts for a proportional rule's `coresPerReplica`."""

    node_slots: int = 8
    lag_seconds: float = 180.0
    scale_down_delay_seconds: float = 600.0
    cores_per_node: float | None = None
    """None: the slots' worth of the replayed pool's placeholder CPU (8 slots of 2-CPU
    placeholders make a 16-core node), so the two figures describe one node."""
    price: Price | None = None
    """The price of the node (`priced_nodes`): what a budget in money is counted in."""

    def cluster(self) -> ClusterSpec:
        """The simulator's cluster (whole minutes)."""
        return ClusterSpec(
            self.node_slots, round(self.lag_seconds / 60), round(self.scale_down_delay_seconds / 60)
        )


def priced_nodes(price: Price, nodes: SimulatedNodes | None = None) -> SimulatedNodes:
    """The simulated node of every replay (`backtest`, `tune`, the daemon's re-tune and the
    commands that show it): the node `price` priced (`core.price`: the flags' shape over the
    policy's `cost.nodeCpu/nodeMemory`, else 8 placeholders), holding `price.slots`
    placeholders and counting its CPU for a proportional rule's cores; the boot lag and
    scale-down delay are `nodes`' (default: the daemon's)."""
    base = nodes or SimulatedNodes()
    cores = price.node.cpu if price.node is not None else None
    return replace(base, node_slots=price.slots, cores_per_node=cores, price=price)


@dataclass(frozen=True)
class WhatIf:
    """What a replay changes from the pool it replays, each None for the pool's own: the
    settings given over it (`Given`, resolved by `core.settings.resolve_settings` like any
    other), the burst model's kind, the simulated nodes and the warm-up."""

    given: Given = field(default_factory=Given)
    """Without a pool, the lead time defaults to the simulated boot lag plus a minute and the
    demand per replica to median demand / 20 pods."""
    burst_model: str | None = None
    """The forecaster's burst model kind (`quantile` or `profile`); None: the pool's."""
    nodes: SimulatedNodes = field(default_factory=SimulatedNodes)
    warmup_seconds: float | None = None
    """None: 14 days, or 7 days for series shorter than 28 days."""


TARGET_MEDIAN_PODS = 20.0


# ---------------------------------------------------------------------------------------------
# Set-up: demand units, the pool, warm-up.


def default_warmup(span_seconds: float) -> float:
    """14 days, or 7 days for series shorter than four weeks."""
    return 7 * DAY_SECONDS if span_seconds < 28 * DAY_SECONDS else 14 * DAY_SECONDS


def auto_demand_per_replica(history: History) -> float:
    """The demand one replica serves so that the median demand is about 20 pods (3 significant digits)."""
    median = float(np.median(history.values))
    if not median > 0:
        raise ValueError(
            f"series {history.source!r} has median {median:g}; pass --demand-per-replica"
        )
    raw = median / TARGET_MEDIAN_PODS
    digits = 2 - int(math.floor(math.log10(raw)))
    return float(round(raw, digits))


def replay_pool(pool: Pool | None, history: History, dpr: float) -> Pool:
    """The pool to replay: the given one as it is when its forecast section is on; else the one
    what-if a replay makes of it, its forecast section switched on (or added, reading the series
    at `dpr`); without a pool, a forecast-only default. What it plans with is resolved apart
    (`Replay.plan_settings`), never patched into the pool."""
    if pool is None:
        step = timedelta(seconds=max(300.0, round(history.step_seconds)))
        spec = ForecastSpec(query=history.source or "csv", demand_per_replica=dpr, step=step)
        return Pool(
            name="backtest",
            target=Target(namespace="backtest", name="placeholder"),
            max_replicas=100_000,
            forecast=spec,
        )
    if pool.forecast is not None and pool.forecast.enabled:
        return pool
    spec = pool.forecast or ForecastSpec(query=history.source or "csv", demand_per_replica=dpr)
    return pool.model_copy(update={"forecast": spec.model_copy(update={"enabled": True})})


def default_rules(pods: np.ndarray) -> tuple[list[ScheduleWindow], Proportional]:
    """The schedule and CPA rule used when the pool has none (see the module docstring)."""
    replicas = max(1, round(0.15 * float(np.median(pods))))
    window = ScheduleWindow(
        name="daytime", start="0 8 * * *", end="0 20 * * *", desired_replicas=replicas
    )
    return [window], Proportional(linear=Linear(nodes_per_replica=1))


@dataclass(frozen=True)
class Replay:
    """Everything a replay is resolved to before any strategy runs: the pool replayed, the
    settings it plans with (one `PlanSettings`, from the resolver), the forecaster's knobs, the
    simulated cluster, the minute grid, the app pods and the first scored minute."""

    history: History
    given_pool: Pool | None
    pool: Pool
    plan_settings: PlanSettings
    model: ModelSpec
    dpr_source: str
    warmup: float
    nodes: SimulatedNodes
    cluster: ClusterSpec
    times: np.ndarray
    demand: np.ndarray
    pods: np.ndarray
    start: int
    default_windows: list[ScheduleWindow]
    schedule_windows: list[ScheduleWindow]
    proportional_rule: Proportional

    def simulate(self, strategy: np.ndarray | Decide) -> Run:
        return simulate(self.pods, strategy, self.cluster)

    def plan(self, pool: Pool, in_force: InForce = (), settings: PlanSettings | None = None) -> Run:
        """The engine on `pool` at every minute, refitted forecasts `in_force`, as a strategy,
        with `settings` (default: the run's `plan_settings`)."""
        cpn, chosen = self.nodes.cores_per_node, settings or self.plan_settings
        assert cpn is not None  # `resolve` sets it
        strategy = planner_strategy(
            pool, self.times, in_force, self.history, cpn, chosen, self.world()
        )[1]
        return self.simulate(strategy)

    def world(self) -> World:
        """What the registered components read in this replay: the app pods, the minutes, the
        node simulated and its price."""
        return World(self.pods, None, self.times, self.nodes.price, self.nodes.node_slots)

    def floor_only(
        self, schedules: list[ScheduleWindow] | None = None, rule: Proportional | None = None
    ) -> Pool:
        """A pool of the replayed pool's name, target and caps (maxReplicas, `limits:` with its
        placeholder) whose only floor is `schedules` or `rule` (no minReplicas, no forecast),
        with the replayed pool's disruption section: the schedule and proportional strategies. It plans with the run's
        `plan_settings` (lead time, stabilisation)."""
        return Pool(
            name=self.pool.name,
            target=self.pool.target,
            max_replicas=self.pool.max_replicas,
            placeholder=self.pool.placeholder,
            limits=self.pool.limits,
            schedules=schedules or [],
            proportional=rule,
            disruption=self.pool.disruption,
        )


def _demand_per_replica(history: History, pool: Pool | None, given: Given) -> tuple[Given, str]:
    """`given` with the demand per replica the replay uses, and where it came from: the flag, the
    pool's config, or (neither) the series' own level (`auto_demand_per_replica`)."""
    if given.demand_per_replica is not None:
        return given, "flag"
    if pool is not None and pool.forecast is not None:
        return given, "config"
    auto = auto_demand_per_replica(history)
    return replace(
        given, demand_per_replica=auto
    ), f"auto: median demand ~{TARGET_MEDIAN_PODS:g} pods"


def resolve(history: History, pool: Pool | None, what_if: WhatIf = WhatIf()) -> Replay:
    """The `Replay` for `history` and `pool` (None: a forecast-only default) with `what_if` over
    the pool, planning with what `resolve_settings` gives the pool replayed and the flags
    (`backtest`); raises ValueError saying what is needed when the series is too short or has no
    usable level."""
    return _resolve(
        history, pool, what_if, lambda replayed, given: resolve_settings(replayed, given=given)
    )


def resolve_with(history: History, pool: Pool, what_if: WhatIf, settings: PlanSettings) -> Replay:
    """The `Replay` for `history` and `pool` planning with `settings`, which the caller resolved
    (the daemon's re-tune: those of its refit, the measured lead time and a what-if protection
    included); raises ValueError like `resolve`."""
    return _resolve(history, pool, what_if, lambda _replayed, _given: settings)


def _resolve(
    history: History,
    pool: Pool | None,
    what_if: WhatIf,
    settings_of: Callable[[Pool, Given], PlanSettings],
) -> Replay:
    """`resolve` and `resolve_with`, the settings planned with `settings_of(pool replayed, the
    flags)`."""
    span, nodes = history.span_seconds, what_if.nodes
    warmup = what_if.warmup_seconds
    warmup = warmup if warmup is not None else default_warmup(span)
    if span < warmup + DAY_SECONDS:
        raise ValueError(
            f"series {history.source!r} spans {span / DAY_SECONDS:.1f} days; the backtest needs the warm-up "
            f"({warmup / DAY_SECONDS:g} days) plus at least 1 day to score ({(warmup + DAY_SECONDS) / DAY_SECONDS:g} days)"
        )
    given, dpr_source = _demand_per_replica(history, pool, what_if.given)
    if pool is None and given.lead is None:
        given = replace(given, lead=nodes.lag_seconds + 60.0)
    replayed = replay_pool(pool, history, given.demand_per_replica or 0.0)
    if nodes.cores_per_node is None:
        nodes = replace(nodes, cores_per_node=nodes.node_slots * replayed.placeholder.cpu_cores)
    plan_settings = settings_of(replayed, given)
    assert plan_settings.demand_per_replica is not None  # replay_pool gave it a forecast section
    dpr = plan_settings.demand_per_replica.value
    assert replayed.forecast is not None  # replay_pool switched it on
    model = model_spec(replayed.forecast)
    if what_if.burst_model is not None:
        model = replace(model, burst_model=what_if.burst_model)
    cluster = nodes.cluster()
    times, demand = minute_grid(history)
    pods = app_pods(demand, dpr, cluster.hpa_hold_minutes)
    windows, cpa_rule = default_rules(pods)
    return Replay(
        history,
        pool,
        replayed,
        plan_settings,
        model,
        dpr_source,
        warmup,
        nodes,
        cluster,
        times,
        demand,
        pods,
        int(np.searchsorted(times, history.start + warmup, side="left")),
        windows,
        list(replayed.schedules) or windows,
        replayed.proportional or cpa_rule,
    )
