"""How the replay refits the forecast's curve (`--curve-refit`, `replay.walkforward`): a refit
starts only from an earlier cut's curve, the burst models are refitted at every cut, the cache
keeps the cadences apart, and Prophet warm-started or reused forecasts as `fit_curve` promises."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import ClassVar

import numpy as np
import pytest
from fitting import fit_args
from test_backtest import DAY, FAST, POOL, SeasonalNaiveForecaster, series
from test_forecaster import dataset, spec

from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.series import Forecast
from predictive_headroom.core.vocabulary import CurveRefit
from predictive_headroom.forecast.forecaster import ProphetForecaster
from predictive_headroom.forecast.naive import seasonal_naive
from predictive_headroom.replay.refit_cache import CacheSpec, cache_usage
from predictive_headroom.replay.walkforward import curve_links, curve_waves

D, W, N = CurveRefit.DAILY, CurveRefit.WARM, CurveRefit.WEEKLY


@pytest.mark.parametrize(
    "refits, every, how, links, waves",
    [
        (4, DAY, D, [None] * 4, [[0, 1, 2, 3]]),
        (
            9,
            DAY,
            W,
            [None, 0, 1, 2, 3, 4, 5, None, 7],
            [[0, 7], [1, 8], [2], [3], [4], [5], [6]],
        ),
        (9, DAY, N, [None, 0, 0, 0, 0, 0, 0, None, 7], [[0, 7], [1, 2, 3, 4, 5, 6, 8]]),
        (16, DAY / 2, N, [None] + [0] * 13 + [None, 14], [[0, 14], [*range(1, 14), 15]]),
        (0, DAY, N, [], []),
    ],
)
def test_each_refit_starts_from_an_earlier_one_and_runs_in_a_later_wave(
    refits, every, how, links, waves
):
    assert curve_links(refits, every, how) == links
    assert curve_waves(links) == waves


class CurveRecorder(SeasonalNaiveForecaster):
    """Records each `fit_curve` call: (now, how, the cut of the curve it started from)."""

    calls: ClassVar[list[tuple[float, CurveRefit, float | None]]] = []

    def fit_curve(self, history, spec, settings, now, how, prior):
        CurveRecorder.calls.append((now, how, prior))
        assert history.end <= now  # the job holds only the history known at its cut
        return seasonal_naive(history, spec, now, settings), now  # the curve: its cut


@pytest.fixture
def recorder():
    CurveRecorder.calls = []
    return CurveRecorder()


def replayed(how: CurveRefit, cache: CacheSpec | None, forecaster) -> dict:
    settings = replace(FAST, burst_view=False, curve_refit=how, refit_cache=cache)
    result = run_backtest(series(12), POOL, settings, forecaster=forecaster)
    data = json.loads(json.dumps(result.to_dict(), sort_keys=True, default=str))
    data["settings"].pop("fit_seconds")
    return data


@pytest.mark.parametrize("how", [W, N])
def test_a_refit_reads_only_a_curve_fitted_at_an_earlier_cut(how, recorder):
    replayed(how, None, recorder)
    cuts = sorted(now for now, _, _ in CurveRecorder.calls)
    assert len(cuts) == 9 and all(h is how for _, h, _ in CurveRecorder.calls)
    for now, _, prior in CurveRecorder.calls:
        k = cuts.index(now)
        if k % 7 == 0:
            assert prior is None  # a fresh fit starts each week
        else:
            assert prior == cuts[k - 1 if how is W else k - k % 7] < now


def test_the_cache_keeps_each_cadence_apart_and_reads_it_back_the_same(tmp_path, recorder):
    spec = CacheSpec(tmp_path / "refits")
    weekly = replayed(N, spec, recorder)
    assert len(CurveRecorder.calls) == 9 and cache_usage(spec.location)[0] == 9
    assert replayed(N, spec, recorder) == weekly  # every refit read back, curves included
    assert len(CurveRecorder.calls) == 9
    replayed(D, spec, SeasonalNaiveForecaster())
    assert cache_usage(spec.location)[0] == 18  # daily's refits are not weekly's


@pytest.mark.slow
def test_prophet_reused_or_warm_started_forecasts_from_the_later_cut():
    history = dataset("azure_v2_vm_cpu_total_5min", 17)
    args = fit_args(spec(), 300.0)
    forecaster = ProphetForecaster()
    first = history.end - 2 * DAY
    _, curve = forecaster.fit_curve(history.until(first), *args, first, N)
    assert curve is not None and set(curve.folds) == {0}
    now = history.end
    daily = forecaster.fit(history, *args, now)
    reused, again = forecaster.fit_curve(history, *args, now, N, curve)
    warm, _ = forecaster.fit_curve(history, *args, now, W, curve)
    assert isinstance(reused, Forecast) and isinstance(warm, Forecast)
    assert isinstance(daily, Forecast)
    assert again is not None and again.final.model is curve.final.model  # no new Prophet fit
    assert reused.times[0] == daily.times[0] and reused.history_end == daily.history_end
    # Warm-started, Prophet's optimiser lands where a fresh fit does (to its tolerance).
    scale = float(np.ptp(daily.model_curve))
    assert np.max(np.abs(warm.model_curve - daily.model_curve)) < 1e-3 * scale
    # Reused, the curve is the earlier fit's, not the fresh one's.
    assert not np.allclose(reused.model_curve, daily.model_curve, atol=1e-6 * scale)


def test_the_first_line_says_the_curve_is_not_refitted_the_daemons_way(capsys, recorder):
    settings = replace(FAST, burst_view=False, curve_refit=N)
    run_backtest(series(12), POOL, settings, progress=True, forecaster=recorder)
    first = capsys.readouterr().err.splitlines()[0]
    assert "9 refits" in first and "--curve-refit weekly: not the daemon's way" in first
