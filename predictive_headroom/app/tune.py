"""The daemon keeps its protection promise: a pool with `protection:` re-tunes its burst quantile,
scale-down stabilisation window and reserve (placeholders on top of the plan) at each refit, on
its own recent history (issue 23, item 4; issue 31).

At a refit at time T, with a tuning window W (`replay.promise` WINDOW + LOOKBACK days, 14 by
default, `PH_RETUNE_WINDOW`):

1. one extra fit of the pool's forecast on the history known at T - W (like every backtest
   refit: up to the observation delay before it, at most `forecast.history` of it), with a
   horizon covering the window, so the replay never uses a forecast fitted on the days it replays;
2. the one plan engine replays the pool (its floors included) over [T - W, T] on the simulated
   cluster of the backtest, at every (burst quantile, window) pair of a small grid
   (`replay.tuning.replay_grid`), each plus every reserve of `promise.reserve_sizes`; the runs
   are summed per day (days ending at T);
3. `replay.promise.choose`, the rule `backtest --protection` replays day by day, picks what to
   hold: the cheapest candidate meeting the target on the last WINDOW days at the strictness that
   kept the target on the LOOKBACK days before (status `tuned`), or, when no strictness kept it,
   the most protective (status `short`: a warning in the log). The protection the rule kept on
   those days is the pool's `realized_protection` ("asked 95%, last week 96.1%").

Only samples at or before T are read (the history is cut at T first), so the choice is
walk-forward by construction. When the history is too short for a fit plus the window, or the
extra fit or the replay fails, the pool keeps its defaults (burstQuantile 0.95, its own
scaleDownStabilization, no reserve) and the reason says why (status `default`). The floors
(schedules, proportional, min) never depend on the choice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise

import numpy as np

from predictive_headroom.app.tuning import Tuning, plural
from predictive_headroom.core.components import static_cap, static_cap_name
from predictive_headroom.core.curve import fewest
from predictive_headroom.core.planner import with_reserve
from predictive_headroom.core.series import DAY_SECONDS, Forecast, History, NoForecast, iso_utc
from predictive_headroom.core.settings import PlanSettings, SettingSource, model_spec
from predictive_headroom.core.shortfall import reserve_words
from predictive_headroom.core.vocabulary import TuningStatus
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.fallback import FixedHold, fewest_fixed, hold_fixed
from predictive_headroom.replay.promise import (
    LOOKBACK,
    PROMISE_QUANTILES,
    WINDOW,
    Candidate,
    Choice,
    Ledger,
    Status,
    carries_tail,
    choose,
    ledger,
    reserve_sizes,
)
from predictive_headroom.replay.promise_price import (
    FRONTIER_LEVELS,
    Level,
    static_in_hindsight,
)
from predictive_headroom.replay.setup import Replay, SimulatedNodes, WhatIf, resolve_with
from predictive_headroom.replay.shadow import Shadow, Side, changes, live_placeholders, side_of
from predictive_headroom.replay.simulator import Run
from predictive_headroom.replay.tail import tail_reserve_of
from predictive_headroom.replay.tuning import DAY_MINUTES, replay_grid
from predictive_headroom.replay.walkforward import at_quantile

logger = logging.getLogger(__name__)

RETUNE_WINDOW = (WINDOW + LOOKBACK) * DAY_SECONDS
"""The recent history each re-tune replays (the fit it replays with ends where it starts): the
choice rule's window plus the days it judges its strictness on (`replay.promise`)."""
RETUNE_QUANTILES = PROMISE_QUANTILES
RETUNE_WINDOWS = (300.0, 900.0, 1800.0)
"""The default grid: 5 quantiles x 3 windows, 5 engine replays (`bench/retune_bench.py`)."""
REPLAY_WARMUP = 3600.0
"""Unscored minutes before the replayed window, for the simulated cluster to settle."""


