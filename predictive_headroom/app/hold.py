"""What a `protection:` pool holds at each refit: what `tune` would paste today (issue 62, items
1 and 2).

At a refit at T the daemon reads the pool's history up to `ChoiceOptions.window_seconds` (as
much as the source holds, up to it; the Tuning says what it read), replays it as `tune` does and
makes `tune`'s choice on it (`app.choice.choose_for_pool`: the protection level or fixed N, judged
on the days it did not see, within the pool's `budget:`). Then it holds that choice:

- `protection: L` (the level asked, or a lower one the history kept): the re-tune at L
  (`app.tune.retune`: the forecast setting and reserve keeping L, chosen on its recent days);
- fixed N: N placeholders with the forecast set aside (status `fixed`);
- nothing within the budget: the floors alone (status `fixed`, N = 0).

It never reaches for the most protective candidate when P is out of reach: it says "P is not
reachable on this history within ...; holding ..., which kept X% for Y a day" and holds what `tune`
pastes. Until the choice has a week of scored days (`backtest.pasted.MIN_JUDGED_DAYS`), and when
the history is too short to replay at all, the re-tune at P stands (its own defaults and warm-up),
and `choice.why_held` or `read` says why. Pure but for the forecaster's fits.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from predictive_headroom.app.choice import (
    Budget,
    PoolChoice,
    choice_settings,
    choose_for_pool,
    read_words,
)
from predictive_headroom.app.tune import RETUNE_WINDOW, retune
from predictive_headroom.app.tuning import Tuning
from predictive_headroom.backtest.against_fixed import Judged, Recommended, span
from predictive_headroom.backtest.choice import Recommendation, seen_unseen
from predictive_headroom.backtest.pasted import verdict_on
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.components import static_cap, static_cap_name
from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.core.settings import Given, PlanSettings, Setting
from predictive_headroom.core.vocabulary import TuningStatus
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.fallback import FixedHold, Why
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf
from predictive_headroom.replay.shadow import Shadow, Side, changes, live_placeholders
from predictive_headroom.replay.simulator import Run, simulate

logger = logging.getLogger(__name__)

CHOICE_WINDOW = 28 * DAY_SECONDS
"""The history a refit reads for `tune`'s choice by default (`PH_CHOICE_WINDOW`)."""


@dataclass(frozen=True)
class ChoiceOptions:
    """How a refit makes `tune`'s choice: the most history it reads (seconds) and where the
    replay keeps its refits across refits (`replay.refit_cache`; None: fit every one)."""

    window_seconds: float = CHOICE_WINDOW
    """At most this much history, from the midnight (UTC) at or after its start (`window_start`)."""
    refit_cache: object | None = None
    """A `replay.refit_cache.CacheSpec` (typed loosely: joblib is imported lazily)."""


def window_start(at: float, window_seconds: float) -> float:
    """Where the history a refit reads for `tune`'s choice starts: `window_seconds` before `at`,
    moved on to the next midnight (UTC), so every refit of one day replays the same refit cuts
    on the same history and reads their fits back from the refit cache (`replay.refit_cache`)."""
    return math.ceil((at - window_seconds) / DAY_SECONDS) * DAY_SECONDS


def hold_choice(
    pool: Pool,
    history: History,
    at: float,
    forecaster: Forecaster,
    settings: PlanSettings,
    *,
    options: ChoiceOptions,
    retune_window: float = RETUNE_WINDOW,
    nodes: SimulatedNodes | None = None,
    live: Sequence[tuple[float, int]] = (),
    budget: Budget | None = None,
) -> Tuning:
    """`pool`'s Tuning at `at`: `tune`'s choice on `history` (read up to `options.window_seconds`
    before `at`) held as the module docstring says; `settings` are the pool's before tuning
    (its measured lead time, a what-if protection), `budget` the pool's (node-hours a day, in
    words). Never raises for bad data."""
    assert settings.protection is not None
    started = time.perf_counter()
    target = settings.protection.value
    known = history.until(at)
    known = known.since(window_start(at, options.window_seconds)) if len(known) else known

    def at_level(level: float) -> Tuning:
        chosen = replace(settings, protection=Setting(level, settings.protection.source))
        return retune(
            pool,
            history,
            at,
            forecaster,
            chosen,
            window_seconds=retune_window,
            nodes=nodes,
            live=live,
        )

    try:
        pc = _choose(pool, known, target, forecaster, settings, options, nodes, budget)
    except ValueError as exc:  # too short to replay: the re-tune at P and its warm-up stand
        return replace(at_level(target), read=f"{read_words(known)}: not yet replayed ({exc})")
    except Exception as exc:  # a failed choice never stops the refit
        logger.exception("pool %s: tune's choice failed", pool.name)
        return replace(at_level(target), read=f"{read_words(known)}: tune's choice failed: {exc}")
    rec = pc.choice.held
    if rec is not None and rec.kind == Recommended.PROTECTION and rec.level is not None:
        tuning = replace(at_level(rec.level), target=target)  # not judged yet: P, said in choice
        if pc.choice.judged and not pc.choice.reachable():
            tuning = replace(tuning, reason=f"{_out_of_reach(pc, budget)}; {tuning.reason}")
    else:
        tuning = _fixed(pool, settings, at, pc, rec, budget, live)
    _log(pool, tuning, pc)
    return replace(
        tuning,
        seconds=time.perf_counter() - started,
        choice=_choice(pc, target, live),
        read=pc.read,
        weeks=_weeks(pc.choice.at_protection),
    )


