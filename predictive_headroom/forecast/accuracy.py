"""Hold-out accuracy: how well a forecaster would have predicted the most recent days.

The last two days of history (a quarter of it when shorter than eight days) are held out; the
forecaster is fitted on the rest with `now` at the cut and judged against what happened:

- MAPE  = 100 * mean(|a - f| / |a|) over the held-out points whose actual `a` is not zero;
- sMAPE = 100 * mean(2 |a - f| / (|a| + |f|)), a point where both are zero counting as 0;
- MASE  = MAE(forecaster) / MAE(seasonal naive) over the same points, seasonal naive repeating
  the same time last week when the training part holds a week, else last day. Below 1 means
  better than repeating the last period;
- coverage = share of actuals inside the forecast's [lower, upper].

Forecasts are read at the actual timestamps by linear interpolation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any

import numpy as np

from predictive_headroom.core.series import (
    DAY_SECONDS,
    WEEK_SECONDS,
    Forecast,
    History,
    NoForecast,
    iso_utc,
)
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.forecast.naive import history_length, seasonal_naive
from predictive_headroom.protocols import Forecaster

DEFAULT_HOLDOUT_SECONDS = 2 * DAY_SECONDS


@dataclass(frozen=True)
class Accuracy:
    """Hold-out accuracy figures; MAPE and sMAPE in percent, coverage as a share (0..1).

    A figure that cannot be computed (MAPE with only zero actuals, MASE when seasonal naive is
    exact) is None.
    """

    model: str
    mape: float | None
    smape: float
    mase: float | None
    coverage: float
    interval_width: float
    holdout_start: float
    holdout_end: float
    points: int
    seasonal_period_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures, with the hold-out bounds as ISO-8601 UTC strings."""
        out = asdict(self)
        out["holdout_start"] = iso_utc(self.holdout_start)
        out["holdout_end"] = iso_utc(self.holdout_end)
        return out


def holdout_seconds(history: History) -> float:
    """Two days, or a quarter of the history when that is shorter than eight days."""
    return min(DEFAULT_HOLDOUT_SECONDS, history_length(history) / 4)


def scores(
    actual: np.ndarray, predicted: np.ndarray, naive: np.ndarray
) -> tuple[float | None, float, float | None]:
    """Return (MAPE %, sMAPE %, MASE) of `predicted` against `actual`, MASE relative to `naive`."""
    err = np.abs(actual - predicted)
    nonzero = actual != 0
    mape = float(100 * np.mean(err[nonzero] / np.abs(actual[nonzero]))) if nonzero.any() else None
    denom = np.abs(actual) + np.abs(predicted)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(denom > 0, 2 * err / np.where(denom > 0, denom, 1.0), 0.0)
    smape = float(100 * np.mean(ratio))
    naive_mae = float(np.mean(np.abs(actual - naive)))
    mase = float(np.mean(err)) / naive_mae if naive_mae > 0 else None
    return mape, smape, mase


def evaluate(
    history: History, spec: ModelSpec, forecaster: Forecaster, settings: PlanSettings
) -> Accuracy:
    """Fit `forecaster` on all but the last days of `history` and score it on those days.

    Raises ValueError when the history is too short to leave a day to fit on, or when the
    forecaster gives no forecast for the training part (the message says why).
    """
    span = holdout_seconds(history)
    cut = history.end - span
    train, held = history.until(cut), history.since(cut + 1e-6)
    if history_length(train) < DAY_SECONDS or len(held) == 0:
        raise ValueError(
            f"accuracy needs at least {4 / 3:.2f} days of history to hold some out, "
            f"got {history_length(history) / DAY_SECONDS:.2f} days"
        )
    horizon = max(spec.horizon.total_seconds(), held.end - cut + spec.step.total_seconds())
    wide = replace(spec, horizon=timedelta(seconds=horizon))
    result = forecaster.fit(train, wide, settings, cut)
    if isinstance(result, NoForecast):
        raise ValueError(f"no forecast to score: {result.why} {result.detail}".strip())
    naive = seasonal_naive(train, wide, cut)
    actual = held.values
    predicted = _read(result, held.times, "yhat")
    mape, smape, mase = scores(actual, predicted, _read(naive, held.times, "yhat"))
    inside = (actual >= _read(result, held.times, "lower")) & (
        actual <= _read(result, held.times, "upper")
    )
    return Accuracy(
        model=result.model,
        mape=mape,
        smape=smape,
        mase=mase,
        coverage=float(np.mean(inside)),
        interval_width=spec.interval_width,
        holdout_start=float(held.start),
        holdout_end=float(held.end),
        points=len(held),
        seasonal_period_seconds=float(
            WEEK_SECONDS if history_length(train) >= WEEK_SECONDS else DAY_SECONDS
        ),
    )


def _read(forecast: Forecast, times: np.ndarray, name: str) -> np.ndarray:
    return np.interp(times, forecast.times, getattr(forecast, name))