def retune(  # noqa: PLR0913
    pool: Pool,
    history: History,
    at: float,
    forecaster: Forecaster,
    settings: PlanSettings,
    *,
    window_seconds: float = RETUNE_WINDOW,
    quantiles: Sequence[float] = RETUNE_QUANTILES,
    windows: Sequence[float] = RETUNE_WINDOWS,
    reserves: Sequence[int] | None = None,
    nodes: SimulatedNodes | None = None,
    live: Sequence[tuple[float, int]] = (),
) -> Tuning:
    """Choose `pool`'s burst quantile, stabilisation window and reserve at `at` from `history`
    (see the module docstring), the other settings being `settings` (the pool's before tuning,
    with its measured lead time); `reserves` overrides
    `promise.reserve_sizes`; `nodes` is the simulated node (`replay.setup.priced_nodes`: the
    node priced; default 8 placeholders). The protection kept is `settings.protection` (the
    pool's, or a what-if given through the resolver). `live`: the target's replicas as read
    over time ((instant, count), ascending; the dry-run daemon's), replayed beside the plan
    (`Tuning.shadow`). Never raises for bad data: a `default` Tuning says why instead."""
    assert pool.forecast is not None and settings.protection is not None
    started = time.perf_counter()

    def fallback(why: str, retunes_from: float | None = None) -> Tuning:
        return _default(pool, settings, at, why, started, retunes_from)

    known = history.until(at)
    need = window_seconds + pool.forecast.min_history.total_seconds()
    if not len(known) or known.span_seconds < need:
        have = known.span_seconds / DAY_SECONDS if len(known) else 0.0
        return fallback(
            f"history too short to tune: {have:.1f} days, needs {need / DAY_SECONDS:.1f} "
            f"({window_seconds / DAY_SECONDS:g} days to replay after a fit on at least "
            f"{pool.forecast.min_history.total_seconds() / 3600:g} hours)",
            known.start + need if len(known) else None,
        )
    try:
        grid = (window_seconds, quantiles, windows, reserves)
        return _tune(pool, settings, known, at, forecaster, grid, started, nodes, live)
    except Exception as exc:  # a failed tune never stops the refit: the defaults stand in
        logger.exception("pool %s: re-tune failed", pool.name)
        return fallback(f"re-tune failed: {type(exc).__name__}: {exc}")


def _tune(
    pool: Pool,
    plan_settings: PlanSettings,
    known: History,
    at: float,
    forecaster: Forecaster,
    grid: tuple[float, Sequence[float], Sequence[float], Sequence[int] | None],
    started: float,
    nodes: SimulatedNodes | None = None,
    live: Sequence[tuple[float, int]] = (),
) -> Tuning:
    assert plan_settings.protection is not None
    target = plan_settings.protection.value
    window_seconds = grid[0]
    begin = known.end - window_seconds
    fitted, train = _fit_before(pool, plan_settings, known, begin, window_seconds, forecaster)
    if not isinstance(fitted, Forecast):
        detail = f": {fitted.detail}" if fitted.detail else ""
        why = f"the fit at the start of the tuning window gave no forecast ({fitted.why}{detail})"
        return _default(pool, plan_settings, at, why, started)
    simulated = nodes or SimulatedNodes()
    book, days, tail, static, capped, yours = _replay(
        pool, plan_settings, known, begin, fitted, grid, target, simulated, live
    )
    choice = choose(book, target, tail=tail)
    levels = _levels(book, static, target, tail, choice)
    cand = choice.candidate
    assert cand.setting is not None
    status, reason, hold = _status(pool, choice, book, static, target, days)
    tuning = Tuning(
        pool.name,
        status,
        cand.setting.quantile,
        cand.setting.window,
        target,
        reason,
        at,
        choice.expected,
        choice.overhead_node_hours,
        days,
        float(train.end) if len(train) else None,
        time.perf_counter() - started,
        0 if hold is not None else cand.reserve,
        choice.kept,
        choice.strictness,
        choice.kept_overhead_node_hours if choice.kept is not None else None,
        choice.kept_periods,
        levels=levels,
        short_days=_short_days(book, target),
        capped_days=capped.get(cand, 0),
        max_replicas=static_cap(pool),
        cap_name=static_cap_name(pool),
        fixed=_fixed(static, target),
        node_slots=simulated.node_slots,
        fixed_hold=hold,
    )
    if yours is None or not choice.kept_periods:
        return tuning
    return replace(tuning, shadow=_shadow(tuning, choice, static, yours, live, begin))