def _choice(pc: PoolChoice, target: float, live: Sequence[tuple[float, int]]) -> dict[str, Any]:
    """`tune`'s choice as `/last-run` shows it, with the verdict against the live N in force
    (the one `tune --current N` prints for it, `backtest.pasted.verdict_on`) when it was read."""
    out = pc.choice.to_dict()
    if live and not out["verdict_yours"]:
        out["verdict_yours"] = [verdict_on(pc.replays, target, live[-1][1]).to_dict()]
    return out


def _weeks(rec: Recommendation) -> dict[str, Any] | None:
    """How sure the choice is: what the rule kept on every unseen week (`backtest.weeks`), as
    `tune` prints it beside its recommendation (None: no whole week to judge)."""
    return None if rec.weeks is None else rec.weeks.to_dict()


def _choose(
    pool: Pool,
    known: History,
    target: float,
    forecaster: Forecaster,
    settings: PlanSettings,
    options: ChoiceOptions,
    nodes: SimulatedNodes | None,
    budget: Budget | None,
) -> PoolChoice:
    """`tune`'s choice on `known`, replayed on the daemon's simulated `nodes` with its measured
    lead time (when it measured one), its refits kept as `options` says."""
    base = BacktestSettings(
        replay=WhatIf(Given(lead=settings.measured_lead), nodes=nodes or SimulatedNodes()),
        workers=1,
        refit_cache=options.refit_cache,  # type: ignore[arg-type]
    )
    return choose_for_pool(
        pool,
        known,
        target,
        forecaster,
        choice_settings(target, base=base),
        budget=budget,
        window_seconds=options.window_seconds,
    )


def _within(budget: Budget | None) -> str:
    """`within 30 overhead node-hours a day` or `within 1.10x static headroom`."""
    return f"within the budget of {budget[1]}" if budget else "within 1.10x static headroom"


def _out_of_reach(pc: PoolChoice, budget: Budget | None) -> str:
    """`95% is not reachable on this history within ...; holding ..., which kept X% for Y a day`."""
    rec = pc.choice.held
    asked = f"{100 * pc.choice.asked:g}%"
    head = f"{asked} is not reachable on this history {_within(budget)}"
    if rec is None:
        return f"{head}: nothing cost that little; holding the floors alone"
    judged, days = _judged(rec)
    if judged.kept >= pc.choice.asked - 0.02 - 1e-9:  # kept (within 2 points), for less
        head = f"for {asked}, fixed headroom did better on this history than the forecast"
        head += f" {_within(budget)}" if budget else ""
    return (
        f"{head} (tune's rule: {rec.why}); holding {rec.label()}, which kept "
        f"{100 * judged.kept:.1f}% for {judged.per_day:,.1f} overhead node-hours a day on the "
        f"{days}"
    )


def _judged(rec: Recommendation) -> tuple[Judged, str]:
    """The figures a recommendation is said with: on the days it did not see, else the seen."""
    if rec.unseen is not None:
        days = f"last {rec.unseen_days:.1f} days, which it did not see"
        if rec.held_out is not None and rec.held_out != rec.label():
            days += f" (chosen before them, the same rule held {rec.held_out})"
        return rec.unseen, days
    return rec.seen, f"first {rec.seen_days:.1f} days"


def _fixed(
    pool: Pool,
    settings: PlanSettings,
    at: float,
    pc: PoolChoice,
    rec: Recommendation | None,
    budget: Budget | None,
    live: Sequence[tuple[float, int]],
) -> Tuning:
    """A fixed N held (or the floors alone, N = 0, when nothing met the budget), with the
    forecast set aside: status `fixed`, its figures on the days the choice did not see."""
    assert settings.protection is not None
    target = settings.protection.value
    n = 0 if rec is None or rec.replicas is None else rec.replicas
    forecast = pc.choice.at_protection
    judged, _ = _judged(rec or forecast)
    product = forecast.product_unseen or forecast.product_whole
    days = rec.unseen_days if rec is not None and rec.unseen is not None else 0.0
    hold = FixedHold(
        n,
        judged.kept if rec is not None else 0.0,
        Why.SHORT if product.kept < target - 1e-9 else Why.DEARER,
        product.kept,
        product.per_day,
        product.static_per_day,
    )
    res = pc.result
    return Tuning(
        pool.name,
        TuningStatus.FIXED,
        settings.quantile,
        settings.window,
        target,
        _out_of_reach(pc, budget),
        at,
        days=(res.pods.size - res.scored_from) / (DAY_SECONDS / 60),
        fitted_until=float(res.times[-1]),
        reserve=0,
        realized_protection=judged.kept if rec is not None else None,
        kept_overhead_node_hours=judged.per_day * round(days) if rec is not None else None,
        kept_days=round(days) if rec is not None else 0,
        max_replicas=static_cap(pool),
        cap_name=static_cap_name(pool),
        node_slots=res.cluster.node_slots,
        fixed_hold=hold,
        shadow=_shadow(pc, n, live),
    )


