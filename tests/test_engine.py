"""The one plan over time (`core.engine`) and the forecast math it reads (`core.forecast_math`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from fitting import fit_args
from test_backtest import DAY, START
from test_burst_model import POOL, BurstNaiveForecaster, level_scaled
from testdata import series_path

from predictive_headroom.core.engine import (
    PlanInputs,
    PoolTimeline,
    plan_over_time,
    schedule_series,
)
from predictive_headroom.core.forecast_math import (
    forward_max,
    ramp_at,
    rolling_max,
    table_allowance,
)
from predictive_headroom.core.planner import PlanRecord
from predictive_headroom.core.series import BurstProfile, Forecast
from predictive_headroom.core.settings import Setting, SettingSource, resolve_settings, with_values
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.forecast.burst_features import feature_matrix, sample_columns
from predictive_headroom.policy.config import Pool, ScheduleWindow
from predictive_headroom.protocols import ClusterState
from predictive_headroom.replay.planner import planner_strategy
from predictive_headroom.replay.simulator import ClusterSpec, app_pods, minute_grid, simulate
from predictive_headroom.replay.walkforward import Refits, walk_forward
from predictive_headroom.sources.csvsource import read_csv_history

ELB = series_path("nab_aws_elb_requests_5min")


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


@pytest.mark.parametrize("window", [1, 2, 5, 11, 16, 31, 200])
def test_the_rolling_max_is_the_largest_of_the_window_on_a_real_series(window):
    """`rolling_max` (by doubling) against its definition, element by element, on a day of a real
    series as app pods and as raw demand: the stabilisation window, the HPA hold and the cluster's
    scale-down all read it."""
    history = read_csv_history(ELB)
    demand = history.values[:300]
    pods = np.ceil(demand / 7).astype(np.int64)
    for values in (pods, demand):
        expected = [values[max(0, i - window + 1) : i + 1].max() for i in range(values.size)]
        out = rolling_max(values, window)
        assert out.dtype == values.dtype
        assert out.tolist() == expected


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


@pytest.fixture(scope="module")
def elb_replay():
    """Five days of a real series on the backtest's minute grid, a pool with a daytime schedule
    and minReplicas, and its walk-forward refits (seasonal naive with a burst model)."""
    full = read_csv_history(ELB)
    history = full.until(full.start + 5 * DAY)
    pool = POOL.model_copy(update={"min_replicas": 1})
    times, _ = minute_grid(history)
    first = int(np.searchsorted(times, history.start + 3 * DAY))
    settings = resolve_settings(pool)
    refits = Refits(DAY / 2, BurstNaiveForecaster(), naive_burst_profile)
    wf = walk_forward(history, pool, times, first, settings, refits)
    return history, pool, times, wf.model


@pytest.mark.slow
@pytest.mark.parametrize(
    "window, reserve, max_replicas",
    [(0.0, 0, 500), (300.0, 0, 500), (1800.0, 2, 500), (900.0, 1, 4)],
    ids=["no window", "5m", "30m and a reserve", "15m, reserve, maxReplicas binding"],
)
def test_the_plans_at_once_are_the_plans_one_instant_at_a_time(
    elb_replay, window, reserve, max_replicas
):
    """The backtest and the re-tune read a pool's plans at every minute at once
    (`desired_at_once`); planning each minute in order gives the same counts on a real series,
    through warm-up, refits, schedule windows, minReplicas, stabilisation and maxReplicas."""
    history, pool, times, in_force = elb_replay
    pool = pool.model_copy(update={"max_replicas": max_replicas})
    settings = with_values(
        resolve_settings(pool), SettingSource.TUNED, stabilization_seconds=window
    )
    settings = replace(settings, reserve=Setting(reserve, SettingSource.TUNED))
    at_once = PoolTimeline(pool, times, in_force, history, (), settings).desired_at_once()
    timeline = PoolTimeline(pool, times, in_force, history, (), settings)
    plans = [timeline.plan(i) for i in range(times.size)]
    assert at_once is not None
    assert at_once.tolist() == [p.desired for p in plans]
    reasons = {p.reason.split(":")[0] for p in plans}
    # the warm-up (min), both floors and the forecast take turns; a window holds counts up
    assert {"min", "schedule", "forecast"} <= reasons
    assert ("hold" in reasons) == (window > 0)
    assert ("max" in reasons) == (max_replicas < 500)


def test_plans_at_once_decline_what_they_cannot_answer():
    """A proportional rule needs the cluster at each instant, and carried records or an irregular
    grid change the stabilisation window's reach: the shortcut says None (plan each instant)."""
    pool = daily_pool(proportional=None)
    settings = resolve_settings(pool)
    times = np.arange(0.0, 3600.0, 60.0)
    assert PoolTimeline(pool, times, None, None, (), settings).desired_at_once() is not None
    carried = (PlanRecord(-60.0, 3),)
    assert PoolTimeline(pool, times, None, None, carried, settings).desired_at_once() is None
    irregular = np.array([0.0, 60.0, 90.0, 200.0])
    windowed = with_values(settings, SettingSource.TUNED, stabilization_seconds=120.0)
    assert PoolTimeline(pool, irregular, None, None, (), windowed).desired_at_once() is None
    cpa = daily_pool()
    assert PoolTimeline(cpa, times, None, None, (), resolve_settings(cpa)).desired_at_once() is None


