"""The refit cache's key covers what changes a fit, not which quantiles a command sweeps
(`replay.refit_cache.KeptRefit`): a sweep at more quantiles reads the kept refits and fits only
the burst models at the new ones, a sweep at fewer reads them whole, and both replay what a
run without the cache replays."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np
import pytest
from test_backtest import DAY, START
from test_burst_model import POOL, BurstNaiveForecaster, level_scaled

from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.forecast.burst_features import FEATURES
from predictive_headroom.replay.refit_cache import CacheSpec, RefitCache, refit_key
from predictive_headroom.replay.simulator import minute_grid
from predictive_headroom.replay.walkforward import Refits, walk_forward


class Counting(BurstNaiveForecaster):
    """Counts its fits in a class attribute (an instance's state would be part of the key)."""

    fits: ClassVar[list[float]] = []

    def fit(self, history, spec, settings, now):
        Counting.fits.append(now)
        return super().fit(history, spec, settings, now)


class Marking(BurstNaiveForecaster):
    """Leaves a file in `marks` at each fit, whichever process fits."""

    def __init__(self, marks):
        self.marks = marks

    def fit(self, history, spec, settings, now):
        (self.marks / f"fit-{now:.0f}-{len(list(self.marks.iterdir()))}").touch()
        return super().fit(history, spec, settings, now)


@pytest.fixture(scope="module")
def series():
    history = level_scaled(4, seed=7)
    times, _ = minute_grid(history)
    return history, times, int(np.searchsorted(times, START + 3 * DAY))


@pytest.fixture
def counting():
    Counting.fits = []
    return Counting()


def walked(series, forecaster, quantiles, location=None, workers=1):
    """The walk-forward (three refits a day) swept at `quantiles`, with the cache at `location`."""
    history, times, first = series
    cache = None if location is None else RefitCache.open(CacheSpec(location))
    refits = Refits(DAY / 3, forecaster, naive_burst_profile, quantiles, True, workers, cache=cache)
    return walk_forward(history, POOL, times, first, resolve_settings(POOL), refits)


def same_sweeps(a, b, quantiles):
    """Two walk-forwards made the same forecasts and the same burst models at `quantiles`."""
    assert a.refits == b.refits and a.models == b.models
    for (_, fa), (_, fb) in zip(a.model, b.model, strict=True):
        np.testing.assert_array_equal(fa.yhat, fb.yhat)
    x = np.random.default_rng(0).random((50, len(FEATURES)))
    for q in quantiles:
        for (_, fa), (_, fb) in zip(a.dial[q][0], b.dial[q][0], strict=True):
            assert fa.burst_model.quantile == fb.burst_model.quantile == q
            assert fa.fitted_for == fb.fitted_for
            np.testing.assert_array_equal(
                fa.burst_model.regressor.predict(x), fb.burst_model.regressor.predict(x)
            )
        for (_, na), (_, nb) in zip(a.dial[q][1], b.dial[q][1], strict=True):
            np.testing.assert_array_equal(na.burst.values, nb.burst.values)


def first_line(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("pool web: read"))


@pytest.mark.slow
def test_more_quantiles_read_the_kept_refits_and_fit_only_the_new_burst_models(
    series, counting, tmp_path, capsys
):
    location = tmp_path / "refits"
    walked(series, counting, (0.8, 0.95), location)  # as `tune` sweeps
    assert len(Counting.fits) == 3
    assert "3 refits, 3 to fit" in first_line(capsys.readouterr().err)
    more = (0.5, 0.8, 0.95, 0.99)
    wider = walked(series, counting, more, location)  # as `backtest --protection` sweeps
    assert len(Counting.fits) == 3  # no refit: only the burst models at 0.5 and 0.99 fitted
    said = first_line(capsys.readouterr().err)
    assert "3 refits, 3 of them in the cache (3 to read again for burst models at 2 more" in said
    assert said.endswith(", 0 to fit")
    plain = walked(series, BurstNaiveForecaster(), more)
    same_sweeps(wider, plain, more)
    assert wider.cached == 3
    capsys.readouterr()
    fewer = walked(series, counting, (0.99,), location)  # read whole: every quantile kept
    assert len(Counting.fits) == 3
    assert "3 refits, 3 of them in the cache, 0 to fit" in first_line(capsys.readouterr().err)
    same_sweeps(fewer, walked(series, BurstNaiveForecaster(), (0.99,)), (0.99,))


@pytest.mark.slow
def test_workers_sweeping_kept_refits_replay_as_one_process_does(series, tmp_path):
    location, marks = tmp_path / "refits", tmp_path / "marks"
    marks.mkdir()
    walked(series, Marking(marks), (0.9,), location, workers=2)
    assert len(list(marks.iterdir())) == 3
    wider = walked(series, Marking(marks), (0.5, 0.9, 0.99), location, workers=2)
    assert len(list(marks.iterdir())) == 3  # read in the workers, none refitted
    same_sweeps(wider, walked(series, BurstNaiveForecaster(), (0.5, 0.9, 0.99)), (0.5, 0.99))


def test_the_key_covers_the_settings_but_not_the_quantiles_swept(series):
    from predictive_headroom.core.settings import SettingSource, model_spec, with_values
    from predictive_headroom.replay.walkforward import RefitJob

    history, _, _ = series
    settings = resolve_settings(POOL)
    assert POOL.forecast is not None
    job = RefitJob(
        history,
        history.end,
        DAY,
        model_spec(POOL.forecast),
        settings,
        BurstNaiveForecaster(),
        naive_burst_profile,
        (0.8, 0.95),
    )
    assert refit_key(job) == refit_key(replace(job, quantiles=(0.5, 0.99, 0.999)))
    tuned = with_values(settings, SettingSource.TUNED, burst_quantile=0.99)
    assert refit_key(job) != refit_key(replace(job, settings=tuned))
    assert refit_key(job) != refit_key(replace(job, known=history.until(history.end - 300)))
