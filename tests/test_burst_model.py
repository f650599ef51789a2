"""The conditional burst model: what it learns, that it reads only what was known, and the backtest's honest replay."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fitting import fit_args
from test_backtest import DAY, START

from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.engine import PoolTimeline
from predictive_headroom.core.forecast_math import BurstAllowance, burst_allowances
from predictive_headroom.core.series import History, Unobserved
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.forecast.burst_features import (
    FEATURES,
    growth_target,
    sample_columns,
)
from predictive_headroom.forecast.burst_model import train
from predictive_headroom.forecast.naive import seasonal_naive
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.replay.simulator import minute_grid
from predictive_headroom.replay.walkforward import Refits, walk_forward

STEP = 300.0
LEAD = 600.0
DELAY = 60.0


def level_scaled(days: float, seed: int = 0) -> History:
    """Demand whose level doubles halfway and whose bursts scale with the level and cluster in time."""
    rng = np.random.default_rng(seed)
    t = START + STEP * np.arange(int(days * DAY / STEP))
    level = np.where(t < START + days * DAY / 2, 100.0, 200.0) * (
        1 + 0.3 * np.sin(2 * np.pi * (t % DAY) / DAY)
    )
    storm = np.floor((t - START) / 7200) % 5 == 0  # one stormy 2-hour block in five
    bursts = rng.gamma(1.0, 0.3, t.size) * level * (rng.random(t.size) < np.where(storm, 0.3, 0.02))
    return History(t, level + bursts + rng.normal(0, 2, t.size), "synthetic")


class BurstNaiveForecaster:
    """Seasonal naive carrying a conditional burst model fitted on the same history (no Prophet: fast)."""

    def fit(self, history, spec, settings, now):
        forecast = seasonal_naive(history, spec, now, settings)
        trainer = train(history, settings.lead, settings.delay, None, max_rows=3000)
        if trainer is None:
            return forecast
        return replace(
            forecast, burst_model=trainer.model(settings.quantile), burst_model_for=trainer.model
        )


def test_sample_columns_read_only_earlier_samples():
    history = level_scaled(4)
    full = sample_columns(history.times, history.values, STEP, LEAD)
    m = 600
    head = sample_columns(history.times[: m + 1], history.values[: m + 1], STEP, LEAD)
    np.testing.assert_array_equal(np.nan_to_num(full[: m + 1], nan=-1), np.nan_to_num(head, nan=-1))


def test_the_target_is_the_growth_over_the_lead_time_read_every_minute():
    times = np.array([0.0, 300.0, 600.0])
    values = np.array([10.0, 40.0, 0.0])
    # From t=0 the next 10 minutes peak at 40 (t=300); from t=300 demand only falls (40 -> 32 a minute later).
    assert growth_target(times, values, np.array([0.0, 300.0]), 600.0).tolist() == [30.0, -8.0]


@pytest.fixture(scope="module")
def trainer():
    history = level_scaled(14)
    return history, train(history.until(START + 12 * DAY), LEAD, DELAY, None, max_rows=5000)


@pytest.mark.slow
def test_the_allowance_scales_with_the_level_and_rises_in_a_storm(trainer):
    history, t = trainer
    model = t.model(0.95)
    at = np.arange(START + 12 * DAY, START + 13 * DAY, 60.0)
    block = np.floor((at - START) / 7200)
    late_in_storm = (block % 5 == 0) & ((at - START) % 7200 > 2400)
    calm = block % 5 == 2
    allowance = model.allowance(history, at, None)
    assert np.all(np.isfinite(allowance))
    storm = np.median(allowance[late_in_storm])
    assert np.median(allowance[calm]) > 0  # a calm hour still asks for something at q = 0.95
    assert storm > 1.5 * np.median(allowance[calm])
    # The same storms a week earlier, at half the level, ask for clearly less.
    assert storm > 1.5 * np.median(model.allowance(history, at[late_in_storm] - 7 * DAY, None))


@pytest.mark.slow
def test_the_quantile_holds_on_unseen_days(trainer):
    history, t = trainer
    at = np.arange(START + 12 * DAY, START + 14 * DAY - LEAD, 60.0)
    need = growth_target(history.times, history.values, at, LEAD)
    low, high = (
        t.model(0.5).allowance(history, at, None),
        t.model(0.95).allowance(history, at, None),
    )
    assert np.mean(need <= high) > 0.85
    assert np.mean(need <= low) < np.mean(need <= high)
    assert t.model(0.95) is t.model(0.95)  # one fit per quantile


@pytest.mark.slow
def test_changing_data_after_t_minus_delay_moves_no_allowance_at_t(trainer):
    history, t = trainer
    model = t.model(0.95)
    cut = float(history.times[3600])
    changed = history.values.copy()
    changed[history.times > cut] *= 7
    other = History(history.times, changed)
    at = np.arange(
        cut - 3600, cut + DELAY + 1, 60.0
    )  # up to t - delay = cut; t between samples included
    np.testing.assert_array_equal(
        model.allowance(history, at, None), model.allowance(other, at, None)
    )
    later = np.arange(cut + DELAY + 60, cut + 3600, 60.0)
    assert not np.array_equal(
        model.allowance(history, later, None), model.allowance(other, later, None)
    )


@pytest.mark.slow
def test_stale_or_missing_observations_fall_back_to_the_table(trainer):
    history, _t = trainer
    forecast = BurstNaiveForecaster().fit(
        history.until(START + 12 * DAY), *fit_args(POOL.forecast, LEAD), START + 12 * DAY
    )
    at = START + 12 * DAY + 600

    def decide(observed, fc=forecast) -> BurstAllowance:
        return burst_allowances(fc, [at], LEAD, observed)[0]

    stale = decide(history.until(at - 3 * 3600))
    assert (stale.source, stale.why) == ("profile", "stale-observations")
    assert stale.value == pytest.approx(decide(None, replace(forecast, burst_model=None)).value)
    failed = decide(Unobserved("fresh-read-failed", "timeout"))
    assert (failed.source, failed.why, failed.fell_back) == (
        "profile",
        "fresh-read-failed: timeout",
        True,
    )
    assert (decide(None).source, decide(None).why) == ("profile", "not-observed")
    assert (decide(history.until(0.0)).why) == "no-recent-samples"
    fresh = decide(history)
    assert (fresh.source, fresh.why, fresh.fell_back) == ("model", "", False)


@pytest.mark.slow
def test_importance_names_every_feature_largest_first(trainer):
    _, t = trainer
    ranked = t.model(0.95).importance()
    assert sorted(r["feature"] for r in ranked) == sorted(FEATURES)
    drops = [r["drop"] for r in ranked]
    assert drops == sorted(drops, reverse=True) and drops[0] > 0


POOL = Pool.model_validate(
    {
        "name": "web",
        "target": {"namespace": "ns", "name": "ph"},
        "maxReplicas": 500,
        "leadTime": "10m",
        "schedules": [
            {"name": "day", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 2}
        ],
        "forecast": {"query": "q", "demandPerReplica": 5, "observationDelay": "1m"},
    }
)
SETTINGS = BacktestSettings(replay=WhatIf(warmup_seconds=3 * DAY), refit_every_seconds=DAY)


@pytest.mark.slow
def test_the_backtest_decision_at_t_reads_nothing_after_t_minus_the_observation_delay():
    """Change every sample after `cut`; no placeholder decided at or before `cut + delay` moves."""
    history = level_scaled(6, seed=3)
    cut = float(history.times[int(4.5 * DAY / STEP)])
    changed = history.values.copy()
    later = history.times > cut
    changed[later] = changed[later] * 3 + 200
    runs = [
        run_backtest(h, POOL, SETTINGS, forecaster=BurstNaiveForecaster())
        for h in (history, History(history.times, changed))
    ]
    assert (
        runs[0].settings.burst_model == "quantile"
        and runs[0].settings.observation_delay_seconds == DELAY
    )
    upto = int(np.searchsorted(runs[0].times, cut + DELAY, side="right"))
    a, b = (r.strategies["forecast"].run.placeholders for r in runs)
    assert a[:upto].tolist() == b[:upto].tolist()
    assert a[upto:].tolist() != b[upto:].tolist()  # the change shows once it is known


@pytest.mark.slow
def test_the_backtest_uses_the_model_between_refits_and_the_table_when_data_stop():
    history = level_scaled(6, seed=4)
    gap = (history.times > START + 4.2 * DAY) & (history.times < START + 4.4 * DAY)
    holed = History(history.times[~gap], history.values[~gap])
    times, _ = minute_grid(holed)
    first = int(np.searchsorted(times, START + 3 * DAY))
    refits = Refits(DAY, BurstNaiveForecaster(), naive_burst_profile)
    wf = walk_forward(holed, POOL, times, first, resolve_settings(POOL), refits)
    timeline = PoolTimeline(POOL, times, wf.model, holed, (), resolve_settings(POOL))
    minutes = times
    allowances = {i: timeline.forecast_part(i).allowance for i in range(first, minutes.size, 7)}
    sources = {i: a.source for i, a in allowances.items()}
    in_gap = [s for i, s in sources.items() if START + 4.25 * DAY < minutes[i] < START + 4.4 * DAY]
    outside = [s for i, s in sources.items() if minutes[i] > START + 4.5 * DAY]
    assert set(in_gap) == {"profile"} and set(outside) == {"model"}
    assert {
        a.why for i, a in allowances.items() if START + 4.25 * DAY < minutes[i] < START + 4.4 * DAY
    } == {"stale-observations"}


def test_a_trainer_let_go_keeps_its_models_and_refuses_a_new_quantile():
    history = level_scaled(6)
    t = train(history.until(START + 5 * DAY), LEAD, DELAY, None, max_rows=3000)
    assert t is not None
    model = t.model(0.9)
    at = np.arange(START + 5 * DAY, START + 5.5 * DAY, 60.0)
    before, ranked = model.allowance(history, at, None), model.importance()
    rows = t.x.shape[0]
    model.let_go()
    assert t.x.shape[0] == min(rows, 1440) and t.y.size == t.x.shape[0]
    assert t.model(0.9) is model and np.array_equal(model.allowance(history, at, None), before)
    assert model.importance() == ranked
    with pytest.raises(ValueError, match="training set was let go"):
        t.model(0.99)


def test_the_walk_forward_lets_go_of_the_training_sets_it_no_longer_needs():
    history = level_scaled(6)
    times, _ = minute_grid(history)
    first = int(np.searchsorted(times, START + 4 * DAY))
    refits = Refits(DAY, BurstNaiveForecaster(), naive_burst_profile, quantiles=(0.8, 0.95))
    wf = walk_forward(history, POOL, times, first, resolve_settings(POOL), refits)
    models = [f.burst_model for _, f in wf.model] + [f.burst_model for _, f in wf.dial[0.8][0]]
    assert models and all(m.trainer.released and m.trainer.x.shape[0] <= 1440 for m in models)