def _status(
    pool: Pool, choice: Choice, book: Ledger, static: Ledger, target: float, days: float
) -> tuple[TuningStatus, str, FixedHold | None]:
    """The re-tune's status, its reason in words and the fixed N it holds (with
    `protectionFallback: fixed`, when the ledger says the forecast did not pay), logged once."""
    status = TuningStatus.SHORT if choice.status == Status.SHORT else TuningStatus.TUNED
    reason = _verdict(choice, book, target, days, static_cap(pool), static_cap_name(pool))
    hold = hold_fixed(choice, static, target) if pool.protection_fallback == "fixed" else None
    if hold is not None:
        status, reason = TuningStatus.FIXED, f"asked {100 * target:g}%, {hold.says(target)}"
    if status == TuningStatus.SHORT or (choice.kept is not None and choice.kept < target - 1e-9):
        logger.warning("pool %s: re-tuned short of its protection: %s", pool.name, reason)
    else:
        logger.info("pool %s: re-tuned: %s", pool.name, reason)
    return status, reason, hold


def _shadow(
    tuning: Tuning,
    choice: Choice,
    static: Ledger,
    yours: Ledger,
    live: Sequence[tuple[float, int]],
    begin: float,
) -> Shadow:
    """The user's live N (`yours`, summed on the re-tune's periods) beside what the pool holds,
    over the days the rule was judged on: the forecast's walk-forward choices, or the fixed N
    held instead (its run in `static`)."""
    n = yours.periods
    first = n - choice.kept_periods
    hold = tuning.fixed_hold
    if hold is None:
        per_day = choice.kept_overhead_node_hours / choice.kept_periods
        plan = Side(choice.kept, per_day)
    else:
        index = next(i for i, c in enumerate(static.candidates) if c.reserve == hold.replicas)
        plan = side_of(static, index, first, n)
    in_force = [(t, c) for t, c in live if t > begin]
    before = [(t, c) for t, c in live if t <= begin][-1:]
    return Shadow(
        side_of(yours, 0, first, n),
        plan,
        choice.kept_periods,
        changes([*before, *in_force]),
        live[0][0],
        begin,
        tuning.holding(),
    )


def _short_days(book: Ledger, target: float) -> int:
    """Days read on which no candidate kept `target` (nothing waiting counts as kept)."""
    waited = book.reactive > 0
    best = (book.unserved <= (1 - target) * book.reactive + 1e-9).any(axis=0)
    return int((waited & ~best).sum())


_fixed = fewest_fixed
"""The fewest fixed placeholders of a static ledger that kept a target over all its days."""


def _levels(
    book: Ledger, static: Ledger, target: float, tail: int | None, choice: Choice
) -> tuple[Level, ...]:
    """The frontier on the re-tune's own ledger: at each of `FRONTIER_LEVELS` (its own tail-aware
    reserve only for `target`, whose `choice` is already made: the others' would need replays of
    their own) what the rule kept on the judged days and for how much a day, and the static
    headroom that would have kept the same in hindsight there."""
    first, n = max(1, book.periods - LOOKBACK), book.periods
    standard = [c.reserve for c in book.candidates if c.reserve != tail]
    out = []
    for p in sorted({*FRONTIER_LEVELS, target}):
        c = choice if abs(p - target) < 1e-9 else choose(book.among(standard), p)
        if not c.kept_periods:
            continue
        static_cost = static_in_hindsight(static, c.kept, first, n)
        out.append(
            Level(
                p,
                c.kept,
                c.kept_overhead_node_hours / c.kept_periods,
                None if static_cost is None else static_cost / max(1, n - first),
            )
        )
    return tuple(out)


def _fit_before(
    pool: Pool,
    settings: PlanSettings,
    known: History,
    begin: float,
    window_seconds: float,
    forecaster: Forecaster,
) -> tuple[Forecast | NoForecast, History]:
    """The one extra fit and its training data: only samples at or before `begin` minus the
    observation delay (at most `forecast.history` of them), the horizon covering the replay."""
    spec = pool.forecast
    assert spec is not None
    seen = begin - settings.delay
    train = known.until(seen).since(seen - spec.history.total_seconds())
    horizon = max(timedelta(seconds=window_seconds + settings.lead + 3600.0), spec.horizon)
    request = replace(model_spec(spec), horizon=horizon)  # the fit's span, not a setting
    return forecaster.fit(train, request, settings, begin), train


