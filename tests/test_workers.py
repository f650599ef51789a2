"""Refits in worker processes: the same forecasts, burst models and plans as in one process, in
the same order; a worker killed during a refit costs one retry, a second death names the refit
and `backtest`/`tune` exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_backtest import DAY, START
from test_burst_model import POOL, BurstNaiveForecaster, level_scaled

from predictive_headroom.cli import main as cli_main
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.forecast.burst import naive_burst_profile
from predictive_headroom.forecast.burst_features import FEATURES
from predictive_headroom.replay.planner import planner_strategy
from predictive_headroom.replay.simulator import minute_grid
from predictive_headroom.replay.walkforward import Refits, walk_forward
from predictive_headroom.replay.workers import WorkerDied, default_workers, in_workers

QUANTILES = (0.5, 0.9)


class KilledOnce(BurstNaiveForecaster):
    """Its worker process is killed (SIGKILL) the first time it fits at `at`, or every time with
    `always`; `marks` is a directory the attempts are counted in, across processes."""

    def __init__(self, at: float, marks: Path, always: bool = False) -> None:
        self.at, self.marks, self.always = at, marks, always

    def fit(self, history, spec, settings, now):
        if now == self.at:
            mark = self.marks / f"attempt-{len(list(self.marks.iterdir()))}"
            mark.touch()
            if self.always or len(list(self.marks.iterdir())) == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().fit(history, spec, settings, now)


@pytest.fixture(scope="module")
def series():
    history = level_scaled(4, seed=7)
    times, _ = minute_grid(history)
    return history, times, int(np.searchsorted(times, START + 3 * DAY))


def replayed(series, forecaster, workers):
    """The walk-forward (three refits a day) and the forecast strategy's placeholders per minute."""
    history, times, first = series
    settings = resolve_settings(POOL)
    refits = Refits(DAY / 3, forecaster, naive_burst_profile, QUANTILES, workers=workers)
    wf = walk_forward(history, POOL, times, first, settings, refits)
    return wf, planner_strategy(POOL, times, wf.model, history, 0.0, settings)[1]


def _same(a, b):
    """Two walk-forwards made the same forecasts, burst models and plans."""
    (wa, pa), (wb, pb) = a, b
    assert wa.refits == wb.refits and wa.models == wb.models
    assert [at for at, _ in wa.model] == [at for at, _ in wb.model]
    for (_, fa), (_, fb) in zip(wa.model, wb.model, strict=True):
        np.testing.assert_array_equal(fa.yhat, fb.yhat)
    x = np.random.default_rng(0).random((50, len(FEATURES)))
    for q in QUANTILES:
        for (_, fa), (_, fb) in zip(wa.dial[q][0], wb.dial[q][0], strict=True):
            assert fa.burst_model.quantile == fb.burst_model.quantile == q
            np.testing.assert_array_equal(
                fa.burst_model.regressor.predict(x), fb.burst_model.regressor.predict(x)
            )
    np.testing.assert_array_equal(pa, pb)


@pytest.mark.slow
def test_refits_in_two_workers_plan_as_refits_in_this_process(series):
    one = replayed(series, BurstNaiveForecaster(), workers=1)
    assert one[0].refits == 3
    _same(one, replayed(series, BurstNaiveForecaster(), workers=2))


@pytest.mark.slow
def test_a_worker_killed_during_a_refit_is_retried_once(series, tmp_path):
    _, times, first = series
    second = float(times[first]) + DAY / 3
    killed = replayed(series, KilledOnce(second, tmp_path), workers=2)
    assert len(list(tmp_path.iterdir())) == 2  # killed, then fitted on a fresh worker
    _same(replayed(series, BurstNaiveForecaster(), workers=1), killed)


@pytest.mark.slow
def test_a_refit_whose_worker_dies_twice_is_named(series, tmp_path):
    _, times, first = series
    second = float(times[first]) + DAY / 3
    with pytest.raises(WorkerDied, match=r"refit 2/3 at \d{4}-\d\d-\d\dT\d\d:\d\d:00Z: its worker"):
        replayed(series, KilledOnce(second, tmp_path, always=True), workers=2)
    assert len(list(tmp_path.iterdir())) == 2


def test_jobs_come_back_in_the_order_given_whatever_finishes_first():
    assert in_workers(abs, [-3, 2, -1, 0], 2) == [3, 2, 1, 0]
    assert in_workers(abs, [-3, 2], 1) == [3, 2]


def test_the_default_is_the_cpus_this_process_may_use_at_most_four():
    assert default_workers() == max(1, min(4, len(os.sched_getaffinity(0))))


def test_tune_exits_2_naming_the_refit_whose_worker_died(monkeypatch, capsys, tmp_path):
    def died(*args, **kwargs):
        raise WorkerDied(3, "refit 4/41 at 2015-03-15T21:43:00Z")

    monkeypatch.setattr("predictive_headroom.app.choice.run_backtest", died)  # tune's replay
    config = tmp_path / "policy.yaml"
    config.write_text(POLICY)
    code = cli_main(["tune", "-c", str(config), "--data", str(TAXI), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "refit 4/41 at 2015-03-15T21:43:00Z: its worker process died twice" in err
    assert "--workers 1" in err


TAXI = Path(__file__).parents[1] / "predictive_headroom" / "data" / "nab_nyc_taxi_30min.csv"
POLICY = """pools:
  - name: taxi
    target: {namespace: headroom, name: taxi-placeholder}
    maxReplicas: 100
    leadTime: 4m
    protection: 95%
    forecast: {query: demand, demandPerReplica: 1000, history: 28d}
"""


LEAVER = """
import os, time
from pathlib import Path
from predictive_headroom.replay.workers import in_workers

def job(seconds):
    Path(f"worker-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while len(list(Path().glob("worker-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # both jobs have started
    time.sleep(seconds)

if __name__ == "__main__":
    # the first job's end ends this process as pytest-xdist's workers end (no atexit, no executor
    # shutdown), while the second job still runs
    in_workers(job, [0, 2], 2, done=lambda k, result: os._exit(0))
"""


@pytest.mark.slow
def test_workers_end_when_the_process_that_started_them_ends_abruptly(tmp_path) -> None:
    """A process that ended without shutting its pools down (`os._exit`, SIGKILL) left an idle
    worker waiting on its queue forever, and the fork server beside it: found alive, parent 1,
    49 minutes after a `make test`."""
    script = tmp_path / "leaver.py"
    script.write_text(LEAVER)
    with (tmp_path / "stderr").open("w") as err:  # not a pipe: a leftover worker would hold it
        done = subprocess.run([sys.executable, str(script)], stderr=err, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, (tmp_path / "stderr").read_text()
    pids = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    assert len(pids) == 2  # two worker processes ran the jobs
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), "a worker outlived the process that started it"


def _alive(pid: int) -> bool:
    """`pid` is a process that has not ended (a zombie has: it waits only for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
