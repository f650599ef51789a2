"""Walk-forward refits for the backtest: the forecast in force at every minute, using only the past.

The model is refitted at the first scored minute and every `every` seconds after, on the history
known at that instant (at most the pool's `forecast.history` of it). The result lists each
forecast with the instant it comes into force, which `core.engine.PoolTimeline` plans from.

The same refits also serve the quantile sweep (`quantiles`): each forecast's burst profile is
recomputed at every swept quantile from the same fit's residuals (`at_quantile`), and the
model-free baseline is refitted at each, so the dial's price costs no extra Prophet fits.

Each refit depends only on the history known at its instant, so the refits run in worker
processes (`Refits.workers`, `replay.workers`): a refit's fit, its burst models at every swept
quantile and its baselines are one job (`refit`), and the results are read in refit order, so
they are the ones a single process makes.

With `Refits.cache`, each refit's result is kept on disk (`replay.refit_cache`): a refit already
kept for the same history slice, settings and code is read instead of fitted (a quantile it was
not swept at is swept from the kept fit), so the forecasts are the same with the cache and
without.

`Refits.curve` (`CurveRefit`) says how the forecast's curve is refitted between cuts: afresh at
every cut (`daily`, the default and the daemon's way), started from the previous cut's fitted
parameters (`warm`), or fitted at the first cut of each week and reused at the others (`weekly`);
the burst models are refitted at every cut in all three. A refit that starts from another is
linked to it (`curve_links`): it runs once that one is done, in waves of refits that depend only
on earlier waves, and its cache key holds the other's key (`RefitJob.after`). Only a refit at an
earlier cut is ever linked to, so a refit still reads only what was known at its cut. Whether
`warm` or `weekly` moves the replay's figures: `docs/forecast.md`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

import numpy as np

from predictive_headroom.core.engine import InForce
from predictive_headroom.core.series import Forecast, History, NoForecast, iso_utc
from predictive_headroom.core.settings import (
    ModelSpec,
    PlanSettings,
    SettingSource,
    model_spec,
    with_values,
)
from predictive_headroom.core.vocabulary import AT_ONCE, CurveRefit
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.durations import format_duration
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.progress import PIPE_LINE_SECONDS, RefitProgress, say_plan
from predictive_headroom.replay.workers import in_workers

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
    cached: int = 0
    """Refits read from the cache instead of fitted (`Refits.cache`)."""


class RefitStore(Protocol):
    """Where refits are kept across runs (`replay.refit_cache.RefitCache`)."""

    def key(self, job: RefitJob) -> str:
        """What `job`'s result depends on, hashed."""
        ...

    def kept(self, key: str) -> frozenset[float] | None:
        """The swept quantiles of the refit kept under `key` (None: none kept, or one that
        failed its check: dropped)."""
        ...

    def load(self, key: str, quantiles: Sequence[float]) -> Refitted | None:
        """The refit kept under `key` swept at `quantiles`, or None (none, one without every
        one of them, or one that failed to load: dropped)."""
        ...

    def storing(self) -> Callable[[tuple[str, RefitJob]], tuple[Refitted, bool]]:
        """The job the workers run: refit (or read the refit kept under its key and sweep the
        quantiles it lacks), keep it under its key, say whether it was kept."""
        ...

    def stored(self, ok: bool) -> None:
        """Note whether a refit was kept (the first failure warns)."""
        ...

    def trim(self) -> None:
        """Keep the store within its bound."""
        ...


@dataclass(frozen=True)
class Refits:
    """How a walk-forward refits: every `every` seconds with `forecaster`, the model-free baseline
    by `naive_fit`, both swept at `quantiles` from the same fits; `progress` says first what it
    will do, then draws a bar on a terminal, else a stderr line every `progress_seconds`;
    `workers` processes at a time; `cache` keeps each refit on disk (None: fit every one)."""

    every: float
    forecaster: Forecaster
    naive_fit: NaiveFit
    quantiles: Sequence[float] = ()
    progress: bool = False
    workers: int = 1
    """Refits run in this many worker processes at once (1: in this one)."""
    preload: tuple[str, ...] = ()
    """Modules the workers import once, before any refit (the forecaster's libraries)."""
    cache: RefitStore | None = None
    progress_seconds: float = PIPE_LINE_SECONDS
    curve: CurveRefit = CurveRefit.DAILY
    """How the forecast's curve is refitted between cuts (the module docstring)."""


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