def _static_ledger(
    r: Replay, standard: Sequence[int], reactive: Run, bounds: Sequence[int], target: float
) -> Ledger:
    """Static headroom in hindsight: each of the `standard` reserves held all the time, and the
    fewest fixed N keeping `target` (`with_fewest`), summed per day as the candidates are."""

    def fixed(n: int) -> tuple[Candidate, Run]:
        return Candidate(None, n), r.simulate(np.full(r.pods.size, n))

    static = ledger((fixed(n) for n in standard), reactive, bounds, r.start)
    return with_fewest(static, target, lambda n: ledger([fixed(n)], reactive, bounds, r.start))


def _replay(
    pool: Pool,
    plan_settings: PlanSettings,
    known: History,
    begin: float,
    fitted: Forecast,
    grid: tuple[float, Sequence[float], Sequence[float], Sequence[int] | None],
    target: float,
    nodes: SimulatedNodes,
    live: Sequence[tuple[float, int]] = (),
) -> tuple[Ledger, float, int | None, Ledger, dict[Candidate, int], Ledger | None]:
    """Every (quantile, window) of the grid, each plus every reserve (the tail-aware one among
    them, `replay.tail`, unless `reserves` are given), replayed over [begin, known.end] through
    the engine on the simulated cluster and summed per day (days ending at the refit): the ledger
    the rule reads, the days replayed, the tail-aware reserve (for the protection `target`) and the
    static reserves' ledger (static headroom in hindsight, for the price of the promise), and
    the `live` replicas' (None without them)."""
    _, quantiles, windows, reserves = grid
    # The replay covers the window only (plus an unscored hour for the simulated cluster to settle).
    replayed = known.since(begin - REPLAY_WARMUP)
    what_if = WhatIf(nodes=nodes, warmup_seconds=begin - replayed.start)
    # The settings the refit resolved (its measured lead, a what-if protection), passed down.
    r = resolve_with(replayed, pool, what_if, plan_settings)
    # The burst model reads its features from every sample known before each replayed minute.
    r = replace(r, history=known)
    begin = float(r.times[r.start])
    candidates = sorted(set(quantiles))
    parts = {
        "forecast": {q: [(begin, at_quantile(fitted, q, SettingSource.TUNED))] for q in candidates}
    }
    runs = replay_grid(
        r.pool, r.plan_settings, parts, sorted(set(windows)), r.plan, r.simulate, r.start
    )
    reactive = r.simulate(np.zeros(r.pods.size, dtype=np.int64))
    tail, standard, sizes = _reserves(known, r, reserves, target)
    cheapest = carries_tail(g.setting for g in runs)
    size = r.pods.size
    days = max(1, round((size - r.start) / DAY_MINUTES))
    bounds = [max(r.start, size - k * DAY_MINUTES) for k in range(days, -1, -1)]
    capped: dict[Candidate, int] = {}

    def candidate_runs() -> Iterator[tuple[Candidate, Run]]:
        """Each candidate's run, made when the ledger reads it and let go once summed (with the
        days it sat at maxReplicas)."""
        for g in runs:
            for n in sizes if g.setting == cheapest else standard:
                candidate = Candidate(g.setting, n)
                if candidate in capped:  # a reserve given twice
                    continue
                placeholders = with_reserve(g.run.placeholders, n, static_cap(pool))
                run = g.run if n == 0 else r.simulate(placeholders)
                capped[candidate] = _capped_days(run, static_cap(pool), bounds, r.start)
                yield candidate, run

    book = ledger(candidate_runs(), reactive, bounds, r.start)
    static = _static_ledger(r, standard, reactive, bounds, target)
    yours = _yours(r, live, reactive, bounds) if live else None
    days = (float(r.times[-1]) - begin) / DAY_SECONDS
    return book, days, tail, static, capped, yours


def with_fewest(static: Ledger, target: float, one: Callable[[int], Ledger]) -> Ledger:
    """`static` (fixed N at the reserve sizes) with the fewest fixed N that kept `target` over
    its days added, found exactly between two of its sizes (`core.curve.fewest`; `one(n)`: the
    ledger of N alone): the N the cap cause says to raise the cap to and the fallback holds is
    the backtest's (`backtest.promise_measure.fewest_fixed_n`), not a step of the sizes."""
    found = fewest_fixed(static, target)
    if found is None:
        return static
    hi = found[0]
    lo = max((c.reserve for c in static.candidates if c.reserve < hi), default=hi)
    if hi - lo <= 1:
        return static
    books: dict[int, Ledger] = {}

    def keeps(n: int) -> bool:
        books[n] = one(n)
        return fewest_fixed(books[n], target) is not None

    n = fewest(keeps, lo, hi)
    if n == hi:
        return static
    add = books[n]
    return Ledger(
        (*static.candidates, *add.candidates),
        np.vstack([static.unserved, add.unserved]),
        np.vstack([static.node_hours, add.node_hours]),
        static.reactive,
        static.reactive_node_hours,
    )


