"""Walk-forward refits for the backtest: the forecast in force at every minute, using only the past.

The model is refitted at the first scored minute and every `every` seconds after, on the history
known at that instant (at most the pool's `forecast.history` of it). The result lists each
forecast with the instant it comes into force, which `core.engine.PoolTimeline` plans from.

The same refits also serve the quantile sweep (`quantiles`): each forecast's burst profile is
recomputed at every swept quantile from the same fit's residuals (`at_quantile`), and the
model-free baseline is refitted at each, so the dial's price costs no extra Prophet fits.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np
from tqdm import tqdm

from predictive_headroom.core.engine import InForce
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import (
    ModelSpec,
    PlanSettings,
    SettingSource,
    model_spec,
    with_values,
)
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.durations import format_duration
from predictive_headroom.protocols import Forecaster

logger = logging.getLogger(__name__)

NaiveFit = Callable[
    [History, float, float, float], Any
]  # (history, lead, quantile, now) -> BurstProfile


@dataclass
class WalkForward:
    """The forecasts of the model and of the naive baseline, each in force from its refit instant
    (at the pool's quantile and at each swept quantile), and what fitting cost."""

    model: InForce
    naive: InForce
    dial: dict[float, tuple[InForce, InForce]]
    refits: int
    fit_seconds: float
    models: dict[str, int]


@dataclass(frozen=True)
class Refits:
    """How a walk-forward refits: every `every` seconds with `forecaster`, the model-free baseline
    by `naive_fit`, both swept at `quantiles` from the same fits; `progress` draws a bar on a
    terminal, else a stderr line each `progress_every` refits."""

    every: float
    forecaster: Forecaster
    naive_fit: NaiveFit
    quantiles: Sequence[float] = ()
    progress: bool = False
    progress_every: int = 10


def baseline_forecast(profile: Any, now: float, horizon: float) -> Forecast:
    """The model-free baseline as a forecast: a flat curve (so no ramp) carrying the naive burst
    table, which alone sizes the forecast component."""
    times = np.array([now, now + horizon])
    zero = np.zeros(2)
    return Forecast(times, zero, zero, zero, "naive-burst", now, 0.0, profile)


def at_quantile(forecast: Forecast, quantile: float, source: SettingSource) -> Forecast:
    """`forecast` with its burst allowance (table and model) at `quantile`, read off the same fit's
    residuals (unchanged where the forecaster cannot), its `fitted_for` saying the quantile came
    from `source` (the dial's what-if, or a re-tune's candidate)."""
    out = forecast
    fitted_for = forecast.fitted_for
    if fitted_for is not None and fitted_for.quantile != quantile:
        out = replace(out, fitted_for=with_values(fitted_for, source, burst_quantile=quantile))
    if forecast.burst_for is not None and not (
        forecast.burst is not None and forecast.burst.quantile == quantile
    ):
        out = replace(out, burst=forecast.burst_for(quantile))
    if forecast.burst_model_for is not None and not (
        forecast.burst_model is not None and forecast.burst_model.quantile == quantile
    ):
        out = replace(out, burst_model=forecast.burst_model_for(quantile))
    return out


def walk_forward(
    history: History,
    pool: Pool,
    times: np.ndarray,
    first: int,
    settings: PlanSettings,
    refits: Refits,
    model: ModelSpec | None = None,
) -> WalkForward:
    """Refit at times[first] and every `refits.every` seconds after on the history known then (up
    to the observation delay before it), for `settings` (the pool's, resolved by the caller) and
    the forecaster's knobs `model` (None: the pool's forecast section's), sweeping the burst
    `refits.quantiles` from the same refits."""
    spec = pool.forecast
    assert spec is not None
    knobs = model if model is not None else model_spec(spec)
    lead, horizon, every = settings.lead, spec.horizon.total_seconds(), refits.every
    forecaster, naive_fit, progress = refits.forecaster, refits.naive_fit, refits.progress
    refit_at = np.arange(times[first], times[-1] + 1, every)
    model: list[Forecast | NoForecast] = []
    naive: list[Forecast | NoForecast] = []
    swept: dict[float, tuple[list[Forecast | NoForecast], list[Forecast | NoForecast]]] = {
        q: ([], []) for q in refits.quantiles
    }
    fit_seconds, models = 0.0, {}
    bar = _progress_bar(len(refit_at), progress)
    began = time.perf_counter()
    for k, at in enumerate(refit_at):
        if k == 1:
            _say_when_long(len(refit_at), time.perf_counter() - began, every, history)
        # Like every decision at `at`, the refit sees only the samples at or before `at - delay`.
        seen = float(at) - settings.delay
        known = history.until(seen).since(seen - spec.history.total_seconds())
        started = time.perf_counter()
        fitted = forecaster.fit(known, knobs, settings, float(at))
        fit_seconds += time.perf_counter() - started
        key = fitted.model if isinstance(fitted, Forecast) else f"none:{fitted.why}"
        models[key] = models.get(key, 0) + 1
        model.append(fitted)
        naive.append(
            baseline_forecast(
                naive_fit(known, lead, settings.quantile, float(at)), float(at), horizon
            )
        )
        for q, (mq, nq) in swept.items():
            swept_q = SettingSource.CONFIGURED  # a what-if of the dial, not a choice
            mq.append(at_quantile(fitted, q, swept_q) if isinstance(fitted, Forecast) else fitted)
            nq.append(baseline_forecast(naive_fit(known, lead, q, float(at)), float(at), horizon))
        _tick(bar, progress, k + 1, len(refit_at), refits.progress_every, fit_seconds)
    bar.close()

    def in_force(forecasts: list[Forecast | NoForecast]) -> InForce:
        return [(float(at), f) for at, f in zip(refit_at, forecasts, strict=True)]

    dial = {q: (in_force(mq), in_force(nq)) for q, (mq, nq) in swept.items()}
    return WalkForward(in_force(model), in_force(naive), dial, len(refit_at), fit_seconds, models)


def _tick(bar: Any, progress: bool, done: int, total: int, every_line: int, fitted: float) -> None:
    """One refit done: the bar moves, or without a terminal a line every `every_line` refits."""
    bar.update(1)
    if progress and bar.disable and (done % every_line == 0 or done == total):
        print(
            f"backtest: refit {done}/{total} ({fitted:.0f}s fitting)", file=sys.stderr, flush=True
        )


LONG_REPLAY_SECONDS = 600.0
"""A replay projected to take longer than this is said before it goes on."""


def _say_when_long(refits: int, first: float, every: float, history: History) -> None:
    """Warn, with the projection, when `refits` refits of `first` seconds each take long."""
    projected = refits * first
    if projected <= LONG_REPLAY_SECONDS:
        return
    span = (history.end - history.start) / 86400 if len(history) else 0.0
    logger.warning(
        "backtest: %s samples over %.0f days make %s refits (one every %s); the first took "
        "%.1fs, so the replay takes about %s; replay a recent window instead (--since 60d, "
        "as backtest and tune take it) or refit less often (--refit-every)",
        f"{len(history):,}",
        span,
        f"{refits:,}",
        format_duration(timedelta(seconds=every)),
        first,
        format_duration(timedelta(seconds=round(projected))),
    )


def _progress_bar(total: int, progress: bool) -> Any:
    return tqdm(
        total=total,
        desc="refits",
        unit="fit",
        file=sys.stderr,
        disable=not (progress and sys.stderr.isatty()),
    )
