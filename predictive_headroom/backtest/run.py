"""The backtest (`docs/design.md`, section 4): replay a demand series through the planner on a simulated cluster.

Strategies, all simulated by `predictive_headroom.replay.simulator` on the same 1-minute app pods W(t):

- `reactive`: no placeholders. `static`: N placeholders always, N = 0, 1, ... until unserved demand
  stops falling (the `static_curve`, cost against protection).
- `proportional`: the pool's CPA rule fed by the simulated cluster (nodes = ready nodes, cores =
  nodes * `cores_per_node`); without one, `linear: {nodesPerReplica: 1}` (one spare slot per node).
- `schedule`: the pool's cron windows (lead time included); without any, one daily window
  08:00-20:00 UTC asking for 15% of the median app pods (at least 1).
- `forecast`: the whole planner (schedules, proportional, forecast, min/max, scale-down
  stabilisation), evaluated every minute, with the model refitted every `refit_every` seconds on
  only the history known at that instant.
- `naive`: the same planner with the model replaced by the model-free burst baseline
  (`naive_burst_profile`: burst quantile by time of day from the last 14 days, ramp 0).
- `oracle`: perfect foresight, P(t) = max W over [t, t + lag] - W(t).

Only minutes after the warm-up are scored, the same for every strategy. The yardstick "x" of a
strategy is `S(node_hours) / unserved`, where S interpolates the static curve's unserved
pod-minutes linearly at the strategy's node-hours: how many times less unserved demand it leaves
than static headroom costing the same. x is 1 when both are 0 and unbounded (None) when only the
strategy's own unserved is 0.

With `interruption_rate` (`--interruptions 5%/day`), the strategies are replayed again on a
cluster whose nodes are interrupted at random with a notice (`simulator.Interruptions`, the same
draws for each), the planner ones with the disruption component (and the spot reserve unless the
pool says `spot: false`), `proportional` and `forecast` also without it, `forecast` also without
the reserve, and the disruption component alone (with and without the reserve) next to
`reactive`: what each leaves waiting because of the interruptions, against its own run without
them (the alone rows against `reactive`'s).

Two sweeps price the dials without extra fits: `dial` replays forecast and naive at other burst
quantiles, `stabilization_dial` with other scale-down stabilisation windows.

Neighbours: `replay.setup` (the run resolved before any strategy runs), `replay.walkforward` (the
refits and the quantile sweep), `replay.planner` (the planner minute by minute as a simulator
strategy), `results` (the dataclasses and headline), `text` (tables), `plot` (the page).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from predictive_headroom.backtest.frontier import frontier
from predictive_headroom.backtest.results import (
    BacktestResult,
    BacktestSettings,
    DialPoint,
    InterruptionReport,
    InterruptionRow,
    ReplaySettings,
    StrategyResult,
    WindowPoint,
    component_chart_data,
    x_against,
)
from predictive_headroom.core.components import Part, static_cap, static_cap_name
from predictive_headroom.core.engine import InForce, PoolTimeline
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import (
    DAY_SECONDS,
    Forecast,
    History,
    burst_chart_data,
    iso_utc,
)
from predictive_headroom.core.settings import (
    PlanSettings,
    SettingSource,
    with_values,
)
from predictive_headroom.core.vocabulary import BurstFit
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.policy.config import (
    Pool,
)
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.planner import (
    SimulatedDisruption,
    planner_strategy,
    replay_parts,
)
from predictive_headroom.replay.setup import Replay, resolve
from predictive_headroom.replay.simulator import (
    ClusterSpec,
    Interruptions,
    Metrics,
    Run,
    oracle_placeholders,
    score,
    simulate,
)
from predictive_headroom.replay.tuning import (
    DEFAULT_QUANTILES,
    DEFAULT_WINDOWS,
    GridRun,
    replay_grid,
)
from predictive_headroom.replay.walkforward import NaiveFit, Refits, WalkForward, walk_forward

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# The run.


STATIC_PLATEAU_NODES = 2
"""The static curve ends when unserved demand has not fallen for this many nodes' worth of
placeholders (2 x nodeSlots): single steps are often flat, because unserved demand falls only when
the extra placeholders add a node (`docs/measurements.md`)."""


OUTLIER_FACTOR = 100.0
"""A sample more than this many times the series' 99th percentile is named as an outlier."""