def _yours(
    r: Replay, live: Sequence[tuple[float, int]], reactive: Run, bounds: list[int]
) -> Ledger:
    """The user's N over time (`live` reads) replayed on the same simulated cluster as the
    candidates, summed on the same days."""
    theirs = live_placeholders(r.times, live)
    run = r.simulate(theirs)
    return ledger([(Candidate(None, int(theirs[-1])), run)], reactive, bounds, r.start)


def _reserves(
    known: History, r: Replay, reserves: Sequence[int] | None, target: float
) -> tuple[int | None, list[int], Sequence[int]]:
    """(the tail-aware reserve for `target`, the standard reserves, those with it) of the replay
    `r`, or the `reserves` given (no tail-aware one then)."""
    if reserves is not None:
        return None, list(reserves), reserves
    # Fitted on weeks of what was known at the refit: up to it minus the observation delay.
    seen = known.end - r.plan_settings.delay
    per_replica = r.plan_settings.demand_per_replica
    assert per_replica is not None  # the replayed pool forecasts
    tail = tail_reserve_of(known, seen, per_replica.value, r.cluster, target)
    return tail, reserve_sizes(r.pods[r.start :]), reserve_sizes(r.pods[r.start :], tail)


def _capped_days(run: Run, cap: int, bounds: Sequence[int], start: int) -> int:
    """Days (between `bounds`) on which `run` sat at `cap` placeholders while pods waited."""
    held = (run.placeholders >= cap) & (run.unserved > 0)
    edges = [max(start, b) for b in bounds]
    return sum(bool(held[a:b].any()) for a, b in pairwise(edges))


def _verdict(
    choice: Choice, book: Ledger, target: float, days: float, cap: int, cap_name: str
) -> str:
    """The reason in words: what was asked, what the rule kept, what it holds and why."""
    cand = choice.candidate
    assert cand.setting is not None
    label = f"burstQuantile {cand.setting.quantile:g}, scaleDownStabilization {cand.setting.window / 60:g}m"
    if cand.reserve:
        label += f" and {reserve_words(cand.reserve, cap, cap_name)}"
    on = min(WINDOW, book.periods)
    judged = book.periods - max(1, book.periods - LOOKBACK)
    kept = (
        f"nothing waited for a node on the last {plural(judged, 'day')}"
        if choice.kept is None
        else f"last week {100 * choice.kept:.1f}% (the last {plural(judged, 'day')}, each "
        f"chosen on the {plural(on, 'day')} before it)"
    )
    absorbed = (
        f"which absorbed {100 * choice.expected:.1f}% on the last {plural(on, 'day')} for "
        f"{choice.overhead_node_hours / on:.1f} overhead node-hours a day"
    )
    if choice.status == Status.SHORT:
        return (
            f"asked {100 * target:g}%, {kept}: none of the {len(book.candidates):,} candidates "
            f"(settings and reserves) kept it at any price these {days:.0f} days show; holding {label} (the cheapest "
            f"reaching it over all {plural(book.periods, 'day')} read, else the most protective), "
            f"{absorbed}"
        )
    return f"asked {100 * target:g}%, {kept}; holding {label}, {absorbed}"


def _default(
    pool: Pool,
    settings: PlanSettings,
    at: float,
    why: str,
    started: float,
    retunes_from: float | None = None,
) -> Tuning:
    assert pool.forecast is not None and settings.protection is not None
    q0, w0 = settings.quantile, settings.window
    logger.info("pool %s: cannot tune (%s); planning with the defaults", pool.name, why)
    until = "" if retunes_from is None else f" until {iso_utc(retunes_from)}"
    return Tuning(
        pool.name,
        TuningStatus.DEFAULT,
        q0,
        w0,
        settings.protection.value,
        f"{why}; using burstQuantile {q0:g} and scaleDownStabilization {w0 / 60:g}m{until}",
        at,
        seconds=time.perf_counter() - started,
        reserve=settings.reserve.value,
        retunes_from=retunes_from,
    )