@dataclass(frozen=True)
class RefitJob:
    """One refit, all it needs to run in another process: the history known at `at` (already
    cut), what to fit it with and for, and the quantiles to sweep."""

    known: History
    at: float
    horizon: float
    knobs: ModelSpec
    settings: PlanSettings
    forecaster: Forecaster
    naive_fit: NaiveFit
    quantiles: tuple[float, ...]
    curve: CurveRefit = CurveRefit.DAILY
    after: str = ""
    """The key of the earlier refit whose curve this one starts from ("": none)."""
    prior: object | None = None
    """That refit's curve (`Refitted.curve`), set once it is done; not in the key (`after` is)."""


class CurveForecaster(Protocol):
    """A forecaster that can start its curve from an earlier refit's (`ProphetForecaster`)."""

    def fit_curve(
        self,
        history: History,
        spec: ModelSpec,
        settings: PlanSettings,
        now: float,
        how: CurveRefit,
        prior: Any,
    ) -> tuple[Forecast | NoForecast, object | None]:
        """The forecast at `now`, and its curve for a later refit to start from (None: none)."""
        ...


@dataclass(frozen=True)
class Refitted:
    """A refit's forecasts: the model's and the baseline's at the pool's quantile, the same at
    each swept quantile (in `RefitJob.quantiles` order), and the seconds the model's fit took."""

    model: Forecast | NoForecast
    naive: Forecast
    swept: tuple[tuple[Forecast | NoForecast, Forecast], ...]
    fit_seconds: float
    curve: object | None = None
    """The curve a later refit starts from (`RefitJob.prior`; None with `CurveRefit.DAILY`)."""


def naive_at(job: RefitJob, quantile: float) -> Forecast:
    """`job`'s model-free baseline at `quantile`."""
    profile = job.naive_fit(job.known, job.settings.lead, quantile, job.at)
    return baseline_forecast(profile, job.at, job.horizon)


def fit_refit(job: RefitJob) -> Refitted:
    """`refit` without the sweep: `job`'s model and baseline at the pool's quantile (`swept`
    empty; `swept_at` adds each quantile from the same fit)."""
    started = time.perf_counter()
    curve: object | None = None
    if job.curve is CurveRefit.DAILY or not hasattr(job.forecaster, "fit_curve"):
        fitted = job.forecaster.fit(job.known, job.knobs, job.settings, job.at)
    else:
        forecaster: CurveForecaster = job.forecaster  # type: ignore[assignment]
        fitted, curve = forecaster.fit_curve(
            job.known, job.knobs, job.settings, job.at, job.curve, job.prior
        )
    seconds = time.perf_counter() - started
    return Refitted(fitted, naive_at(job, job.settings.quantile), (), seconds, curve)


def swept_at(
    job: RefitJob, fitted: Forecast | NoForecast, quantile: float
) -> tuple[Forecast | NoForecast, Forecast]:
    """The model's forecast `fitted` (`fit_refit`'s) and `job`'s baseline at `quantile`: the
    burst model at a quantile not yet read is fitted here, from the same refit."""
    swept_q = SettingSource.CONFIGURED  # a what-if of the dial, not a choice
    model = at_quantile(fitted, quantile, swept_q) if isinstance(fitted, Forecast) else fitted
    return model, naive_at(job, quantile)


def refit(job: RefitJob) -> Refitted:
    """Fit `job`'s model and baseline on its history and read both at every swept quantile
    (the burst models at the other quantiles are fitted here too, from the same refit)."""
    base = fit_refit(job)
    return replace(base, swept=tuple(swept_at(job, base.model, q) for q in job.quantiles))


CURVE_WEEK = 7 * 86400.0
"""The span of a `warm` chain (a fresh fit starts each) and of a `weekly` curve's reuse."""


