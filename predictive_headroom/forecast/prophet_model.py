"""Prophet itself: the model as the forecaster configures it, its training frame and predictions.

Kept apart from `forecaster` (which validates, blends and sizes the interval) so each reads on
its own. Prophet is imported late: it is slow to import and needs a writable TMPDIR.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.core.settings import ModelSpec
from predictive_headroom.forecast.hourly import HourlyProfile


def _silence_prophet_logs() -> None:
    """Keep Prophet and cmdstanpy to warnings: no per-fit 'Chain [1] start processing' lines."""
    logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)  # "Importing plotly failed"
    logging.getLogger("prophet").setLevel(logging.WARNING)
    stan = logging.getLogger("cmdstanpy")
    if not stan.handlers:
        # cmdstanpy installs its own INFO stream handler unless the logger already has one.
        stan.addHandler(logging.NullHandler())
    stan.setLevel(logging.WARNING)


_silence_prophet_logs()


def fitted_model(
    params: Any,
    times: np.ndarray,
    values: np.ndarray,
    step: float,
    weekly: bool,
    spec: ModelSpec,
    notes: list[str],
    init: Mapping[str, Any] | None = None,
) -> object:
    """Prophet fitted on `values` as `params` (a `ProphetForecaster`: growth, Fourier orders, prior
    scales, `max_fit_points`) says, with the pool's holidays when Prophet knows the country; its
    optimiser starts from `init` (`warm_params` of an earlier fit; Prophet falls back to its own
    start for a parameter whose shape differs), else from Prophet's own start."""
    from prophet import Prophet

    model = Prophet(
        growth=params.growth,
        daily_seasonality=params.daily_order,
        weekly_seasonality=params.weekly_order if weekly else False,
        changepoint_range=params.changepoint_range,
        yearly_seasonality=False,
        seasonality_mode=params.seasonality_mode,
        changepoint_prior_scale=params.changepoint_prior_scale,
        interval_width=spec.interval_width,
        uncertainty_samples=0,
    )
    if spec.holidays:
        problem = holiday_problem(spec.holidays)
        if problem:
            notes.append(f"holidays {spec.holidays!r} ignored: {problem}")
        else:
            model.add_country_holidays(country_name=spec.holidays)
    frame = training_frame(times, values, step, params.max_fit_points)
    model.fit(frame, **({"init": dict(init)} if init is not None else {}))
    return model


def warm_params(model: object) -> dict[str, Any]:
    """A fitted Prophet's parameters as its `fit(init=...)` takes them (as Prophet's documentation
    warm-starts a model from an earlier one: the MAP estimate's k, m, sigma_obs, delta, beta)."""
    params = model.params  # type: ignore[attr-defined]
    out: dict[str, Any] = {name: float(params[name][0][0]) for name in ("k", "m", "sigma_obs")}
    out.update({name: np.asarray(params[name][0], dtype=float) for name in ("delta", "beta")})
    return out


def training_frame(
    times: np.ndarray, values: np.ndarray, step: float, max_fit_points: int
) -> pd.DataFrame:
    """Bucket means on the coarsest grid that is a divisor of a day and keeps under max_fit_points."""
    factor = max(1, math.ceil(values.size / max_fit_points))
    while factor < values.size and DAY_SECONDS % (step * factor):
        factor += 1
    if factor > 1:
        usable = values.size - values.size % factor
        blocks = values[:usable].reshape(-1, factor)
        counts = np.isfinite(blocks).sum(axis=1)
        sums = np.nansum(blocks, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        # Each mean sits at the centre of its bucket so the fitted shape is not shifted in time.
        mids = times[:usable].reshape(-1, factor).mean(axis=1)
        times, values = mids, means
    ok = np.isfinite(values)
    return pd.DataFrame({"ds": naive_utc(times[ok]), "y": values[ok]})


def predict(model: object, times: np.ndarray) -> np.ndarray:
    """Prophet's yhat at `times` (POSIX seconds)."""
    frame = model.predict(pd.DataFrame({"ds": naive_utc(times)}))  # type: ignore[attr-defined]
    return frame["yhat"].to_numpy(dtype=float)


@dataclass(frozen=True)
class Fit:
    """A fitted Prophet model, the within-hour profile of its residuals (None: none found or off),
    and both together at the training times."""

    model: object
    hourly: HourlyProfile | None
    fitted: np.ndarray

    def predict(self, times: np.ndarray) -> np.ndarray:
        yhat = predict(self.model, times)
        return yhat if self.hourly is None else yhat + self.hourly(times)


@dataclass(frozen=True)
class Curve:
    """One refit's Prophet fits, kept for the next refit (`ProphetForecaster.fit_curve`): the final
    fit and each validation fold's, by fold (0: the latest window)."""

    final: Fit
    folds: Mapping[int, Fit]


def holiday_problem(country: str) -> str | None:
    """Why Prophet cannot use holidays for `country` (None when it can)."""
    from prophet.make_holidays import make_holidays_df

    try:
        make_holidays_df(year_list=[2024], country=country)
    except (AttributeError, KeyError, NotImplementedError) as exc:
        return str(exc).strip("'\"")
    return None


def naive_utc(times: np.ndarray) -> pd.DatetimeIndex:
    """Prophet wants time-zone-naive datetimes; ours are POSIX seconds, so naive UTC."""
    return pd.to_datetime(np.round(times * 1e3).astype(np.int64), unit="ms")
