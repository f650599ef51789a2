"""One replay resolved before anything runs (`Replay`): the pool replayed, the settings it plans
with, the simulated cluster, the minute grid and the app pods, from a demand series and the
replay's knobs (`BacktestSettings`). The backtest command, `tune` and the daemon's re-tune all
start here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np

from predictive_headroom.core.engine import InForce
from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.core.settings import (
    PlanSettings,
    SettingSource,
    resolve_settings,
    with_values,
)
from predictive_headroom.policy.config import (
    ForecastSpec,
    Linear,
    Pool,
    Proportional,
    ScheduleWindow,
    Target,
)
from predictive_headroom.replay.planner import planner_strategy
from predictive_headroom.replay.simulator import (
    ClusterSpec,
    Decide,
    Run,
    app_pods,
    minute_grid,
    simulate,
)


@dataclass(frozen=True)
class BacktestSettings:
    """Backtest knobs (seconds for durations). None means: choose from the data or the pool."""

    demand_per_replica: float | None = None  # None: the pool's, else median demand / 20
    node_slots: int = 8
    lag_seconds: float = 180.0
    scale_down_delay_seconds: float = 600.0
    warmup_seconds: float | None = None  # None: 14 d, or 7 d for series shorter than 28 d
    refit_every_seconds: float = DAY_SECONDS
    quantile: float | None = None  # None: the pool's burstQuantile (0.95)
    lead_seconds: float | None = None  # None: the pool's leadTime with a config, else lag + 1 min
    stabilization_seconds: float | None = None  # None: the pool's scaleDownStabilization (30 min)
    dial: tuple[
        float, ...
    ] = ()  # burst quantiles to sweep: forecast and naive at each (the dial's price)
    stabilization_dial: tuple[
        float, ...
    ] = ()  # scale-down stabilisation windows (seconds) to sweep likewise
    observation_delay_seconds: float | None = (
        None  # None: the pool's forecast.observationDelay (60 s)
    )
    burst_model: str | None = None  # None: the pool's forecast.burstModel (quantile); or "profile"
    cores_per_node: float = 8.0
    progress_every: int = 10  # without a terminal, one stderr line per this many refits
    protections: tuple[float, ...] = ()  # read each family's cost at these protections (frontier)
    burst_view: bool = True  # the burst model's last scored day and what moves it (slow)
    grid: bool = False  # replay forecast and naive at every (dial quantile, dial window) pair
    interruption_rate: float | None = None  # per node-hour (`--interruptions 5%/day`); None: off
    notice_seconds: float = 120.0  # the interruption notice (`--notice`)
    seed: int = 0  # the interruptions' random draws (`--seed`)


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


def backtest_pool(
    pool: Pool | None,
    history: History,
    dpr: float,
    quantile: float | None,
    forecast: dict[str, Any] | None = None,
) -> Pool:
    """The pool to replay: the given one, or a forecast-only default, with its forecast section
    switched on and set to what the forecaster is asked for (demand per replica, burst quantile,
    `forecast` overrides such as the observation delay and burst model kind). The lead time and
    the stabilisation window are settings (`Replay.plan_settings`), not part of it."""
    if pool is None:
        step = timedelta(seconds=max(300.0, round(history.step_seconds)))
        spec = ForecastSpec(query=history.source or "csv", demand_per_replica=dpr, step=step)
        pool = Pool(
            name="backtest",
            target=Target(namespace="backtest", name="placeholder"),
            max_replicas=100_000,
            forecast=spec,
        )
    spec = pool.forecast or ForecastSpec(query=history.source or "csv", demand_per_replica=dpr)
    spec = spec.model_copy(
        update={
            "demand_per_replica": dpr,
            "enabled": True,
            **({"burst_quantile": quantile} if quantile else {}),
            **(forecast or {}),
        }
    )
    # The forecaster reads these from the forecast section it is given (`protocols.Forecaster`).
    return pool.model_copy(update={"forecast": spec})


def default_rules(pods: np.ndarray) -> tuple[list[ScheduleWindow], Proportional]:
    """The schedule and CPA rule used when the pool has none (see the module docstring)."""
    replicas = max(1, round(0.15 * float(np.median(pods))))
    window = ScheduleWindow(
        name="daytime", start="0 8 * * *", end="0 20 * * *", desired_replicas=replicas
    )
    return [window], Proportional(linear=Linear(nodes_per_replica=1))


@dataclass(frozen=True)
class Replay:
    """Everything a backtest run is resolved to before any strategy runs: the pool to replay with
    demand per replica and overrides applied, the settings it plans with, the simulated cluster,
    the minute grid, the app pods and the first scored minute."""

    history: History
    given_pool: Pool | None
    pool: Pool
    settings: BacktestSettings
    plan_settings: PlanSettings
    dpr_source: str
    warmup: float
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
        cpn, chosen = self.settings.cores_per_node, settings or self.plan_settings
        strategy = planner_strategy(pool, self.times, in_force, self.history, cpn, chosen)[1]
        return self.simulate(strategy)

    def floor_only(
        self, schedules: list[ScheduleWindow] | None = None, rule: Proportional | None = None
    ) -> Pool:
        """A pool of the replayed pool's name, target and maxReplicas whose only floor is
        `schedules` or `rule` (no minReplicas, no forecast), with the replayed pool's disruption
        section: the schedule and proportional strategies. It plans with the run's
        `plan_settings` (lead time, stabilisation)."""
        return Pool(
            name=self.pool.name,
            target=self.pool.target,
            max_replicas=self.pool.max_replicas,
            schedules=schedules or [],
            proportional=rule,
            disruption=self.pool.disruption,
        )


def resolve(
    history: History,
    pool: Pool | None,
    settings: BacktestSettings,
    plan_settings: PlanSettings | None = None,
) -> Replay:
    """The `Replay` for `history` and `pool` (None: a forecast-only default), planning with
    `plan_settings` (default: the pool's configuration) and the flags of `settings` over them;
    raises ValueError saying what is needed when the series is too short or has no usable level."""
    s = settings
    span = history.span_seconds
    warmup = s.warmup_seconds if s.warmup_seconds is not None else default_warmup(span)
    if span < warmup + DAY_SECONDS:
        raise ValueError(
            f"series {history.source!r} spans {span / DAY_SECONDS:.1f} days; the backtest needs the warm-up "
            f"({warmup / DAY_SECONDS:g} days) plus at least 1 day to score ({(warmup + DAY_SECONDS) / DAY_SECONDS:g} days)"
        )
    if pool is not None and s.demand_per_replica is None and pool.forecast is not None:
        dpr, dpr_source = pool.forecast.demand_per_replica, "config"
    elif s.demand_per_replica is not None:
        dpr, dpr_source = s.demand_per_replica, "flag"
    else:
        dpr = auto_demand_per_replica(history)
        dpr_source = f"auto: median demand ~{TARGET_MEDIAN_PODS:g} pods"
    cluster = ClusterSpec(
        s.node_slots, round(s.lag_seconds / 60), round(s.scale_down_delay_seconds / 60)
    )
    overrides: dict[str, Any] = {}
    if s.observation_delay_seconds is not None:
        overrides["observation_delay"] = timedelta(seconds=s.observation_delay_seconds)
    if s.burst_model is not None:
        overrides["burst_model"] = s.burst_model
    replayed = backtest_pool(pool, history, dpr, s.quantile, overrides)
    plan_settings = _plan_settings(replayed, pool, plan_settings, s)
    times, demand = minute_grid(history)
    pods = app_pods(demand, dpr, cluster.hpa_hold_minutes)
    windows, cpa_rule = default_rules(pods)
    return Replay(
        history,
        pool,
        replayed,
        s,
        plan_settings,
        dpr_source,
        warmup,
        cluster,
        times,
        demand,
        pods,
        int(np.searchsorted(times, history.start + warmup, side="left")),
        windows,
        list(replayed.schedules) or windows,
        replayed.proportional or cpa_rule,
    )


def _plan_settings(
    replayed: Pool, given: Pool | None, base: PlanSettings | None, s: BacktestSettings
) -> PlanSettings:
    """The settings a backtest plans with: `base` (or the replayed pool's configuration) with
    the flags' lead time and stabilisation window over them; without a pool, the lead time is
    the simulated node lag plus a minute."""
    out = resolve_settings(replayed)  # demand per replica, delay, quantile: the forecaster's
    if base is not None:  # the caller's lead time (e.g. measured) and window
        out = replace(
            out, lead_seconds=base.lead_seconds, stabilization_seconds=base.stabilization_seconds
        )
    flags: dict[str, float] = {}
    if s.lead_seconds is not None:
        flags["lead_seconds"] = s.lead_seconds
    elif given is None:
        flags["lead_seconds"] = s.lag_seconds + 60.0
    if s.stabilization_seconds is not None:
        flags["stabilization_seconds"] = s.stabilization_seconds
    return with_values(out, SettingSource.CONFIGURED, **flags)