def _shadow(pc: PoolChoice, n: int, live: Sequence[tuple[float, int]]) -> Shadow | None:
    """The live N beside the fixed `n` held, on the days the choice did not see (None without
    live reads or unseen days)."""
    res, r = pc.result, pc.replays
    _, unseen, split = seen_unseen(r)
    if not live or unseen is None:
        return None
    theirs = simulate(res.pods, live_placeholders(res.times, live), res.cluster)
    ours = simulate(res.pods, np.full(res.pods.size, n, dtype=np.int64), res.cluster)
    judged = span(res, r.replayed, split, res.pods.size)
    y, p = judged.judge(theirs), judged.judge(ours)
    begin = float(res.times[split])
    in_force = [(t, c) for t, c in live if t > begin]
    before = [(t, c) for t, c in live if t <= begin][-1:]
    reactive_waited = judged.reactive_unserved > 0
    return Shadow(
        Side(y.kept if reactive_waited else None, y.per_day),
        Side(p.kept if reactive_waited else None, p.per_day),
        round(unseen.days),
        changes([*before, *in_force]),
        live[0][0],
        begin,
        f"{n} fixed placeholders",
    )


SHADOW_DAYS = 7
"""Days a pool without `protection:` compares its plan with the live N on (the last ones read)."""


def plain_shadow(
    pool: Pool,
    history: History,
    at: float,
    forecaster: Forecaster,
    settings: PlanSettings,
    *,
    options: ChoiceOptions,
    nodes: SimulatedNodes | None = None,
    live: Sequence[tuple[float, int]] = (),
) -> Shadow | None:
    """For a pool without `protection:`, in dry-run: the live N beside the plan the pool holds
    (its own settings, replayed walk-forward as the backtest's `forecast` strategy on the history
    `tune`'s choice reads) over the last `SHADOW_DAYS` days replayed. None without live reads or
    on too short a history (the reason is logged)."""
    if not live:
        return None
    known = history.until(at)
    known = known.since(window_start(at, options.window_seconds)) if len(known) else known
    base = BacktestSettings(
        replay=WhatIf(Given(lead=settings.measured_lead), nodes=nodes or SimulatedNodes()),
        workers=1,
        refit_cache=options.refit_cache,  # type: ignore[arg-type]
        burst_view=False,
    )
    try:
        res = run_backtest(known, pool, base, forecaster=forecaster)
    except ValueError as exc:
        logger.info("pool %s: no shadow of the live N yet: %s", pool.name, exc)
        return None
    size = res.pods.size
    lo = max(res.scored_from, size - SHADOW_DAYS * 1440)
    reactive = res.strategies["reactive"].run
    theirs = simulate(res.pods, live_placeholders(res.times, live), res.cluster)
    ours = res.strategies["forecast"].run
    begin = float(res.times[lo])
    in_force = [(t, c) for t, c in live if t > begin]
    before = [(t, c) for t, c in live if t <= begin][-1:]
    return Shadow(
        _side(theirs, reactive, lo, size),
        _side(ours, reactive, lo, size),
        round((size - lo) / 1440),
        changes([*before, *in_force]),
        live[0][0],
        begin,
        f"the pool's own settings (burstQuantile {settings.quantile:g}, scaleDownStabilization "
        f"{settings.window / 60:g}m, no protection:)",
    )


def _side(run: Run, reactive: Run, lo: int, hi: int) -> Side:
    """What `run` kept over minutes [lo, hi) and its overhead node-hours a day over `reactive`."""
    waited = float(reactive.unserved[lo:hi].sum())
    kept = None if waited <= 0 else 1.0 - float(run.unserved[lo:hi].sum()) / waited
    extra = float(run.ready[lo:hi].sum() - reactive.ready[lo:hi].sum()) / 60.0
    return Side(kept, extra / max(1e-9, (hi - lo) / 1440))


def _log(pool: Pool, tuning: Tuning, pc: PoolChoice) -> None:
    """One line a refit: what tune's choice was and what the pool holds."""
    rec = pc.choice.held
    pasted = "nothing within the budget" if rec is None else rec.label()
    logger.info(
        "pool %s: tune's choice on %s: %s; holding %s", pool.name, pc.read, pasted, tuning.holding()
    )
