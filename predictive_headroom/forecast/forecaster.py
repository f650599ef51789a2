"""Forecasters: Prophet, and the seasonal-naive fallback used on cold start or when Prophet fails.

Both take a `History`, use only the samples at or before `now`, and forecast `spec.horizon` ahead
of `now` at `spec.step`, starting at the last step boundary at or before `now` so the planner can
read the forecast at `now` itself. Output is clipped at zero; the interval is `[lower, upper]` at
`spec.interval_width`, `burst` is the profile of `predictive_headroom.forecast.burst` and
`burst_model` the conditional model of `predictive_headroom.forecast.burst_model`.

Cold start, measured as `end - start + step` of the history known at `now`:
- under one day: `NoForecast(NoForecastWhy.INSUFFICIENT_HISTORY)`;
- from one day up to `spec.min_history`: seasonal naive (model `seasonal-naive`) with a warning;
- from `spec.min_history`: Prophet (model `prophet`), falling back to seasonal naive if it fails.
  With enough history Prophet is blended with seasonal naive and level-corrected as a validation
  window at the end of the history decides (see `ProphetForecaster`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial

import numpy as np

from predictive_headroom.core.series import (
    DAY_SECONDS,
    BurstProfile,
    Forecast,
    History,
    NoForecast,
)
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.core.vocabulary import CurveRefit, NoForecastWhy
from predictive_headroom.forecast.blend import (
    Choice,
    abs_quantile,
    choose,
    recent_level,
)
from predictive_headroom.forecast.burst import (
    DEFAULT_BIN_SECONDS,
    burst_profile,
    regular_grid,
)
from predictive_headroom.forecast.burst_model import BurstTrainer
from predictive_headroom.forecast.burst_model import train as train_burst_model
from predictive_headroom.forecast.calibrate import (
    band_scale,
    rolling_errors,
    without_outlier_days,
)
from predictive_headroom.forecast.hourly import hourly_profile
from predictive_headroom.forecast.naive import (
    band,
    forecast_times,
    history_length,
    naive_errors,
    seasonal_naive,
    wider,
    working_step,
)
from predictive_headroom.forecast.prophet_model import (
    Curve,
    Fit,
    fitted_model,
    predict,
    warm_params,
)

logger = logging.getLogger(__name__)

WEEKLY_MIN_DAYS = 7.0
"""Fit weekly seasonality from one full week of history on (Prophet's own default needs two)."""
VALIDATION_MIN_TRAIN_DAYS = 7.0
"""Validate only when a full week of training is left before the validation window."""


class ProphetForecaster:
    """Prophet with explicit daily and weekly seasonality, validated against seasonal naive, and a
    burst allowance. `fit` returns a `Forecast` on the data's own grid over `spec.horizon`, or a
    `NoForecast` saying why (too little history, ...). It promises:

    - a flat trend with daily (order 12) and weekly (order 40, from one week of history)
      seasonality, fitted on bucket means of at most `max_fit_points` points;
    - with at least `VALIDATION_MIN_TRAIN_DAYS` before a `validation_seconds` window: Prophet's
      weight against seasonal naive and a level correction chosen on that window by mean absolute
      error, applied to the Prophet fitted on all the history (`yhat`);
    - a symmetric interval holding `interval_width` of out-of-sample errors (the blend's on the
      validation window and last week's seasonal naive), widened by `forecast.calibrate`; days far
      from their weekday's median day are left out of the final fit;
    - `Forecast.model_curve`: Prophet's own curve plus the within-hour profile (`hourly`), which the
      planner reads the ramp from and the burst allowance is measured against;
    - with `burstModel: quantile`, the conditional burst model of `forecast.burst_model` fitted on
      the same history (`burst_model`, other quantiles through `burst_model_for`), the
      time-of-day table (`burst`) as its fallback.

    Other arguments go to Prophet unchanged. Why these defaults: `docs/measurements.md`.
    """

    # Many arguments on purpose: Prophet's knobs and ours, keyword-only, each with its default.
    def __init__(  # noqa: PLR0913
        self,
        *,
        growth: str = "flat",
        daily_order: int = 12,
        weekly_order: int = 40,
        seasonality_mode: str = "additive",
        changepoint_prior_scale: float = 0.05,
        changepoint_range: float = 0.8,
        max_fit_points: int = 3000,
        burst_bin_seconds: float = DEFAULT_BIN_SECONDS,
        validation_seconds: float = 2 * DAY_SECONDS,
        level_seconds: float = 2 * DAY_SECONDS,
        validation_folds: int = 1,
        hourly: bool = True,
    ) -> None:
        self.growth = growth
        self.daily_order = daily_order
        self.weekly_order = weekly_order
        self.seasonality_mode = seasonality_mode
        self.changepoint_prior_scale = changepoint_prior_scale
        self.changepoint_range = changepoint_range
        self.max_fit_points = max_fit_points
        self.burst_bin_seconds = burst_bin_seconds
        self.validation_seconds = validation_seconds
        self.level_seconds = level_seconds
        self.validation_folds = validation_folds
        self.hourly = hourly

    def fit(
        self, history: History, spec: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast | NoForecast:
        """Fit on the history known at `now` and forecast `spec.horizon` ahead, the burst
        allowance for `settings` (lead time, burst quantile, observation delay; the forecast
        records them as `fitted_for`). See the module docstring."""
        return self.fit_curve(history, spec, settings, now)[0]

    def fit_curve(
        self,
        history: History,
        spec: ModelSpec,
        settings: PlanSettings,
        now: float,
        how: CurveRefit = CurveRefit.DAILY,
        prior: Curve | None = None,
    ) -> tuple[Forecast | NoForecast, Curve | None]:
        """`fit`, and the Prophet fits it made (None when it fitted none: too little history, or
        the fallback). With `prior`, an earlier refit's fits (on history before `now`): `WARM`
        starts each Prophet fit from the matching fit's parameters; `WEEKLY` reuses them as they
        are, read at the times of the history known now (the days since their fit out of sample);
        a validation fold `prior` lacks is fitted afresh. `DAILY` ignores `prior` (`fit`)."""
        started = time.perf_counter()
        start = None if how is CurveRefit.DAILY else prior
        known = history.until(now)
        length = history_length(known)
        if length < DAY_SECONDS:
            return NoForecast(
                NoForecastWhy.INSUFFICIENT_HISTORY,
                f"{length / 3600:.1f} h of history up to now; at least 24 h is needed for any forecast",
            ), None
        notes: list[str] = []
        if now - known.end > DAY_SECONDS:
            notes.append(f"history ends {(now - known.end) / 3600:.1f} h before now")
        if length < spec.min_history.total_seconds():
            notes.append(
                f"cold start: {length / 86400:.1f} d of history is under minHistory "
                f"{spec.min_history.total_seconds() / 86400:g} d; using seasonal naive"
            )
            return self._fallback(known, spec, settings, now, notes, started), None
        try:
            return self._prophet(known, spec, settings, now, notes, started, (how, start))
        except (
            Exception
        ) as exc:  # Prophet/Stan failures are many and varied; the fallback still serves.
            logger.warning(
                "Prophet fit failed for %s, using seasonal naive: %s", known.source or "series", exc
            )
            notes.append(f"prophet failed ({type(exc).__name__}: {exc}); using seasonal naive")
            return self._fallback(known, spec, settings, now, notes, started), None

    @staticmethod
    def _fallback(
        known: History,
        spec: ModelSpec,
        settings: PlanSettings,
        now: float,
        notes: list[str],
        started: float,
    ) -> Forecast:
        naive = seasonal_naive(known, spec, now, settings)
        return replace(
            naive,
            fit_seconds=time.perf_counter() - started,
            warnings=tuple(notes) + naive.warnings,
            fitted_for=settings,
        )

    def _prophet(
        self,
        known: History,
        spec: ModelSpec,
        settings: PlanSettings,
        now: float,
        notes: list[str],
        started: float,
        start: tuple[CurveRefit, Curve | None] = (CurveRefit.DAILY, None),
    ) -> tuple[Forecast, Curve]:
        """Fit Prophet on `known` and forecast `spec.horizon` from `now`: the validated blend, its
        band and the burst allowance for `settings`, and the Prophet fits made (each from `start`,
        as `fit_curve` says); appends warnings to `notes`.

        Raises ValueError when Prophet produces non-finite values (the caller falls back).
        """
        step, times, values, weekly = _grid(known, spec, notes)
        out = forecast_times(spec, now, known.start)
        # The final fit leaves out anomalous days (a blizzard, a holiday); validation fits keep them.
        how, prior = start
        final = _Start(how, None if prior is None else prior.final)
        fit = self._fit(
            times, without_outlier_days(times, values), step, weekly, spec, notes, final
        )
        fitted = fit.fitted
        yhat = fit.predict(out)
        if not (np.all(np.isfinite(fitted)) and np.all(np.isfinite(yhat))):
            raise ValueError("Prophet produced non-finite values")
        shape = np.maximum(yhat, 0.0)
        folds: dict[int, Fit] = {}
        yhat, lo, hi = self._blend(
            known, spec, now, (times, values, fitted), yhat, notes, start, folds
        )
        grid = History(times, values, known.source)
        burst_for = partial(
            burst_profile,
            grid,
            fitted,
            settings.lead,
            step_seconds=step,
            bin_seconds=self.burst_bin_seconds,
        )
        burst: BurstProfile = burst_for(settings.quantile)
        trainer = _burst_trainer(known, spec, settings, (times, fitted), notes)
        yhat = np.maximum(yhat, 0.0)
        forecast = Forecast(
            times=out,
            yhat=yhat,
            lower=np.maximum(yhat + lo, 0.0),
            upper=np.maximum(yhat + hi, 0.0),
            model="prophet",
            history_end=known.end,
            fit_seconds=time.perf_counter() - started,
            burst=burst,
            warnings=tuple(notes),
            model_curve=shape,
            burst_for=burst_for,
            burst_model=None if trainer is None else trainer.model(settings.quantile),
            burst_model_for=None if trainer is None else trainer.model,
            fitted_for=settings,
        )
        return forecast, Curve(fit, folds)

    def _blend(
        self,
        known: History,
        spec: ModelSpec,
        now: float,
        grid: tuple[np.ndarray, np.ndarray, np.ndarray],
        yhat: np.ndarray,
        notes: list[str],
        start: tuple[CurveRefit, Curve | None] = (CurveRefit.DAILY, None),
        fits: dict[int, Fit] | None = None,
    ) -> tuple[np.ndarray, float, float]:
        """The point forecast and the band's offsets (lo, hi) to add to it; the validation's
        Prophet fits (each from `start`) are kept in `fits` by fold.

        `grid` is (times, values, in-sample fit) of the history on its working grid; `yhat` is
        Prophet's forecast. Without a validation choice (short history) `yhat` is returned as is,
        with the wider of the in-sample and seasonal-naive residual bands; otherwise the blend the
        validation chose, with a symmetric band. Appends a note when seasonal naive outweighs Prophet.
        """
        times, values, fitted = grid
        choice = self._validate(known, spec, start, fits)
        if choice is None:
            lo, hi = wider(
                band(values - fitted, spec.interval_width),
                band(naive_errors(times, values, history_length(known)), spec.interval_width),
            )
            return yhat, lo, hi
        naive = seasonal_naive(known, spec, now).yhat
        yhat = choice.combine(yhat, recent_level(times, values - fitted, self.level_seconds), naive)
        # Half-width: the mean of two error sizes, out of sample at the horizon (validation) and
        # last week's seasonal naive; symmetric, so one event in either window (a blizzard)
        # cannot collapse one side of the band.
        recent_naive = naive_errors(times, values, history_length(known))
        half = (
            abs_quantile(choice.errors, spec.interval_width)
            + abs_quantile(recent_naive, spec.interval_width)
        ) / 2
        half *= band_scale(
            rolling_errors(times, values - fitted, self.validation_seconds),
            half,
            spec.interval_width,
            low=1.0,
        )
        if choice.weight < 0.5:
            notes.append(
                f"seasonal naive forecast the last {self.validation_seconds / 3600:g} h better than "
                f"Prophet: weighted {1 - choice.weight:.0%} in the blend"
            )
        return yhat, -half, half

    def _validate(
        self,
        known: History,
        spec: ModelSpec,
        start: tuple[CurveRefit, Curve | None] = (CurveRefit.DAILY, None),
        fits: dict[int, Fit] | None = None,
    ) -> Choice | None:
        """Forecast each of the last `validation_folds` windows of `validation_seconds` from a fit on the
        history before it (started from `start`'s matching fold, kept in `fits` by fold), and pick
        the blend that did best over them.

        None when the history is too short to keep `VALIDATION_MIN_TRAIN_DAYS` of training before the
        earliest window (fewer folds are used when that leaves at least one).
        """
        span = self.validation_seconds
        length = history_length(known)
        room = length - VALIDATION_MIN_TRAIN_DAYS * DAY_SECONDS
        folds = min(self.validation_folds, int(room // span)) if span > 0 and room > 0 else 0
        parts: list[tuple[np.ndarray, ...]] = []
        for k in range(folds):
            cut = known.end - (k + 1) * span
            train, held = known.until(cut), known.since(cut + 1e-6).until(cut + span)
            ok = np.isfinite(held.values)
            if not ok.any():
                continue
            step = working_step(train, spec)
            times, values = regular_grid(train, step)
            weekly = history_length(train) >= WEEKLY_MIN_DAYS * DAY_SECONDS
            fit = self._fit(times, values, step, weekly, spec, [], _fold(start, k))
            if fits is not None:
                fits[k] = fit
            level = recent_level(times, values - fit.fitted, self.level_seconds)
            wide = replace(spec, horizon=timedelta(seconds=span + step))
            naive = seasonal_naive(train, wide, cut)
            at = held.times[ok]
            naive_at = np.interp(at, naive.times, naive.yhat)
            parts.append((held.values[ok], fit.predict(at), np.full(at.size, level), naive_at))
        if not parts:
            return None
        actual, prophet, level, naive = (np.concatenate(c) for c in zip(*parts, strict=False))
        return choose(actual, prophet, level, naive)

    def _fit(
        self,
        times: np.ndarray,
        values: np.ndarray,
        step: float,
        weekly: bool,
        spec: ModelSpec,
        notes: list[str],
        start: _Start | None = None,
    ) -> Fit:
        """Prophet on `values`, plus the within-hour profile of its residuals (see
        `predictive_headroom.forecast.hourly`). From `start`'s earlier fit: `WEEKLY` reuses it
        (read at `times`), `WARM` fits starting from its parameters."""
        prior = None if start is None else start.fit
        if prior is not None and start is not None and start.how is CurveRefit.WEEKLY:
            return Fit(prior.model, prior.hourly, prior.predict(times))
        init = None if prior is None else warm_params(prior.model)
        model = fitted_model(self, times, values, step, weekly, spec, notes, init)
        fitted = predict(model, times)
        hourly = hourly_profile(times, values - fitted, step) if self.hourly else None
        return Fit(model, hourly, fitted if hourly is None else fitted + hourly(times))


@dataclass(frozen=True)
class _Start:
    """Where one Prophet fit starts: `how`, from the earlier `fit` (None: afresh)."""

    how: CurveRefit
    fit: Fit | None


def _fold(start: tuple[CurveRefit, Curve | None], k: int) -> _Start:
    """Where validation fold `k`'s fit starts: the earlier curve's fold `k`, if it has one."""
    how, prior = start
    return _Start(how, None if prior is None else prior.folds.get(k))


def _grid(
    known: History, spec: ModelSpec, notes: list[str]
) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """(step, times, values, weekly): `known` on its working grid (NaN where a point is missing) and
    whether it is long enough for weekly seasonality; notes missing points and weekly off."""
    step = working_step(known, spec)
    times, values = regular_grid(known, step)
    missing = int(np.isnan(values).sum())
    if missing:
        notes.append(f"{missing} of {values.size} points missing in history (gaps are skipped)")
    weekly = history_length(known) >= WEEKLY_MIN_DAYS * DAY_SECONDS
    if not weekly:
        notes.append(f"weekly seasonality off: under {WEEKLY_MIN_DAYS:g} days of history")
    return step, times, values, weekly


def _burst_trainer(
    known: History,
    spec: ModelSpec,
    settings: PlanSettings,
    fit: tuple[np.ndarray, np.ndarray],
    notes: list[str],
) -> BurstTrainer | None:
    """The conditional burst model's trainer when `spec` asks for it and there is enough history;
    None otherwise (with a note when it was asked for). `fit` is (times, in-sample fit)."""
    if spec.burst_model != "quantile":
        return None
    trainer = train_burst_model(known, settings.lead, settings.delay, fit)
    if trainer is None:
        notes.append("burst model: under a day of usable history; using the time-of-day table")
    return trainer
