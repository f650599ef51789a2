"""The daemon tunes itself: a pool with `protection:` re-tunes its burst quantile and scale-down
stabilisation window at each refit, on its own recent history (issue 23, item 4).

At a refit at time T, with a tuning window W (7 days by default, `PH_RETUNE_WINDOW`):

1. one extra fit of the pool's forecast on the history known at T - W (like every backtest
   refit: up to the observation delay before it, at most `forecast.history` of it), with a
   horizon covering the window, so the replay never uses a forecast fitted on the days it replays;
2. the one plan engine replays the pool (its floors included) over [T - W, T] on the simulated
   cluster of the backtest, at every (burst quantile, window) pair of a small grid
   (`backtest.tuning.replay_grid`: one replay per quantile, each window a trailing maximum);
3. `backtest.tuning.choose` picks the cheapest setting reaching the target protection, else the
   most protective one reached (status `best-reached`, with the reason).

Only samples at or before T are read (the history is cut at T first), so the choice is
walk-forward by construction. When the history is too short for a fit plus the window, or the
extra fit or the replay fails, the pool keeps its defaults (burstQuantile 0.95, its own
scaleDownStabilization) and the reason says why (status `default`). The floors (schedules,
proportional, min) never depend on the choice: only the forecast component's quantile and the
scale-down hold change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np

from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import resolve
from predictive_headroom.backtest.simulator import score
from predictive_headroom.backtest.tuning import Setting, choose, replay_grid
from predictive_headroom.core.series import DAY_SECONDS, Forecast, History, NoForecast
from predictive_headroom.core.settings import PlanSettings, Tuned, resolve_settings
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster

logger = logging.getLogger(__name__)

RETUNE_WINDOW = 7 * DAY_SECONDS
"""The recent history each re-tune replays (the fit it replays with ends where it starts)."""
RETUNE_QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)
RETUNE_WINDOWS = (300.0, 900.0, 1800.0)
"""The default grid: 5 quantiles x 3 windows, 5 engine replays (`bench/retune_bench.py`)."""
REPLAY_WARMUP = 3600.0
"""Unscored minutes before the replayed window, for the simulated cluster to settle."""


@dataclass(frozen=True)
class Tuning:
    """What a re-tune chose for one pool at one refit, and why.

    `status`: `tuned` (the cheapest setting reaching the target), `best-reached` (none reached
    it: the most protective one), `default` (could not tune: the pool's defaults, see `reason`).
    `protection` and `overhead_node_hours` are those of the chosen setting on the replayed days
    (None for `default`)."""

    pool: str
    status: str
    burst_quantile: float
    stabilization_seconds: float
    target: float
    reason: str
    at: float
    protection: float | None = None
    overhead_node_hours: float | None = None
    days: float = 0.0
    fitted_until: float | None = None
    seconds: float = 0.0

    @property
    def tuned(self) -> Tuned:
        """What `core.settings.resolve_settings` takes from this re-tune: the chosen quantile and
        window, or nothing when it could not tune (`default`: the pool's own settings stand)."""
        if self.status == "default":
            return Tuned()
        return Tuned(self.burst_quantile, self.stabilization_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "burst_quantile": self.burst_quantile,
            "scale_down_stabilization_seconds": self.stabilization_seconds,
            "protection_target": self.target,
            "protection_reached": None if self.protection is None else round(self.protection, 4),
            "overhead_node_hours": None
            if self.overhead_node_hours is None
            else round(self.overhead_node_hours, 2),
            "days": round(self.days, 2),
            "fitted_until": self.fitted_until,
            "at": self.at,
            "seconds": round(self.seconds, 2),
            "reason": self.reason,
        }


def retune(
    pool: Pool,
    history: History,
    at: float,
    forecaster: Forecaster,
    settings: PlanSettings | None = None,
    *,
    window_seconds: float = RETUNE_WINDOW,
    quantiles: Sequence[float] = RETUNE_QUANTILES,
    windows: Sequence[float] = RETUNE_WINDOWS,
) -> Tuning:
    """Choose `pool`'s burst quantile and stabilisation window at `at` from `history` (see the
    module docstring), the other settings being `settings` (the pool's before tuning, with its
    measured lead time; None: its configuration). Never raises for bad data: a `default` Tuning
    says why instead."""
    assert pool.forecast is not None and pool.protection is not None
    started = time.perf_counter()
    settings = settings or resolve_settings(pool)

    def fallback(why: str) -> Tuning:
        return _default(pool, settings, at, why, started)

    known = history.until(at)
    need = window_seconds + pool.forecast.min_history.total_seconds()
    if not len(known) or known.span_seconds < need:
        have = known.span_seconds / DAY_SECONDS if len(known) else 0.0
        return fallback(
            f"history too short to tune: {have:.1f} days, needs {need / DAY_SECONDS:.1f} "
            f"({window_seconds / DAY_SECONDS:g} days to replay after a fit on at least "
            f"{pool.forecast.min_history.total_seconds() / 3600:g} hours)"
        )
    try:
        return _tune(
            pool, settings, known, at, forecaster, window_seconds, quantiles, windows, started
        )
    except Exception as exc:  # a failed tune never stops the refit: the defaults stand in
        logger.exception("pool %s: re-tune failed", pool.name)
        return fallback(f"re-tune failed: {type(exc).__name__}: {exc}")


def _tune(
    pool: Pool,
    plan_settings: PlanSettings,
    known: History,
    at: float,
    forecaster: Forecaster,
    window_seconds: float,
    quantiles: Sequence[float],
    windows: Sequence[float],
    started: float,
) -> Tuning:
    assert pool.protection is not None
    target = pool.protection
    begin = known.end - window_seconds
    fitted, train = _fit_before(pool, plan_settings, known, begin, window_seconds, forecaster)
    if not isinstance(fitted, Forecast):
        detail = f": {fitted.detail}" if fitted.detail else ""
        why = f"the fit at the start of the tuning window gave no forecast ({fitted.why}{detail})"
        return _default(pool, plan_settings, at, why, started)
    candidates, reactive_unserved, days = _replay(
        pool, plan_settings, known, begin, fitted, window_seconds, quantiles, windows
    )
    setting, reached = choose(candidates, reactive_unserved, target)
    cost = next(c for s, c, _ in candidates if s == setting)
    status, reason = _verdict(setting, reached, target, cost, len(candidates), days)
    logger.info("pool %s: re-tuned: %s", pool.name, reason)
    return Tuning(
        pool.name,
        status,
        setting.quantile,
        setting.window,
        target,
        reason,
        at,
        reached,
        cost,
        days,
        float(train.end) if len(train) else None,
        time.perf_counter() - started,
    )


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
    request = spec.model_copy(update={"horizon": horizon})  # the fit's span, not a setting
    return forecaster.fit(train, request, settings.lead, begin), train


Candidate = tuple[Setting, float, float]
"""(setting, overhead node-hours over reactive, unserved pod-minutes) on the replayed window."""


def _replay(
    pool: Pool,
    plan_settings: PlanSettings,
    known: History,
    begin: float,
    fitted: Forecast,
    window_seconds: float,
    quantiles: Sequence[float],
    windows: Sequence[float],
) -> tuple[list[Candidate], float, float]:
    """Every (quantile, window) of the grid replayed over [begin, known.end] through the engine on
    the simulated cluster: the candidates, reactive's unserved pod-minutes and the days scored."""
    # The replay covers the window only (plus an unscored hour for the simulated cluster to settle).
    replayed = known.since(begin - REPLAY_WARMUP)
    settings = BacktestSettings(
        warmup_seconds=begin - replayed.start,
        refit_every_seconds=2 * window_seconds,
        burst_view=False,
    )
    # The burst model reads its features from every sample known before each replayed minute.
    r = replace(resolve(replayed, pool, settings, plan_settings), history=known)
    begin = float(r.times[r.start])
    parts = {"forecast": {q: [(begin, fitted.at_quantile(q))] for q in sorted(set(quantiles))}}
    grid = replay_grid(
        r.pool, r.plan_settings, parts, sorted(set(windows)), r.plan, r.simulate, r.start
    )
    reactive = score(r.simulate(np.zeros(r.pods.size, dtype=np.int64)), r.start)
    candidates = [
        (g.setting, g.metrics.node_hours - reactive.node_hours, g.metrics.unserved_pod_minutes)
        for g in grid
    ]
    return candidates, reactive.unserved_pod_minutes, (float(r.times[-1]) - begin) / DAY_SECONDS


def _verdict(
    setting: Setting, reached: float, target: float, cost: float, count: int, days: float
) -> tuple[str, str]:
    """The status (`tuned` or `best-reached`) and the reason, in words."""
    label = f"burstQuantile {setting.quantile:g}, scaleDownStabilization {setting.window / 60:g}m"
    if reached >= target - 1e-12:
        return "tuned", (
            f"cheapest of {count} settings absorbing at least {100 * target:g}% on the "
            f"last {days:.1f} days: {label} absorbed {100 * reached:.1f}% for {cost:.1f} overhead node-hours"
        )
    return "best-reached", (
        f"no setting of {count} absorbs {100 * target:g}% on the last {days:.1f} days; "
        f"the most protective, {label}, absorbed {100 * reached:.1f}% for {cost:.1f} overhead node-hours"
    )


def _default(pool: Pool, settings: PlanSettings, at: float, why: str, started: float) -> Tuning:
    assert pool.forecast is not None and pool.protection is not None
    q0, w0 = settings.quantile, settings.window
    logger.info("pool %s: cannot tune (%s); planning with the defaults", pool.name, why)
    return Tuning(
        pool.name,
        "default",
        q0,
        w0,
        pool.protection,
        f"{why}; using burstQuantile {q0:g} and scaleDownStabilization {w0 / 60:g}m",
        at,
        seconds=time.perf_counter() - started,
    )
