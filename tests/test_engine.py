"""The one plan over time (`core.engine`) and the forecast math it reads (`core.forecast_math`)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from fitting import fit_args
from test_backtest import DAY, START
from test_burst_model import POOL, BurstNaiveForecaster, level_scaled

from predictive_headroom.core.engine import (
    PlanInputs,
    PoolTimeline,
    plan_over_time,
    schedule_series,
)
from predictive_headroom.core.forecast_math import forward_max, ramp_at, table_allowance
from predictive_headroom.core.series import BurstProfile, Forecast
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.forecast.burst_features import feature_matrix, sample_columns
from predictive_headroom.policy.config import Pool, ScheduleWindow
from predictive_headroom.protocols import ClusterState
from predictive_headroom.replay.planner import planner_strategy
from predictive_headroom.replay.simulator import minute_grid
from predictive_headroom.replay.walkforward import Refits, walk_forward


def spike_forecast(at_spike: float = 1800.0, height: float = 100.0) -> Forecast:
    times = np.arange(0.0, 7201.0, 300.0)
    curve = np.where(times == at_spike, height, 0.0)
    return Forecast(times, curve, curve, curve, "test", history_end=0.0)


@pytest.mark.parametrize(
    "at, lead, expected",
    [
        (
            1470.0,
            600.0,
            90.0,
        ),  # off the minute: reads at 1770 and 1830 see 90, never the 100 at 1800
        (1500.0, 600.0, 100.0),  # on the 5-minute grid: the read at 1800 sees the spike
        (1800.0, 600.0, 0.0),  # at the spike: nothing higher ahead
        (7000.0, 600.0, 0.0),  # past the end the curve is held at its last value
    ],
)
def test_the_ramp_reads_the_curve_every_minute_as_the_burst_model_is_trained(at, lead, expected):
    fc = spike_forecast()
    ramp = float(ramp_at(fc.times, fc.ramp_curve, np.array([at]), lead)[0])
    assert ramp == pytest.approx(expected)
    # The burst model's "predicted ramp" feature (scaled by 1 here) is the same number...
    values = np.ones(3)
    seen = np.array([0.0, 300.0, 600.0])
    x, _ = feature_matrix(
        seen,
        values,
        sample_columns(seen, values, 300.0, lead),
        np.array([at]),
        delay=0.0,
        step=300.0,
        lead=lead,
        scale=1.0,
        curve=(fc.times, fc.ramp_curve),
    )
    assert x[0, 11] == pytest.approx(expected)
    # ...and the planner's forecast component adds exactly it.
    pool = Pool.model_validate(
        {
            "name": "p",
            "target": {"namespace": "n", "name": "t"},
            "maxReplicas": 1000,
            "leadTime": f"{lead:g}s",
            "forecast": {"query": "q", "demandPerReplica": 1},
        }
    )
    part = PoolTimeline(pool, [at], fc, None, (), resolve_settings(pool)).forecast_part(0)
    assert part.ramp == pytest.approx(expected) and part.replicas == round(expected)


@pytest.mark.parametrize(
    "values, window, kwargs, expected",
    [
        ([1, 3, 2, 0], 1, {}, [3, 3, 2, 0]),
        ([1, 3, 2, 0], 2, {}, [3, 3, 2, 0]),
        ([1, 3, 2, 5], 0, {}, [1, 3, 2, 5]),
        ([1.0, 3.0, 2.0, 0.0], 1, {"include_current": False}, [3.0, 2.0, 0.0, 0.0]),
        ([1.0, 3.0, 2.0], 1, {"include_current": False, "past_end": np.nan}, [3, 2, np.nan]),
        ([1.0, 3.0, 2.0], 1, {"past_end": np.nan}, [3, 3, np.nan]),
    ],
)
def test_forward_max_looks_ahead_with_the_end_rule_asked_for(values, window, kwargs, expected):
    out = forward_max(np.array(values), window, **kwargs)
    np.testing.assert_array_equal(out, np.array(expected, dtype=float))


def test_the_table_allowance_is_the_largest_bin_the_lead_window_touches():
    values = np.zeros((1, 48))
    values[0, 25] = 30.0  # 12:30-13:00 UTC
    table = BurstProfile(0.95, 600, 1800, values, by_weekday=False)
    fc = Forecast(
        np.array([0.0, 1.0]), np.zeros(2), np.zeros(2), np.zeros(2), "t", 0.0, burst=table
    )
    noon = 12 * 3600.0
    at = noon + 60 * np.array([0, 19, 20, 45, 59, 60])
    np.testing.assert_array_equal(table_allowance(fc, at, 600), [0, 0, 30, 30, 30, 0])


WINDOW = ScheduleWindow(
    name="night", timezone="Europe/Berlin", start="30 2 * * *", end="0 4 * * *", desired_replicas=3
)


@pytest.mark.parametrize(
    ("minute", "expected"),
    [(-1, 0), (0, 3), (1, 3), (15, 3), (59, 3), (60, 0), (61, 0)],
)
def test_a_start_in_the_spring_forward_gap_opens_at_the_gap_end_when_asked_at_one_instant(
    minute, expected
):
    # 02:30 does not exist on 2026-03-29 in Berlin: the window opens at 03:00 CEST (01:00Z) and
    # closes at 04:00 CEST, whether the instant is planned alone or in a longer series.
    at = datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp() + 60 * minute
    alone = schedule_series([WINDOW], np.array([at]), 0.0)[0]
    day = np.arange(at - 6 * 3600, at + 6 * 3600 + 1, 60.0)
    within = schedule_series([WINDOW], day, 0.0)[0][day == at]
    assert alone.tolist() == within.tolist() == [expected]


def daily_pool(**overrides) -> Pool:
    spec = {
        "name": "web",
        "target": {"namespace": "ns", "name": "ph"},
        "maxReplicas": 500,
        "leadTime": "10m",
        "scaleDownStabilization": "20m",
        "schedules": [
            {"name": "day", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 2}
        ],
        "proportional": {"linear": {"nodesPerReplica": 4}},
        "forecast": {"query": "q", "demandPerReplica": 5, "observationDelay": "1m"},
    }
    spec.update(overrides)
    return Pool.model_validate(spec)


@pytest.mark.slow
def test_a_timeline_equals_the_daemons_one_instant_calls_with_records_carried():
    history = level_scaled(5, seed=7)
    at = START + 4 * DAY
    forecast = BurstNaiveForecaster().fit(
        history.until(at), *fit_args(daily_pool().forecast, 600.0), at
    )
    window = {"name": "day", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 30}
    pool, cluster = daily_pool(schedules=[window]), ClusterState(10, 80.0, 10, 80.0)
    times = at + 60.0 * np.arange(0, 12 * 60, 7)
    inputs = PlanInputs(forecast, history, cluster, resolve_settings(pool))
    whole = plan_over_time(pool, times, inputs)
    recent: tuple = ()
    one_by_one = []
    for t in times:
        step = plan_over_time(pool, [t], inputs, recent)
        one_by_one.append(step.plans[0])
        recent = step.recent
    assert whole.plans == tuple(one_by_one)
    assert whole.recent == recent
    assert {p.details["burst_source"] for p in whole.plans} == {"model"}
    assert {p.reason for p in whole.plans} >= {"forecast", "schedule:day"}


@pytest.mark.slow
def test_the_backtest_replay_plans_each_minute_as_one_instant_calls_would():
    """The backtest evaluates the burst model over every minute of a refit at once; planning each
    minute alone, with the forecast then in force and records carried, gives identical plans."""
    history = level_scaled(5, seed=5)
    times, _ = minute_grid(history)
    first = int(np.searchsorted(times, START + 3 * DAY))
    settings = resolve_settings(POOL)
    refits = Refits(DAY / 2, BurstNaiveForecaster(), naive_burst_profile)
    wf = walk_forward(history, POOL, times, first, settings, refits)
    _, desired = planner_strategy(POOL, times, wf.model, history, 0.0, settings)
    batch = PoolTimeline(POOL, times, wf.model, history, (), settings)
    recent: tuple = ()
    sources = set()
    for i in range(first - 5, min(times.size, first + int(1.2 * DAY / 60))):
        _, forecast = batch.forecast_in_force(i)
        step = plan_over_time(
            POOL, times[i : i + 1], PlanInputs(forecast, history, None, settings), recent
        )
        recent = step.recent
        assert step.plans[0] == batch.plan(i)
        assert step.plans[0].desired == desired[i]
        sources.add(
            step.plans[0].details.get("burst_source", step.plans[0].details["forecast_status"])
        )
    assert sources == {"warmup", "model"}


def test_instants_are_planned_in_order_once():
    pool = daily_pool()
    timeline = PoolTimeline(pool, [0.0, 60.0], None, None, (), resolve_settings(pool))
    timeline.plan(1)
    with pytest.raises(ValueError, match="in order"):
        timeline.plan(0)
