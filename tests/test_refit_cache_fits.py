"""The daemon's own fits in `tune` and `backtest` kept in the refit cache (`replay.refit_cache`
`KeptFits`): read back the same forecast, refitted when anything they read changes, and a bad
cache never trusted."""

from __future__ import annotations

import logging
import pickle
import re
from dataclasses import fields
from typing import ClassVar

import numpy as np
import pytest
from test_backtest import DAY, POOL, SeasonalNaiveForecaster, series

from predictive_headroom.core.series import Forecast, History
from predictive_headroom.core.settings import (
    SettingSource,
    model_spec,
    resolve_settings,
    with_values,
)
from predictive_headroom.replay.refit_cache import (
    CacheSpec,
    KeptFits,
    RefitCache,
    cache_usage,
    kept_fits,
)

assert POOL.forecast is not None
MODEL = model_spec(POOL.forecast)
SETTINGS = resolve_settings(POOL)


class Counting(SeasonalNaiveForecaster):
    """Counts its fits in a class attribute (an instance's state would be part of the key)."""

    fits: ClassVar[list[float]] = []

    def fit(self, history, spec, settings, now):
        Counting.fits.append(now)
        return super().fit(history, spec, settings, now)


@pytest.fixture
def cache(tmp_path) -> RefitCache:
    Counting.fits = []
    opened = RefitCache.open(CacheSpec(tmp_path / "refits"))
    assert opened is not None
    return opened


def same(a: Forecast, b: Forecast) -> bool:
    """The same forecast: each field pickles to the same bytes, but the fit's measured seconds."""
    return all(
        pickle.dumps(getattr(a, f.name)) == pickle.dumps(getattr(b, f.name))
        for f in fields(a)
        if f.name != "fit_seconds"
    )


def test_a_kept_fit_is_read_back_the_same_and_not_refitted(cache):
    history = series(5)
    now = history.end - DAY
    plain = Counting().fit(history, MODEL, SETTINGS, now)
    kept = KeptFits(Counting(), cache)
    first = kept.fit(history, MODEL, SETTINGS, now)
    again = kept.fit(history, MODEL, SETTINGS, now)
    assert len(Counting.fits) == 2  # the plain fit and the first kept one
    assert isinstance(again, Forecast) and same(again, plain) and same(first, plain)
    assert cache_usage(cache.spec.location)[0] == 1


def test_samples_after_the_fit_do_not_matter_and_any_before_it_refit(cache):
    history = series(5)
    now = history.end - DAY
    kept = KeptFits(Counting(), cache)
    kept.fit(history.until(now), MODEL, SETTINGS, now)
    kept.fit(history, MODEL, SETTINGS, now)  # a day more, after `now`: the same fit
    assert len(Counting.fits) == 1
    values = history.values.copy()
    values[10] += 1.0
    kept.fit(History(history.times, values, history.source), MODEL, SETTINGS, now)
    kept.fit(history, MODEL, with_values(SETTINGS, SettingSource.TUNED, burst_quantile=0.99), now)
    kept.fit(history, MODEL, SETTINGS, now - 300.0)
    assert len(Counting.fits) == 4


def test_a_corrupted_fit_is_dropped_refitted_and_rewritten(cache, caplog):
    history = series(5)
    kept = KeptFits(Counting(), cache)
    first = kept.fit(history, MODEL, SETTINGS, history.end)
    for pkl in cache.spec.location.rglob("*.entry"):
        pkl.write_bytes(pkl.read_bytes()[:40])  # truncated
    with caplog.at_level(logging.WARNING):
        again = kept.fit(history, MODEL, SETTINGS, history.end)
    assert len(Counting.fits) == 2 and same(again, first)
    assert "dropped an entry that failed to load" in caplog.text
    kept.fit(history, MODEL, SETTINGS, history.end)
    assert len(Counting.fits) == 2  # rewritten, read again


def test_an_unwritable_cache_fits_as_before_and_leaves_the_warning_to_the_run(tmp_path, caplog):
    (tmp_path / "a-file").write_text("")
    spec = CacheSpec(tmp_path / "a-file" / "refits")
    forecaster = Counting()
    with caplog.at_level(logging.WARNING):
        assert kept_fits(forecaster, spec) is forecaster
        assert kept_fits(forecaster, None) is forecaster
    assert "refit cache" not in caplog.text  # the replay that opened it first warned once


def test_a_full_disk_warns_once_and_the_fits_go_on(cache, caplog, monkeypatch):
    from predictive_headroom.replay import cache_store

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_store.tempfile, "mkstemp", full)
    history = series(5)
    kept = KeptFits(Counting(), cache)
    with caplog.at_level(logging.WARNING):
        out = [kept.fit(history, MODEL, SETTINGS, history.end - k * DAY) for k in range(2)]
    assert all(isinstance(f, Forecast) and np.isfinite(f.yhat).all() for f in out)
    said = [r for r in caplog.records if "refit cache" in r.getMessage()]
    assert len(said) == 1 and "could not write" in said[0].getMessage()
    assert cache_usage(cache.spec.location)[0] == 0


@pytest.mark.slow
def test_tunes_second_run_fits_nothing_and_prints_the_same(tmp_path, capsys, monkeypatch):
    from test_backtest import write_csv
    from test_tune import GRID, config

    import predictive_headroom.commands.tune as tune_command
    from predictive_headroom.cli import main

    Counting.fits = []
    monkeypatch.setattr(tune_command, "default_forecaster", Counting)
    monkeypatch.setenv("PH_CACHE_DIR", str(tmp_path / "refits"))
    csv = write_csv(tmp_path / "demand.csv", series(9, seed=5))
    argv = ["tune", "-c", config(tmp_path), "--data", str(csv), *GRID, "-q", "--workers", "1"]
    seconds = re.compile(r"refits, [0-9.]+ s\)")
    main([*argv, "--no-cache"])
    plain, fitted = seconds.sub("", capsys.readouterr().out), len(Counting.fits)
    assert fitted > 2  # the two refits and the daemon's own fit
    main(argv)
    # The first run with the cache fits what it has not kept yet; within the run, the replay the
    # daemon's view of tune's choice makes reads the refits tune's own replay just kept.
    first = len(Counting.fits)
    assert seconds.sub("", capsys.readouterr().out) == plain and fitted < first <= 2 * fitted
    main(argv)
    assert seconds.sub("", capsys.readouterr().out) == plain and len(Counting.fits) == first