def outlier_notes(history: History, curve: list[tuple[int, Metrics]]) -> tuple[str, ...]:
    """A note naming the largest sample when it is over `OUTLIER_FACTOR` x the 99th percentile
    (one sample of 1e12 in a series of millions), with what it did to the static curve."""
    values = np.asarray(history.values, dtype=float)
    finite = values[np.isfinite(values)]
    if finite.size < 100:
        return ()
    typical = float(np.percentile(finite, 99))
    at = int(np.nanargmax(np.where(np.isfinite(values), values, -np.inf)))
    peak = float(values[at])
    if typical <= 0 or peak <= OUTLIER_FACTOR * typical:
        return ()
    count = int(np.sum(finite > OUTLIER_FACTOR * typical))
    when = iso_utc(float(history.times[at]))
    largest = curve[-1][0] if curve else 0
    return (
        f"outlier: the sample at {when} is {peak:.6g}, {peak / typical:,.0f}x the series' 99th "
        f"percentile ({typical:.6g}){f'; {count} samples are over {OUTLIER_FACTOR:g}x' if count > 1 else ''}. "
        f"It dominates every measure; the static curve was tried at {len(curve)} values of N "
        f"(log-spaced above {STATIC_STEP_UP_TO}, up to {largest:,}). Check the series and "
        "remove the sample if it is a recording error.",
    )


STATIC_STEP_UP_TO = 128
"""The static curve tries every N up to this; above it, N grows by `STATIC_GROWTH` a step."""
STATIC_GROWTH = 1.25


def static_ns(cap: int) -> Iterator[int]:
    """The N the static curve tries, in order: every N up to `STATIC_STEP_UP_TO`, then
    log-spaced (about `STATIC_GROWTH` apart) up to `cap`, `cap` included. At most a few hundred
    however large `cap` is (1e11: about 230)."""
    n = 0
    while True:
        yield n
        if n >= cap:
            return
        step = 1 if n < STATIC_STEP_UP_TO else math.ceil(n * (STATIC_GROWTH - 1))
        n = min(cap, n + step)


def static_curve(
    pods: np.ndarray, cluster: ClusterSpec, start: int, cap: int
) -> list[tuple[int, Metrics]]:
    """Static N (`static_ns`) until unserved demand reaches 0, has not fallen for
    `STATIC_PLATEAU_NODES` nodes' worth of N, or N reaches `cap`; the points past the last fall
    are left out. Unserved demand never rises with N, so the log-spaced steps above
    `STATIC_STEP_UP_TO` bound the work on any series (one sample of 1e12 included) without
    missing where the curve ends."""
    plateau = STATIC_PLATEAU_NODES * cluster.node_slots
    curve: list[tuple[int, Metrics]] = []
    best, best_n, flat = math.inf, 0, False
    for n in static_ns(cap):
        m = score(simulate(pods, np.full(pods.size, n), cluster), start)
        curve.append((n, m))
        if m.unserved_pod_minutes < best:
            best, best_n = m.unserved_pod_minutes, n
        flat = n - best_n >= plateau
        if m.unserved_pod_minutes == 0 or flat:
            break
    return [(n, m) for n, m in curve if n <= best_n] if flat else curve


WORKER_PRELOAD = ("predictive_headroom.forecast.forecaster", "prophet", "sklearn.ensemble")
"""What the refit workers import once, before their first refit: the default forecaster's."""

Strategy = Callable[[Replay, WalkForward], Run]

STRATEGIES: dict[str, Strategy] = {
    "reactive": lambda r, wf: r.simulate(np.zeros(r.pods.size, dtype=np.int64)),
    "proportional": lambda r, wf: r.plan(r.floor_only(rule=r.proportional_rule)),
    "schedule": lambda r, wf: r.plan(r.floor_only(schedules=r.schedule_windows)),
    "forecast": lambda r, wf: r.plan(r.pool, wf.model),
    "naive": lambda r, wf: r.plan(r.pool, wf.naive),
    "oracle": lambda r, wf: r.simulate(oracle_placeholders(r.pods, r.cluster.lag_minutes)),
}
"""Each strategy of the module docstring: how it runs on the simulated cluster, in table order."""


