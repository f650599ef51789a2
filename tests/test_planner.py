"""The pure planner: max of floors and forecast, clamp, stabilise, and the reason."""

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictive_headroom.core.engine import PlanInputs, PoolTimeline, plan_over_time
from predictive_headroom.core.planner import ForecastPart, PlanRecord, with_reserve
from predictive_headroom.core.series import BurstProfile, Forecast, NoForecast
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ClusterState


def plan_pool(pool, at, cluster=None, forecast=None, recent=(), observed=None):
    """The plan at one instant through the one engine (`plan_over_time` at `[at]`)."""
    return plan_over_time(
        pool, [at], PlanInputs(forecast, observed, cluster, resolve_settings(pool)), recent
    ).plans[0]


T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()  # Monday noon UTC


def pool(**overrides) -> Pool:
    spec = {
        "name": "web",
        "target": {"namespace": "ns", "name": "web-placeholder"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "leadTime": "10m",
        "scaleDownStabilization": "30m",
    }
    spec.update(overrides)
    return Pool.model_validate(spec)


def flat_burst(value: float) -> BurstProfile:
    return BurstProfile(
        quantile=0.95,
        lead=600,
        bin_seconds=3600,
        values=np.full((1, 24), value),
        by_weekday=False,
    )


def forecast(yhat_fn, burst: float = 0.0, start=T0 - 600, hours=48, step=300) -> Forecast:
    times = np.arange(start, start + hours * 3600 + 1, step, dtype=float)
    yhat = np.array([yhat_fn(t) for t in times])
    return Forecast(
        times, yhat, yhat * 0.9, yhat * 1.1, "test", history_end=start, burst=flat_burst(burst)
    )


def forecast_part(fc: Forecast, at: float, lead: float, dpr: float) -> ForecastPart:
    """The forecast component at `at` of a pool with this lead time and demand per replica."""
    spec = {"query": "q", "demandPerReplica": dpr}
    p = pool(leadTime=f"{lead:g}s", forecast=spec)
    return PoolTimeline(p, [at], fc, None, (), resolve_settings(p)).forecast_part(0)


WINDOW = {"name": "peak", "start": "0 11 * * *", "end": "0 13 * * *", "desiredReplicas": 4}
CLUSTER = ClusterState(nodes=20, cores=160, schedulable_nodes=20, schedulable_cores=160)


@pytest.mark.parametrize(
    "overrides, cluster, fc, desired, reason",
    [
        ({}, None, None, 1, "min"),
        ({"schedules": [WINDOW]}, None, None, 4, "schedule:peak"),
        ({"schedules": [dict(WINDOW, desiredReplicas=20)]}, None, None, 10, "max"),
        ({"proportional": {"linear": {"nodesPerReplica": 4}}}, CLUSTER, None, 5, "proportional"),
        ({"proportional": {"linear": {"nodesPerReplica": 4}}}, None, None, 1, "min"),
        # equal values: the schedule is named (explicit configuration first)
        (
            {"schedules": [WINDOW], "proportional": {"linear": {"nodesPerReplica": 5}}},
            CLUSTER,
            None,
            4,
            "schedule:peak",
        ),
    ],
)
def test_floors(overrides, cluster, fc, desired, reason):
    plan = plan_pool(pool(**overrides), T0, cluster, fc)
    assert (plan.desired, plan.reason) == (desired, reason)
    assert plan.components["min"] == 1 and plan.components["max"] == 10


FORECAST_SPEC = {"query": "sum(rate(x[5m]))", "demandPerReplica": 10}


@pytest.mark.parametrize(
    "yhat_fn, burst, expected, ramp",
    [
        (lambda t: 100.0, 0.0, 0, 0.0),  # flat demand: nothing to pre-warm
        (lambda t: 100.0, 25.0, 3, 0.0),  # ceil(25/10): burst only
        (lambda t: 100.0 + max(0.0, t - T0) / 60 * 5, 0.0, 5, 50.0),  # +5/min over a 10 min lead
        (lambda t: 100.0 + max(0.0, t - T0) / 60 * 5, 12.0, 7, 50.0),  # ramp + burst = 62
        (lambda t: 200.0 - max(0.0, t - T0) / 60 * 5, 0.0, 0, 0.0),  # falling demand: no ramp
    ],
)
def test_forecast_component_sizes_growth_within_lead_time(yhat_fn, burst, expected, ramp):
    part = forecast_part(forecast(yhat_fn, burst), T0, 600, 10)
    assert part.replicas == expected
    assert part.ramp == pytest.approx(ramp)
    plan = plan_pool(
        pool(minReplicas=0, forecast=FORECAST_SPEC), T0, None, forecast(yhat_fn, burst)
    )
    assert plan.desired == expected
    assert plan.reason == "forecast"  # ties name the forecast before min


@pytest.mark.parametrize(
    "fc, status, reason",
    [
        (None, "no-history", "min:no-history"),
        (NoForecast("insufficient-history"), "insufficient-history", "min:insufficient-history"),
        (
            forecast(lambda t: 100.0, start=T0 - 3 * 86400, hours=24),
            "forecast-expired",
            "min:forecast-expired",
        ),
    ],
)
def test_missing_forecast_is_a_value_not_an_error(fc, status, reason):
    plan = plan_pool(pool(forecast=FORECAST_SPEC), T0, None, fc)
    assert plan.components["forecast"] is None
    assert plan.details["forecast_status"] == status
    assert (plan.desired, plan.reason) == (1, reason)


def test_missing_forecast_never_drops_below_floors():
    plan = plan_pool(
        pool(forecast=FORECAST_SPEC, schedules=[WINDOW]), T0, None, NoForecast("source-error")
    )
    assert (plan.desired, plan.reason) == (4, "schedule:peak")


def test_a_reserve_is_held_on_top_of_the_plan_within_max():
    spec = dict(FORECAST_SPEC, reserve=3)
    plan = plan_pool(pool(forecast=spec, schedules=[WINDOW]), T0, None, NoForecast("source-error"))
    assert (plan.desired, plan.reason, plan.details["reserve"]) == (7, "schedule:peak", 3)
    capped = plan_pool(pool(forecast=dict(spec, reserve=9), schedules=[WINDOW]), T0, None, None)
    assert (capped.desired, capped.reason) == (10, "max")
    assert "reserve" not in plan_pool(pool(forecast=FORECAST_SPEC), T0, None, None).details


def test_disabled_forecast_is_not_a_hold():
    plan = plan_pool(pool(forecast=dict(FORECAST_SPEC, enabled=False)), T0, None, None)
    assert (plan.desired, plan.reason, plan.details["forecast_status"]) == (1, "min", "disabled")


@pytest.mark.parametrize(
    "recent, desired, reason",
    [
        ([], 1, "min"),
        ([PlanRecord(T0 - 600, 6)], 6, "hold:scale-down-stabilization"),  # 10 min ago: held
        ([PlanRecord(T0 - 1800, 6)], 1, "min"),  # exactly the window ago: released
        ([PlanRecord(T0 - 3600, 9), PlanRecord(T0 - 60, 3)], 3, "hold:scale-down-stabilization"),
    ],
)
def test_scale_down_waits_for_the_stabilisation_window(recent, desired, reason):
    plan = plan_pool(pool(), T0, None, None, recent)
    assert (plan.desired, plan.reason) == (desired, reason)
    assert plan.raw == 1


def test_a_cap_wins_over_the_scale_down_hold():
    """maxReplicas is a cap: a count held from before it was lowered (14 under a cap of 10) is
    held at the cap, and the plan names the cap, not the hold."""
    plan = plan_pool(pool(), T0, None, None, [PlanRecord(T0 - 600, 14)])
    assert (plan.desired, plan.raw, plan.reason) == (10, 1, "max")
    plan = plan_pool(pool(), T0, None, None, [PlanRecord(T0 - 600, 10)])
    assert (plan.desired, plan.reason) == (10, "hold:scale-down-stabilization")


def test_scale_up_is_immediate():
    plan = plan_pool(pool(schedules=[WINDOW]), T0, None, None, [PlanRecord(T0 - 60, 1)])
    assert (plan.desired, plan.reason) == (4, "schedule:peak")


replicas = st.integers(0, 30)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    min_r=replicas,
    extra=replicas,
    window_replicas=st.lists(replicas, max_size=3),
    nodes=st.integers(0, 200),
    burst=st.floats(0, 500),
    held=st.lists(replicas, max_size=3),
)
def test_plan_is_always_within_min_and_max(min_r, extra, window_replicas, nodes, burst, held):
    max_r = min_r + extra
    windows = [dict(WINDOW, name=f"w{i}", desiredReplicas=r) for i, r in enumerate(window_replicas)]
    p = pool(
        minReplicas=min_r,
        maxReplicas=max_r,
        schedules=windows,
        proportional={"linear": {"nodesPerReplica": 3}},
        forecast=FORECAST_SPEC,
    )
    recent = [PlanRecord(T0 - 60 * (i + 1), r) for i, r in enumerate(held)]
    plan = plan_pool(
        p,
        T0,
        ClusterState(nodes, nodes * 4.0, nodes, nodes * 4.0),
        forecast(lambda t: 100.0, burst),
        recent,
    )
    assert min_r <= plan.desired <= max_r


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    base=st.lists(
        st.tuples(st.integers(0, 23), st.integers(1, 23), st.integers(0, 15)), max_size=3
    ),
    added=st.tuples(st.integers(0, 23), st.integers(1, 23), st.integers(0, 15)),
    hour=st.integers(0, 23),
)
def test_adding_a_window_never_lowers_the_plan(base, added, hour):
    def windows(specs):
        return [
            {
                "name": f"w{i}",
                "start": f"0 {s} * * *",
                "end": f"0 {(s + length) % 24} * * *",
                "desiredReplicas": r,
            }
            for i, (s, length, r) in enumerate(specs)
            if length % 24
        ]

    at = datetime(2026, 11, 23, hour, 30, tzinfo=UTC).timestamp()
    before = plan_pool(pool(maxReplicas=12, schedules=windows(base)), at).desired
    after = plan_pool(pool(maxReplicas=12, schedules=windows([*base, added])), at).desired
    assert after >= before