def curve_links(refits: int, every: float, how: CurveRefit) -> list[int | None]:
    """For each of `refits` refits `every` seconds apart, the earlier refit whose curve it starts
    from (None: a fit afresh): `warm`, the one before, with a fresh fit at the first of each week;
    `weekly`, the first of its week; `daily`, none."""
    week = max(1, round(CURVE_WEEK / every))
    if how is CurveRefit.WARM:
        return [None if k % week == 0 else k - 1 for k in range(refits)]
    if how is CurveRefit.WEEKLY:
        return [None if k % week == 0 else k - k % week for k in range(refits)]
    return [None] * refits


def curve_waves(links: Sequence[int | None]) -> list[list[int]]:
    """The refits in waves, each after the wave of the refit it starts from (one wave: no links)."""
    depth: list[int] = []
    for link in links:
        depth.append(0 if link is None else depth[link] + 1)
    return [[k for k, d in enumerate(depth) if d == w] for w in range(max(depth, default=-1) + 1)]


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
    `refits.quantiles` from the same refits; in `refits.workers` processes, the same forecasts
    in the same order as in one, and the same read from `refits.cache` as fitted. Raises
    `WorkerDied` naming the refit whose worker died twice."""
    spec = pool.forecast
    assert spec is not None
    knobs = model if model is not None else model_spec(spec)
    every = refits.every
    refit_at = np.arange(times[first], times[-1] + 1, every)
    links = curve_links(len(refit_at), every, refits.curve)
    jobs, keys = _linked(
        _refit_jobs(history, pool, refit_at, knobs, settings, refits), links, refits
    )
    cache = refits.cache
    outs, held = _read_kept(cache, jobs, keys)
    if refits.progress:
        say_plan(history, pool.name, len(jobs), held, refits.workers, refits.curve)
    todo = [k for k in range(len(jobs)) if outs[k] is None]
    bar = RefitProgress(len(todo), refits.progress, refits.progress_seconds)
    try:
        for wave in curve_waves(links):
            run = [k for k in wave if outs[k] is None]
            for k in run:
                link = links[k]
                start = None if link is None else outs[link]
                jobs[k] = replace(jobs[k], prior=None if start is None else start.curve)
            fitted = _fit(jobs, run, keys, cache, refits, refit_at, history, bar)
            for k, out in zip(run, fitted, strict=True):
                outs[k] = out
    finally:
        bar.close()
    if cache is not None:
        cache.trim()
    done = [replace(out, curve=None) for out in outs if out is not None]  # let the curves go
    _let_go(done)  # those read from the cache (the fitted ones were let go as each came in)
    return replace(_walked(done, refit_at, refits.quantiles), cached=held[0] + held[1])


def _read_kept(
    cache: RefitStore | None, jobs: Sequence[RefitJob], keys: Sequence[str]
) -> tuple[list[Refitted | None], tuple[int, int, int]]:
    """The refits read from `cache` (None where a refit is to run), and what it held: refits
    with every quantile their job sweeps, refits lacking some (their jobs read them and sweep
    the rest), and how many quantiles those lack."""
    outs: list[Refitted | None] = [None] * len(jobs)
    if cache is None:
        return outs, (0, 0, 0)
    kept = [cache.kept(key) for key in keys]
    whole = [k for k, q in enumerate(kept) if q is not None and q >= set(jobs[k].quantiles)]
    new = {q for k, got in enumerate(kept) if got is not None for q in jobs[k].quantiles}
    new -= {q for got in kept if got is not None for q in got}
    for k in whole:
        outs[k] = cache.load(keys[k], jobs[k].quantiles)
    return outs, (len(whole), sum(q is not None for q in kept) - len(whole), len(new))


def _linked(
    jobs: list[RefitJob], links: Sequence[int | None], refits: Refits
) -> tuple[list[RefitJob], list[str]]:
    """`jobs` each with its curve refit and the key of the refit it starts from (`links`), and
    their keys in `refits.cache` (none without one)."""
    cache = refits.cache
    keys: list[str] = []
    out: list[RefitJob] = []
    for job, link in zip(jobs, links, strict=True):
        after = "" if link is None else (keys[link] if cache is not None else str(link))
        job = replace(job, curve=refits.curve, after=after)
        out.append(job)
        if cache is not None:
            keys.append(cache.key(job))
    return out, keys


@runtime_checkable
class LetsGo(Protocol):
    """A burst model that can let go of its training set once every quantile read is fitted."""

    def let_go(self) -> None:
        """Keep the fitted models, drop the training rows (a new quantile then raises)."""
        ...


def _let_go(outs: Sequence[Refitted]) -> None:
    """Let go of the burst models' training sets: each refit fitted every quantile the replay
    reads (the pool's and the swept ones), so this process need not keep their rows."""
    for out in outs:
        for fitted in (out.model, *(model for model, _ in out.swept)):
            if isinstance(fitted, Forecast) and isinstance(fitted.burst_model, LetsGo):
                fitted.burst_model.let_go()


def _fit(
    jobs: Sequence[RefitJob],
    todo: Sequence[int],
    keys: Sequence[str],
    cache: RefitStore | None,
    refits: Refits,
    refit_at: np.ndarray,
    history: History,
    bar: RefitProgress,
) -> list[Refitted]:
    """The refits `todo` of `jobs`, fitted (in workers) and, with a cache, stored there; each
    done ticks `bar` (the first says when the replay will be long)."""

    started = time.perf_counter()

    def done(k: int, out: Refitted) -> None:
        _let_go([out])  # as each comes in: the rest of the refits need not wait beside its rows
        if bar.done == 0:  # a kept refit swept at new quantiles took less than its fit once did
            took = min(out.fit_seconds, time.perf_counter() - started)
            _say_when_long(bar.total, took, refits.every, history, refits.workers)
        bar.tick()

    def name(k: int) -> str:
        return f"refit {todo[k] + 1}/{len(jobs)} at {iso_utc(float(refit_at[todo[k]]))}"

    if not todo:
        return []
    if cache is None:
        run = [jobs[k] for k in todo]
        return in_workers(refit, run, refits.workers, name=name, done=done, preload=refits.preload)
    keyed = [(keys[k], jobs[k]) for k in todo]
    pairs = in_workers(
        cache.storing(),
        keyed,
        refits.workers,
        name=name,
        done=lambda k, pair: done(k, pair[0]),
        preload=refits.preload,
    )
    for _, stored in pairs:
        cache.stored(stored)
    return [out for out, _ in pairs]


def _refit_jobs(
    history: History,
    pool: Pool,
    refit_at: np.ndarray,
    knobs: ModelSpec,
    settings: PlanSettings,
    refits: Refits,
) -> list[RefitJob]:
    """One job per refit instant, each holding only the history known then."""
    spec = pool.forecast
    assert spec is not None
    return [
        RefitJob(
            # Like every decision at `at`, the refit sees only the samples at or before `at - delay`.
            history.until(float(at) - settings.delay).since(
                float(at) - settings.delay - spec.history.total_seconds()
            ),
            float(at),
            spec.horizon.total_seconds(),
            knobs,
            settings,
            refits.forecaster,
            refits.naive_fit,
            tuple(refits.quantiles),
        )
        for at in refit_at
    ]


def _walked(
    outs: Sequence[Refitted], refit_at: np.ndarray, quantiles: Sequence[float]
) -> WalkForward:
    """The refits' results, in refit order, as the forecasts in force from each instant."""
    models: dict[str, int] = {}
    for out in outs:
        fitted = out.model
        key = fitted.model if isinstance(fitted, Forecast) else f"none:{fitted.why}"
        models[key] = models.get(key, 0) + 1

    def in_force(forecasts: Sequence[Forecast | NoForecast]) -> InForce:
        return [(float(at), f) for at, f in zip(refit_at, forecasts, strict=True)]

    dial = {
        q: (in_force([o.swept[i][0] for o in outs]), in_force([o.swept[i][1] for o in outs]))
        for i, q in enumerate(quantiles)
    }
    fit_seconds = sum(o.fit_seconds for o in outs)
    return WalkForward(
        in_force([o.model for o in outs]),
        in_force([o.naive for o in outs]),
        dial,
        len(refit_at),
        fit_seconds,
        models,
    )


LONG_REPLAY_SECONDS = 600.0
"""A replay projected to take longer than this is said before it goes on."""


def _say_when_long(
    refits: int, first: float, every: float, history: History, workers: int = 1
) -> None:
    """Warn, with the projection, when `refits` refits of `first` seconds each, `workers` at a
    time, take long."""
    projected = refits * first / max(1, workers)
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
        extra={AT_ONCE: True},  # said before the long replay, not after it
    )