def run_backtest(
    history: History,
    pool: Pool | None,
    settings: BacktestSettings,
    progress: bool = False,
    *,
    forecaster: Forecaster | None = None,
    naive_fit: NaiveFit | None = None,
) -> BacktestResult:
    """Replay `history` through every strategy: resolve the run, refit walk-forward, run the table
    of `STRATEGIES` and the dials, score them against the static curve. Raises ValueError (saying
    what is needed) on unusable input."""
    # Long on purpose: the run's steps in order (resolve, refit, strategies, curve, dials), each one call.
    if forecaster is None:
        # Lazy: Prophet takes about a second to import and every CLI command imports this module.
        from predictive_headroom.forecast.forecaster import ProphetForecaster

        forecaster = ProphetForecaster()
    if naive_fit is None:
        naive_fit = naive_burst_profile
    r, s = resolve(history, pool, settings.replay), settings
    cache = None
    if s.refit_cache is not None:
        from predictive_headroom.replay.refit_cache import RefitCache  # lazy: joblib

        cache = RefitCache.open(s.refit_cache)
    refits = Refits(
        s.refit_every_seconds,
        forecaster,
        naive_fit,
        grid_quantiles(s) if s.dial or s.grid or s.protections else (),
        progress,
        s.workers,
        WORKER_PRELOAD,
        cache,
        s.progress_seconds,
        s.curve_refit,
    )
    wf = walk_forward(history, r.pool, r.times, r.start, r.plan_settings, refits, r.model)
    runs = {name: strategy(r, wf) for name, strategy in STRATEGIES.items()}
    curve = static_curve(r.pods, r.cluster, r.start, max(50, 5 * int(r.pods.max())))
    reactive_nh = score(runs["reactive"], r.start).node_hours

    def scored(run: Run) -> StrategyResult:
        m = score(run, r.start)
        return StrategyResult(
            m,
            run,
            m.node_hours - reactive_nh,
            x_against(curve, m.node_hours, m.unserved_pod_minutes),
        )

    dial, stabilization_dial = dials(r, s, wf, scored)
    timeline = PoolTimeline(r.pool, r.times, wf.model, history, (), r.plan_settings)
    result = BacktestResult(
        {name: scored(runs[name]) for name in STRATEGIES},
        curve,
        replay_settings(r, s, wf),
        r.times,
        r.pods,
        r.start,
        r.cluster,
        wf.fit_seconds,
        dial,
        stabilization_dial,
        last_day_burst(timeline, r.demand, r.pool.name) if s.burst_view else None,
        grid(r, s, wf) if s.grid or s.protections else [],
        notes=outlier_notes(history, curve),
    )
    for note in result.notes:
        logger.warning("%s", note)
    if s.protections:
        from predictive_headroom.backtest.promise_measure import measure, prepare

        replayed = prepare(result, s.protections)
        result = replace(
            result,
            frontier=frontier(result, s.protections),
            promise=measure(result, s.protections, replayed),
            replayed=replayed,
        )
    if s.interruption_rate is not None:
        result = replace(result, interruptions=interrupted(r, s, wf, runs))
    return result


