"""Refits kept on disk across runs (`replay.refit_cache`): the same figures with the cache and
without, only the new cuts refitted when the history grows, and bad caches never trusted."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest
from test_backtest import DAY, FAST, POOL, SeasonalNaiveForecaster, series

from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.backtest.text import format_table
from predictive_headroom.cli import main
from predictive_headroom.core.series import History
from predictive_headroom.replay import refit_cache
from predictive_headroom.replay.refit_cache import (
    CacheSpec,
    RefitCache,
    cache_spec,
    cache_usage,
    parse_size,
)

TESTS = Path(__file__).parent
ROOT = TESTS.parent


class CountingForecaster(SeasonalNaiveForecaster):
    """Counts its fits in a class attribute (an instance's state would be part of the key)."""

    fits: ClassVar[list[float]] = []

    def fit(self, history, spec, settings, now):
        CountingForecaster.fits.append(now)
        return super().fit(history, spec, settings, now)


@pytest.fixture
def counting():
    CountingForecaster.fits = []
    return CountingForecaster()


def replayed(history: History, spec: CacheSpec | None, forecaster) -> tuple[dict, str]:
    """A small backtest's figures (as JSON and the printed table) with the cache at `spec`, the
    dial swept from the same refits; `fit_seconds` (measured, so different from fit to fit) is
    left out."""
    settings = replace(FAST, burst_view=False, refit_cache=spec, dial=(0.8, 0.99))
    result = run_backtest(history, POOL, settings, forecaster=forecaster)
    data = json.loads(json.dumps(result.to_dict(), sort_keys=True, default=str))
    data["settings"].pop("fit_seconds")
    return data, format_table(result)


def test_a_second_run_reads_every_refit_from_the_cache_and_prints_the_same(tmp_path, counting):
    spec = CacheSpec(tmp_path / "refits")
    history = series(5)
    uncached = replayed(history, None, SeasonalNaiveForecaster())
    first = replayed(history, spec, counting)
    refits = len(CountingForecaster.fits)
    assert refits == 2 and cache_usage(spec.location)[0] == refits
    second = replayed(history, spec, counting)
    assert len(CountingForecaster.fits) == refits  # nothing refitted
    assert first == second == uncached


def test_a_day_appended_refits_only_the_new_cut(tmp_path, counting):
    spec = CacheSpec(tmp_path / "refits")
    longer = series(6)
    shorter = longer.until(longer.end - DAY)
    replayed(shorter, spec, counting)
    before = list(CountingForecaster.fits)
    CountingForecaster.fits = []
    extended = replayed(longer, spec, counting)
    assert len(CountingForecaster.fits) == 1 and CountingForecaster.fits[0] > max(before)
    assert extended == replayed(longer, None, SeasonalNaiveForecaster())


def test_a_corrupted_entry_is_dropped_refitted_and_rewritten(tmp_path, counting, caplog):
    spec = CacheSpec(tmp_path / "refits")
    history = series(5)
    first = replayed(history, spec, counting)
    for pkl in spec.location.rglob("*.entry"):
        pkl.write_bytes(pkl.read_bytes()[:40])  # truncated
    CountingForecaster.fits = []
    with caplog.at_level(logging.WARNING):
        assert replayed(history, spec, counting) == first
    assert len(CountingForecaster.fits) == 2
    assert "dropped an entry that failed to load" in caplog.text
    CountingForecaster.fits = []
    assert replayed(history, spec, counting) == first
    assert CountingForecaster.fits == []  # rewritten, read again


def test_results_of_other_code_are_never_read(tmp_path, counting, monkeypatch):
    spec = CacheSpec(tmp_path / "refits")
    replayed(series(5), spec, counting)
    monkeypatch.setattr(refit_cache, "code_digest", lambda: "another version")
    CountingForecaster.fits = []
    replayed(series(5), spec, counting)
    assert len(CountingForecaster.fits) == 2


def test_an_unwritable_cache_warns_once_and_the_run_goes_on(tmp_path, caplog):
    (tmp_path / "a-file").write_text("")
    spec = CacheSpec(tmp_path / "a-file" / "refits")
    with caplog.at_level(logging.WARNING):
        out = replayed(series(5), spec, SeasonalNaiveForecaster())
    assert out == replayed(series(5), None, SeasonalNaiveForecaster())
    said = [r for r in caplog.records if "refit cache" in r.getMessage()]
    assert len(said) == 1 and "running without the cache" in said[0].getMessage()


def test_a_full_disk_warns_once_and_the_run_goes_on(tmp_path, caplog, monkeypatch):
    from predictive_headroom.replay import cache_store

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    made = RefitCache.open(CacheSpec(tmp_path / "refits"))  # its key made before the disk fills
    assert made is not None
    monkeypatch.setattr(cache_store.tempfile, "mkstemp", full)
    spec = CacheSpec(tmp_path / "refits")
    with caplog.at_level(logging.WARNING):
        out = replayed(series(6), spec, SeasonalNaiveForecaster())
    assert out == replayed(series(6), None, SeasonalNaiveForecaster())
    said = [r for r in caplog.records if "refit cache" in r.getMessage()]
    assert len(said) == 1 and "could not write" in said[0].getMessage()
    assert cache_usage(spec.location)[0] == 0


def test_the_cache_is_bounded_evicting_the_least_recently_used(tmp_path, counting):
    spec = CacheSpec(tmp_path / "refits")
    replayed(series(8), spec, counting)
    entries, size = cache_usage(spec.location)
    assert entries == 5
    bounded = CacheSpec(spec.location, max_bytes=size // 2)
    replayed(series(8), bounded, counting)
    assert cache_usage(spec.location)[1] <= size // 2 + 4096  # the bookkeeping files


TWO_AT_ONCE = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from test_refit_cache import CountingForecaster, replayed
    from test_backtest import series
    from predictive_headroom.replay.refit_cache import CacheSpec
    data, _ = replayed(series(8), CacheSpec(Path(sys.argv[1])), CountingForecaster())
    print(json.dumps(data, sort_keys=True))
    """
)


def test_two_runs_at_once_on_one_cache_do_not_corrupt_it(tmp_path, counting, caplog):
    spec = CacheSpec(tmp_path / "refits")
    script = TWO_AT_ONCE.format(tests=str(TESTS))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(spec.location)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outs]
    a, b = (json.loads(out) for out, _ in outs)
    assert a == b
    with caplog.at_level(logging.WARNING):
        again, _ = replayed(series(8), spec, counting)
    assert CountingForecaster.fits == [] and "refit cache" not in caplog.text
    assert json.loads(json.dumps(again, sort_keys=True)) == a


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PH_CACHE_DIR": "off"}, None),
        ({"PH_CACHE_DIR": "/c/r"}, CacheSpec(Path("/c/r"))),
        ({"XDG_CACHE_HOME": "/x"}, CacheSpec(Path("/x/predictive-headroom/refits"))),
        ({"PH_CACHE_DIR": "/c", "PH_CACHE_SIZE": "500M"}, CacheSpec(Path("/c"), 500 * 1024**2)),
    ],
)
def test_the_cache_is_where_the_environment_says(env, expected):
    assert cache_spec(env) == expected


def test_the_default_cache_is_under_the_users_cache_directory():
    spec = cache_spec({})
    assert spec is not None and spec.max_bytes == 2 * 1024**3
    assert spec.location == Path("~/.cache/predictive-headroom/refits").expanduser()


@pytest.mark.parametrize("text", ["lots", "-1G", "0"])
def test_a_bad_cache_size_says_the_form(text):
    with pytest.raises(ValueError, match=r"PH_CACHE_SIZE.*(2G|positive)"):
        parse_size(text)


def test_cache_info_and_clear(tmp_path, capsys, monkeypatch):
    location = tmp_path / "refits"
    monkeypatch.setenv("PH_CACHE_DIR", str(location))
    replayed(series(5), CacheSpec(location), SeasonalNaiveForecaster())
    assert main(["cache", "info"]) == 0
    assert f"{location}: 2 refits" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert "cleared" in capsys.readouterr().out and cache_usage(location)[0] == 0
    monkeypatch.setenv("PH_CACHE_SIZE", "lots")
    assert main(["cache", "info"]) == 2
    assert "PH_CACHE_SIZE='lots'" in capsys.readouterr().err


PIPED = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from dataclasses import replace
    from test_backtest import FAST, POOL, SeasonalNaiveForecaster, series
    from predictive_headroom.backtest.run import run_backtest

    class Slow(SeasonalNaiveForecaster):
        def fit(self, history, spec, settings, now):
            time.sleep(0.5)
            return super().fit(history, spec, settings, now)

    settings = replace(FAST, burst_view=False, progress_seconds=0.2)
    run_backtest(series(10), POOL, settings, progress=True, forecaster=Slow())
    print("done", flush=True)
    """
)


def test_progress_lines_arrive_through_a_pipe_before_the_end():
    script = PIPED.format(tests=str(TESTS))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = run.stderr.readline()
        assert first.startswith("pool web: read 2,880 samples") and "7 refits, 7 to fit" in first
        line = run.stderr.readline()
        assert line.startswith("refits: ") and " done, " in line
        assert run.poll() is None  # still refitting: the line came before the end
    finally:
        out, err = run.communicate(timeout=300)
    assert run.returncode == 0 and out.strip() == "done", err
    assert err.strip().splitlines()[-1].startswith("refits: 7/7 done")


@pytest.mark.slow
def test_backtest_keeps_its_refits_unless_told_not_to(tmp_path, capsys, monkeypatch):
    from test_backtest import write_csv

    location = tmp_path / "refits"
    monkeypatch.setenv("PH_CACHE_DIR", str(location))
    csv = write_csv(tmp_path / "demand.csv", series(5))
    argv = ["backtest", "--data", str(csv), "--quiet", "--warmup", "3d", "--workers", "1"]
    assert main([*argv, "--no-cache"]) == 0
    plain = capsys.readouterr().out
    assert cache_usage(location)[0] == 0
    assert main(argv) == 0 and main(argv) == 0
    assert cache_usage(location)[0] == 2
    assert capsys.readouterr().out == plain * 2


@pytest.mark.slow
def test_refits_kept_by_worker_processes_are_read_back_the_same(tmp_path):
    spec = CacheSpec(tmp_path / "refits")
    settings = replace(FAST, burst_view=False, workers=2, dial=(0.8,))
    runs = [
        run_backtest(series(6), POOL, replace(settings, refit_cache=s), forecaster=f)
        for s, f in ((None, SeasonalNaiveForecaster()), (spec, SeasonalNaiveForecaster()))
    ]
    assert cache_usage(spec.location)[0] == 3
    again = run_backtest(
        series(6), POOL, replace(settings, refit_cache=spec), forecaster=SeasonalNaiveForecaster()
    )
    assert [r.strategies["forecast"].metrics for r in (*runs, again)] == [
        runs[0].strategies["forecast"].metrics
    ] * 3
    assert format_table(again) == format_table(runs[1])