def test_burst_allowance_covers_the_whole_lead_window():
    # A burst-prone bin starting at 12:30 is seen from 12:20 with a 10-minute lead time, and the
    # allowance does not dip between two burst-prone bins.
    values = np.zeros((1, 48))
    values[0, 25] = 30.0  # 12:30-13:00 UTC
    burst = BurstProfile(quantile=0.95, lead=600, bin_seconds=1800, values=values, by_weekday=False)
    fc = forecast(lambda t: 100.0)
    fc = Forecast(fc.times, fc.yhat, fc.lower, fc.upper, "test", fc.history_end, burst=burst)
    parts = {
        minute: forecast_part(fc, T0 + minute * 60, 600, 10).replicas
        for minute in (0, 19, 20, 45, 59, 60)
    }
    assert parts == {0: 0, 19: 0, 20: 3, 45: 3, 59: 3, 60: 0}


def test_ramp_is_read_from_the_models_own_curve_not_the_blend():
    # The shown yhat copies a spike of last week's (seasonal naive in the blend); the model's own
    # curve, which the burst profile was measured against, is flat: no predictable rise.
    fc = forecast(lambda t: 100.0 + (60.0 if T0 + 300 <= t <= T0 + 600 else 0.0))
    smooth = Forecast(
        fc.times,
        fc.yhat,
        fc.lower,
        fc.upper,
        "test",
        fc.history_end,
        burst=flat_burst(0.0),
        model_curve=np.full(fc.times.size, 100.0),
    )
    assert forecast_part(fc, T0, 600, 10).replicas == 6
    part = forecast_part(smooth, T0, 600, 10)
    assert (part.replicas, part.ramp, part.yhat) == (0, 0.0, 100.0)


