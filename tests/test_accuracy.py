"""Hold-out accuracy: figures with known answers, hold-out sizing, and a real Prophet run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fitting import fit_args
from testdata import series_path

from predictive_headroom.core.series import DAY_SECONDS, WEEK_SECONDS, Forecast, History
from predictive_headroom.forecast.accuracy import Accuracy, evaluate, scores
from predictive_headroom.forecast.forecaster import ProphetForecaster
from predictive_headroom.forecast.naive import forecast_times
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.sources.csvsource import read_csv_history

SPEC = ForecastSpec(query="demand", demand_per_replica=1.0)
STEP = 300.0
T0 = 1_700_006_400.0
SLOPE = 1.0 / 3600  # demand grows by 1 per hour: last week's value is always 168 too low


def score(history: History, forecaster: object, spec: ForecastSpec = SPEC) -> Accuracy:
    """`evaluate` for a pool with `spec` and a 5-minute lead time."""
    model, settings = fit_args(spec, 300)
    return evaluate(history, model, forecaster, settings)  # type: ignore[arg-type]


def truth(t: np.ndarray) -> np.ndarray:
    return 1000 + 50 * np.sin(2 * np.pi * t / DAY_SECONDS) + SLOPE * (t - T0)


def trending(days: float) -> History:
    t = T0 + STEP * np.arange(int(days * DAY_SECONDS / STEP))
    return History(t, truth(t), "trending")


class Offset:
    """Knows the true curve and is off by `offset`, with an interval of +-`half_width`."""

    def __init__(self, offset: float, half_width: float = 1.0) -> None:
        self.offset, self.half_width = offset, half_width

    def fit(self, history, spec, settings, now):
        times = forecast_times(spec, now)
        yhat = truth(times) + self.offset
        return Forecast(
            times, yhat, yhat - self.half_width, yhat + self.half_width, "offset", history.end
        )


@pytest.mark.parametrize(
    "offset, half_width, mase, coverage",
    [
        (0.0, 1.0, 0.0, 1.0),  # perfect
        (84.0, 1.0, 0.5, 0.0),  # half the error of repeating last week; interval misses
        (-168.0, 200.0, 1.0, 1.0),  # as bad as seasonal naive, wide interval
    ],
)
def test_mase_is_relative_to_last_week_and_coverage_counts_hits(offset, half_width, mase, coverage):
    history = trending(28)
    acc = score(history, Offset(offset, half_width))
    assert acc.mase == pytest.approx(mase, abs=1e-6)
    assert acc.coverage == pytest.approx(coverage)
    assert acc.seasonal_period_seconds == WEEK_SECONDS
    expected_mape = 100 * np.mean(abs(offset) / truth(history.since(acc.holdout_start).times))
    assert acc.mape == pytest.approx(expected_mape)


@pytest.mark.parametrize(
    "days, held_points, period",
    [
        (28, 576, WEEK_SECONDS),  # the last two days
        (6, 432, DAY_SECONDS),  # a quarter of six days; under a week of training: last day
    ],
)
def test_holdout_is_two_days_or_a_quarter(days, held_points, period):
    history = trending(days)
    acc = score(history, Offset(0.0))
    assert acc.points == held_points
    assert acc.holdout_end == history.end
    assert acc.seasonal_period_seconds == period


@pytest.mark.parametrize(
    "actual, predicted, naive, mape, smape, mase",
    [
        ([10, 20], [11, 18], [10, 10], 10.0, 100 * (2 / 21 + 4 / 38) / 2, 1.5 / 5),
        (
            [0, 10],
            [0, 5],
            [0, 10],
            50.0,
            100 * (0 + 10 / 15) / 2,
            None,
        ),  # zero actual skipped; naive exact
        ([0, 0], [1, 0], [2, 2], None, 100.0, 0.25),
    ],
)
def test_scores_table(actual, predicted, naive, mape, smape, mase):
    got = scores(np.array(actual, float), np.array(predicted, float), np.array(naive, float))
    assert got[0] == (None if mape is None else pytest.approx(mape))
    assert got[1] == pytest.approx(smape)
    assert got[2] == (None if mase is None else pytest.approx(mase))


def test_too_short_history_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="days of history"):
        score(trending(1), Offset(0.0))


def test_to_dict_is_json_with_iso_times():
    data = score(trending(10), Offset(5.0)).to_dict()
    text = json.dumps(data)
    assert data["holdout_end"].endswith("Z") and "mase" in text and data["model"] == "offset"


@pytest.mark.slow
def test_prophet_on_real_series_scores_and_wider_intervals_cover_more():
    full = read_csv_history(series_path("azure_v2_vm_cpu_total_5min"))
    history = full.since(full.end - 28 * DAY_SECONDS)
    narrow = score(history, ProphetForecaster(), SPEC.model_copy(update={"interval_width": 0.5}))
    wide = score(history, ProphetForecaster(), SPEC.model_copy(update={"interval_width": 0.95}))
    assert narrow.model == wide.model == "prophet" and wide.points == 576
    assert math.isfinite(wide.mase) and wide.mase < 2.0 and wide.smape < 10
    assert 0.0 <= narrow.coverage < wide.coverage <= 1.0
    assert wide.coverage >= 0.8