# Long on purpose: the table of interrupted cases, one row each, read as one list.
def interrupted(
    r: Replay, s: BacktestSettings, wf: WalkForward, calm: dict[str, Run]
) -> InterruptionReport:
    """The strategies on the interrupted cluster (module docstring), each against its calm run."""
    assert s.interruption_rate is not None
    most = -(-int(r.pods.max()) // r.cluster.node_slots)
    spec = Interruptions(
        s.interruption_rate / 60.0, round(s.notice_seconds / 60), s.seed, max(8, 4 * most + 8)
    )
    sim = SimulatedDisruption(r.cluster.node_slots, s.interruption_rate)
    without = replace(sim, component=False)
    no_reserve = replace(sim, reserve=False)
    cpn = r.nodes.cores_per_node

    def planned(pool: Pool, in_force: InForce = (), seen: SimulatedDisruption = sim) -> Run:
        strategy = planner_strategy(
            pool,
            r.times,
            in_force,
            r.history,
            cpn,
            r.plan_settings,
            replace(r.world(), disruption=seen),
        )[1]
        return simulate(r.pods, strategy, r.cluster, spec)

    def fixed(placeholders: np.ndarray) -> Run:
        return simulate(r.pods, placeholders, r.cluster, spec)

    cpa = r.floor_only(rule=r.proportional_rule)
    cases: list[tuple[str, str, Callable[[], Run]]] = [
        ("reactive", "reactive", lambda: fixed(np.zeros(r.pods.size, dtype=np.int64))),
        ("disruption only", "reactive", lambda: planned(r.floor_only(), seen=no_reserve)),
        ("disruption + spot reserve", "reactive", lambda: planned(r.floor_only())),
        ("proportional without disruption", "proportional", lambda: planned(cpa, seen=without)),
        ("proportional", "proportional", lambda: planned(cpa)),
        (
            "schedule",
            "schedule",
            lambda: planned(r.floor_only(schedules=r.schedule_windows)),
        ),
        ("forecast without disruption", "forecast", lambda: planned(r.pool, wf.model, without)),
        (
            "forecast without spot reserve",
            "forecast",
            lambda: planned(r.pool, wf.model, no_reserve),
        ),
        ("forecast", "forecast", lambda: planned(r.pool, wf.model)),
        ("naive", "naive", lambda: planned(r.pool, wf.naive)),
        (
            "oracle (sees no interruption)",
            "oracle",
            lambda: fixed(oracle_placeholders(r.pods, r.cluster.lag_minutes)),
        ),
    ]
    rows, component = [], None
    for name, base, run_it in cases:
        run = run_it()
        if name == "disruption + spot reserve" and run.interrupted is not None:
            component = component_chart_data(
                r.times[r.start :], run.placeholders[r.start :], run.interrupted[r.start :]
            )
        rows.append(
            InterruptionRow(
                name,
                score(calm[base], r.start),
                score(run, r.start),
                int(run.interrupted[r.start :].sum()) if run.interrupted is not None else 0,
                float(run.placeholders[r.start :].mean()) if run.placeholders.size else 0.0,
            )
        )
    return InterruptionReport(s.interruption_rate, s.notice_seconds, s.seed, rows, component)


def grid_quantiles(s: BacktestSettings) -> tuple[float, ...]:
    """The burst quantiles the refits are swept at and the grid replays: the dial's, else the
    grid's own, else `DEFAULT_QUANTILES`."""
    return tuple(s.dial) or tuple(s.grid_quantiles) or DEFAULT_QUANTILES


def grid(r: Replay, s: BacktestSettings, wf: WalkForward) -> list[GridRun]:
    """Forecast and naive at every (quantile, window) pair: the dials' values (or the defaults),
    the pool's own setting included."""
    pool = r.pool
    q0, w0 = r.plan_settings.quantile, r.plan_settings.window
    quantiles = sorted({*grid_quantiles(s), q0})
    windows = sorted({*(s.stabilization_dial or DEFAULT_WINDOWS), w0})
    parts: dict[str, dict[float, InForce]] = {"forecast": {}, "naive": {}}
    for q in quantiles:
        model, naive = (wf.model, wf.naive) if q == q0 else wf.dial[q]
        parts["forecast"][q], parts["naive"][q] = model, naive
    return replay_grid(pool, r.plan_settings, parts, windows, r.plan, r.simulate, r.start)


def dials(
    r: Replay, s: BacktestSettings, wf: WalkForward, scored: Callable[[Run], StrategyResult]
) -> tuple[list[DialPoint], list[WindowPoint]]:
    """Forecast and naive replayed from the same refits at each swept burst quantile, and with each
    swept scale-down stabilisation window."""

    def windowed(seconds: float) -> PlanSettings:
        return with_values(r.plan_settings, SettingSource.CONFIGURED, stabilization_seconds=seconds)

    quantiles = [
        DialPoint(q, scored(r.plan(r.pool, model)), scored(r.plan(r.pool, naive)))
        for q, (model, naive) in sorted(wf.dial.items())
        if q in s.dial
    ]
    windows = [
        WindowPoint(
            w,
            scored(r.plan(r.pool, wf.model, windowed(w))),
            scored(r.plan(r.pool, wf.naive, windowed(w))),
        )
        for w in sorted(set(s.stabilization_dial))
    ]
    return quantiles, windows


def replay_settings(r: Replay, s: BacktestSettings, wf: WalkForward) -> ReplaySettings:
    """What the run used, resolved (the JSON `settings`)."""
    spec, cluster, chosen = r.pool.forecast, r.cluster, r.plan_settings
    return ReplaySettings(
        data=r.history.source,
        points=len(r.history),
        data_step_seconds=r.history.step_seconds,
        pool=r.pool.name if r.given_pool is not None else None,
        max_replicas=static_cap(r.pool),
        cap_name=static_cap_name(r.pool),
        demand_per_replica=chosen.demand_per_replica.value if chosen.demand_per_replica else 0.0,
        demand_per_replica_source=r.dpr_source,
        median_app_pods=float(np.median(r.pods)),
        node_slots=cluster.node_slots,
        lag_seconds=cluster.lag_minutes * 60,
        scale_down_delay_seconds=cluster.scale_down_minutes * 60,
        hpa_hold_seconds=cluster.hpa_hold_minutes * 60,
        lead_seconds=r.plan_settings.lead,
        quantile=chosen.quantile if spec else None,
        burst_model=r.model.burst_model if spec else None,
        observation_delay_seconds=chosen.delay if spec else None,
        scale_down_stabilization_seconds=r.plan_settings.window,
        warmup_seconds=r.warmup,
        scored_from=float(r.times[r.start]),
        scored_to=float(r.times[-1]),
        scored_minutes=int(r.times.size - r.start),
        refit_every_seconds=s.refit_every_seconds,
        refits=wf.refits,
        models=wf.models,
        fit_seconds=round(wf.fit_seconds, 2),
        cores_per_node=r.nodes.cores_per_node,
        schedule_windows="config"
        if r.pool.schedules
        else f"default: daytime 08:00-20:00 UTC, {r.default_windows[0].desired_replicas} replicas",
        proportional_rule="config" if r.pool.proportional else DEFAULT_RULE_WORDS,
        protection_fallback=r.pool.protection_fallback,
    )


DEFAULT_RULE_WORDS = "default: CPA linear nodesPerReplica 1 (one placeholder per node, always)"
"""What the `proportional` strategy replays for a pool without a rule, as the settings name it."""


def last_day_burst(
    timeline: PoolTimeline, demand: np.ndarray, pool: str, every: int = 5
) -> dict[str, Any] | None:
    """The burst allowance the forecast strategy used over the last scored day (every `every` minutes),
    next to demand, with the last refit's feature importance, from the refits in force then
    (`BurstFit.WALK_FORWARD`); None when no burst model was in force."""
    times = timeline.times
    _, last = timeline.forecast_in_force(times.size - 1)
    if not isinstance(last, Forecast) or last.burst_model is None:
        return None
    span = np.arange(
        max(timeline.first_in_force, times.size - int(DAY_SECONDS // 60)), times.size, every
    )
    allowance = np.array([timeline.forecast_part(int(i)).burst for i in span])
    fits = {timeline.forecast_in_force(int(i))[0] for i in span}
    fit = {
        "kind": str(BurstFit.WALK_FORWARD),
        "history_end": iso_utc(last.history_end),
        "fits": len(fits),
    }
    return burst_chart_data(pool, last.burst_model, times[span], demand[span], allowance, fit)


def parts_reader(
    result: BacktestResult, pool: Pool, at: float, price: Price | None = None
) -> Callable[[PlanSettings], dict[str, Part]]:
    """Every registered component of `pool` at `at` (its last minute at or before) as the replay
    `result` saw it (`replay.planner.replay_parts`: the app pods known then, the forecast's
    simulated nodes, the budget from what the forecast held earlier that day on the node `price`
    prices), for the settings in force: what `app.review.daemon_now` plans with, as the daemon
    reads them from the cluster."""
    i = max(0, int(np.searchsorted(result.times, at, side="right")) - 1)
    run = result.strategies["forecast"].run
    nodes, slots = int(run.ready[i]), result.cluster.node_slots
    held = (result.times, run.placeholders, price)
    return lambda settings: replay_parts(pool, result.pods, i, settings, slots, nodes, held)


__all__ = [
    "BacktestResult",
    "BacktestSettings",
    "DialPoint",
    "StrategyResult",
    "WindowPoint",
    "parts_reader",
    "run_backtest",
]