@settings(max_examples=60, deadline=None)
@given(
    levels=st.lists(st.integers(0, 40), min_size=4, max_size=12),
    reserve=st.integers(0, 12),
    max_r=st.integers(3, 25),
    window_minutes=st.sampled_from([0, 5, 30]),
)
def test_the_reserve_replays_as_the_planner_writes_it(levels, reserve, max_r, window_minutes):
    """`with_reserve` on a plan without a reserve gives what the engine writes with it, step by
    step, also where maxReplicas binds and the stabilisation window holds a count up: the replays
    (re-tune, backtest --protection, tune) and the daemon add the reserve by one rule."""
    step = 600.0
    times = [T0 + i * step for i in range(len(levels))]

    def yhat(t: float) -> float:
        i = min(max(int((t - T0 + 600) // step), 0), len(levels) - 1)
        return 100.0 * levels[i]

    fc = forecast(yhat, start=T0 - 600, hours=4, step=60)
    base = {
        "minReplicas": 0,
        "maxReplicas": max_r,
        "scaleDownStabilization": f"{window_minutes}m" if window_minutes else "0s",
    }
    plain = pool(**base, forecast=FORECAST_SPEC)
    held = pool(**base, forecast=dict(FORECAST_SPEC, reserve=reserve))
    without = [
        p.desired
        for p in plan_over_time(
            plain, times, PlanInputs(fc, None, None, resolve_settings(plain))
        ).plans
    ]
    written = [
        p.desired
        for p in plan_over_time(
            held, times, PlanInputs(fc, None, None, resolve_settings(held))
        ).plans
    ]
    assert list(with_reserve(np.array(without), reserve, max_r)) == written
    assert [with_reserve(n, reserve, max_r) for n in without] == written