@pytest.mark.parametrize(
    "window, reserve, max_replicas",
    [(0.0, 0, 500), (1800.0, 2, 500), (900.0, 1, 6)],
    ids=["no window", "30m and a reserve", "15m, reserve, maxReplicas binding"],
)
def test_the_proportional_shortcut_replays_as_planning_each_instant(
    elb_replay, window, reserve, max_replicas
):
    """A pool with a proportional rule is replayed minute by minute through the simulated nodes
    (`planner_strategy` hands the simulator `desired_with_cluster`, no `Plan` built); planning
    each instant with the cluster (`PoolTimeline.plan`) gives the same replay on a real series,
    through warm-up, refits, the schedule, minReplicas, the rule, stabilisation and maxReplicas."""
    history, pool, times, in_force = elb_replay
    rule = daily_pool(proportional={"linear": {"nodesPerReplica": 1}}).proportional
    pool = pool.model_copy(update={"max_replicas": max_replicas, "proportional": rule})
    settings = with_values(
        resolve_settings(pool), SettingSource.TUNED, stabilization_seconds=window
    )
    settings = replace(settings, reserve=Setting(reserve, SettingSource.TUNED))
    _, demand = minute_grid(history)
    pods = app_pods(demand, 5.0)
    _, shortcut = planner_strategy(pool, times, in_force, history, 4.0, settings)
    timeline = PoolTimeline(pool, times, in_force, history, (), settings)
    plans = []

    def each_instant(i: int, nodes: int) -> int:
        plans.append(timeline.plan(i, ClusterState(nodes, nodes * 4.0, nodes, nodes * 4.0)))
        return plans[-1].desired

    fast, slow = (
        simulate(pods, shortcut, ClusterSpec()),
        simulate(pods, each_instant, ClusterSpec()),
    )
    assert fast.placeholders.tolist() == slow.placeholders.tolist()
    assert fast.ready.tolist() == slow.ready.tolist()
    reasons = {p.reason.split(":")[0] for p in plans}
    assert "proportional" in reasons
    assert ("forecast" in reasons) == (max_replicas == 500)  # a low maxReplicas caps it
    assert ("hold" in reasons) == (window > 0)
    assert ("max" in reasons) == (max_replicas < 500)
    assert timeline.desired_with_cluster() is not None
    assert (
        PoolTimeline(
            pool, times, None, None, (PlanRecord(-60.0, 3),), settings
        ).desired_with_cluster()
        is None
    )
