"""One set of numbers (issue 62, item 3): on one history shipped in the repo (the last weeks of
the bundled NYC taxi series), `tune`, `backtest --protection`, `plan`, `report` and the daemon
(`/last-run` and the `forecast_beats_fixed` metric) print the same static-headroom price, the same
"raise maxReplicas to", the same verdict against fixed headroom over the same named days, and
`tune` the range its rule kept on the weeks it did not see (item 7)."""

from __future__ import annotations

import html
import io
import json
import re
from contextlib import redirect_stdout
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from test_backtest import SeasonalNaiveForecaster
from test_retune import SeriesSource
from test_review import fast, write_csv

from predictive_headroom import cli
from predictive_headroom.backtest.promise_measure import fewest_fixed_n
from predictive_headroom.commands.tune import print_recommendation
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.load import load_policy
from predictive_headroom.replay.simulator import score, simulate
from predictive_headroom.sources.csvsource import CsvSource

NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")
DAYS = 24
WINDOW = 7 * DAY_SECONDS
CURRENT = 6
POOL = {
    "name": "rides",
    "target": {"namespace": NS, "name": "rides-placeholder"},
    "maxReplicas": 2,  # binds: the promise names the cap and the N to raise it to
    "leadTime": "5m",
    "protection": "95%",
    "forecast": {"query": "q", "demandPerReplica": 100, "step": "30m", "history": "28d"},
    "placeholder": {"requests": {"cpu": "2", "memory": "4Gi"}},
}
COST = {"costPerCpuHour": 0.04, "costPerGiBHour": 0.005, "nodeCpu": 16, "nodeMemory": "30Gi"}


@pytest.fixture(scope="module")
def taxi():
    """The last `DAYS` days of the taxi series shipped in the package."""
    with resources.as_file(
        resources.files("predictive_headroom") / "data" / "nab_nyc_taxi_30min.csv"
    ) as path:
        full = CsvSource(str(path)).full()
    return full.since(full.end - DAYS * DAY_SECONDS)


def _json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1), out  # 1: the promise fell short
    return json.loads(out)


def _daemon(config: Path, history, at: float):
    """The daemon's refit and reconcile at `at`: its promise as the report shows it, `/last-run`
    and the metrics exposition."""
    with FakeApiServer() as server:
        for n in range(4):
            server.add_node(f"node-{n}", cpu="16")
        server.add_deployment(NS, "rides-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            source=SeriesSource(history),
            forecaster=SeasonalNaiveForecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            loop=LoopSettings(observe_placeholders=False),
            clock=lambda: at,
        )
        daemon.retune_window = WINDOW
        assert daemon.refit()
        daemon.reconcile()
        policy = load_policy(config)
        shown = daemon.tunings["rides"].report(pool_price(policy.pools[0], policy.cost))
        return shown, daemon.status(), daemon.metrics.exposition().decode()


def _metric(text: str, name: str) -> float:
    found = re.search(rf'^predictive_headroom_{name}{{pool="rides"}} (\S+)$', text, re.M)
    assert found, name
    return float(found.group(1))


@pytest.mark.slow
def test_every_output_prints_one_set_of_numbers(tmp_path, capsys, monkeypatch, taxi) -> None:
    fast(monkeypatch)
    monkeypatch.setenv("PH_RETUNE_WINDOW", str(WINDOW))
    data = write_csv(tmp_path / "taxi.csv", taxi)
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [POOL], "cost": COST}, sort_keys=False))
    at = float(taxi.end)
    when = f"{np.datetime64(int(at), 's')}Z"
    base = ["-c", str(config), "--data", str(data)]

    shown, last_run, metrics = _daemon(config, taxi, at)
    plan = _json(capsys, "plan", *base, "--at", when, "-o", "json")
    report_dir = tmp_path / "report"
    assert cli.main(["report", *base, "--at", when, "--out", str(report_dir)]) == 0
    report = json.loads((report_dir / "report.json").read_text())
    tune = _json(capsys, "tune", *base, "--current", str(CURRENT), "-q", "-o", "json")
    page = tmp_path / "bt"
    backtest = _json(
        capsys,
        "backtest",
        *base,
        "--protection",
        "95%",
        "--current",
        str(CURRENT),
        "-q",
        "--out",
        str(page),
        "-o",
        "json",
    )
    [entry] = backtest["promise"]

    # One static-headroom price at the protection asked: tune's hindsight line and the
    # backtest's frontier table read the one curve (`core.curve`).
    [at_95] = [a for a in backtest["frontier"]["at"] if a["protection"] == 0.95]
    assert tune["static"] is not None
    assert tune["static"]["overhead_node_hours"] == at_95["cost"]["static"]

    # One "raise maxReplicas to": tune's and the backtest's promise name the same cap and N.
    cause = tune["promise"]["cause"]
    assert cause is not None and cause["cause"] == "cap"
    assert entry["cause"]["raise_to"] == cause["raise_to"] > POOL["maxReplicas"]
    assert f"raise it to {cause['raise_to']} " in cause["says"]

    # The user's N, one verdict on the whole history, in tune and the backtest.
    assert backtest["current"] == tune["current"]

    # The daemon's verdict against fixed headroom, the same everywhere it is said, the days
    # judged named in the sentence: /last-run, the metric, plan, report, tune and backtest.
    want = shown["against_fixed"]
    assert want is not None and "scored days judged" in want["says"]
    # ... over the days tune judges, by the one function: tune's own verdict on its choice's
    # replay (item 3, "over the same days") is the daemon's, word for word.
    assert tune["choice"]["verdict"] == want
    assert last_run["tuning"]["rides"]["choice"]["verdict"] == want
    # "Did the forecast beat your N": the choice's verdict against the user's N is the one
    # tune --current prints, the same function over the same days.
    assert tune["choice"]["verdict_yours"] == [c["verdict"] for c in tune["current"]]
    views = {
        "/last-run": last_run["tuning"]["rides"]["against_fixed"],
        "plan": plan["pools"][0]["promise"]["against_fixed"],
        "report": report["pools"][0]["promise"]["against_fixed"],
        "tune": tune["daemon_now"]["promise"]["against_fixed"],
        "backtest": entry["daemon_now"]["promise"]["against_fixed"],
    }
    for who, said in views.items():
        assert said == want, who
    assert _metric(metrics, "forecast_beats_fixed") == float(want["forecast_beats_fixed"])
    assert want["says"] in (report_dir / "index.html").read_text()
    assert want["says"] in (page / "backtest.html").read_text()

    # How sure the promise is: tune prints the range its rule kept on every unseen week.
    weeks = tune["recommendation"]["unseen_weeks"]
    assert weeks is not None and weeks["weeks"] and weeks["unit"] == "week"
    kept = [w["kept"] for w in weeks["weeks"]]
    assert (weeks["low"], weeks["high"]) == (min(kept), max(kept))
    printed = io.StringIO()
    with redirect_stdout(printed):
        print_recommendation(tune)
    assert weeks["says"] in printed.getvalue()
    assert f"it kept {100 * weeks['low']:.0f}" in printed.getvalue()


@pytest.mark.slow
def test_raise_to_is_the_fewest_fixed_n_that_kept_the_protection(taxi) -> None:
    from predictive_headroom.backtest.results import BacktestSettings
    from predictive_headroom.backtest.run import run_backtest
    from predictive_headroom.policy.config import Pool

    pool = Pool.model_validate(POOL)
    result = run_backtest(
        taxi.since(taxi.end - 12 * DAY_SECONDS),
        pool,
        BacktestSettings(burst_view=False),
        forecaster=SeasonalNaiveForecaster(),
    )
    waited = result.strategies["reactive"].metrics.unserved_pod_minutes
    assert waited > 0
    n, kept = fewest_fixed_n(result, 0.95)

    def kept_by(m: int) -> float:
        run = simulate(result.pods, np.full(result.pods.size, m, dtype=np.int64), result.cluster)
        return 1 - score(run, result.scored_from).unserved_pod_minutes / waited

    assert kept == pytest.approx(kept_by(n)) and kept >= 0.95
    assert kept_by(n - 1) < 0.95  # every N tried, not the curve's steps


@pytest.mark.parametrize(
    ("first", "lo", "hi"), [(613, 512, 640), (129, 128, 160), (2, 1, 2), (7, 0, 701)]
)
def test_fewest_tries_every_n_between_two_points_of_the_curve(first, lo, hi) -> None:
    from predictive_headroom.core.curve import fewest

    tried: list[int] = []

    def keeps(n: int) -> bool:
        tried.append(n)
        return n >= first

    assert fewest(keeps, lo, hi) == first
    assert len(tried) <= max(1, (hi - lo).bit_length())  # bisection, not a scan


def test_p_out_of_reach_is_said_by_tune_last_run_and_the_report(
    tmp_path, capsys, monkeypatch, taxi
):
    """Item 7 on a history whose last week holds a burst no week before it did: the weekly
    range's low end is far below P, and `tune`, `/last-run` and the report page each say P is
    not something this history lets any rule promise, with the peak-sized fixed N's cost."""
    fast(monkeypatch)
    monkeypatch.setenv("PH_RETUNE_WINDOW", str(WINDOW))
    values = taxi.values.copy()
    burst = (taxi.times >= taxi.end - 3 * DAY_SECONDS) & (taxi.times < taxi.end - 2.5 * DAY_SECONDS)
    values[burst] *= 4.0
    spiked = type(taxi)(taxi.times, values, taxi.source)
    data = write_csv(tmp_path / "spiked.csv", spiked)
    config = tmp_path / "policy.yaml"
    pool = {**POOL, "maxReplicas": 200}
    config.write_text(yaml.safe_dump({"pools": [pool], "cost": COST}, sort_keys=False))
    at = float(spiked.end)
    when = f"{np.datetime64(int(at), 's')}Z"
    base = ["-c", str(config), "--data", str(data)]

    tune = _json(capsys, "tune", *base, "-q", "-o", "json")
    weeks = tune["recommendation"]["unseen_weeks"]
    assert weeks is not None and weeks["out_of_reach"], weeks
    said = weeks["says"]
    assert "95% is not something this history lets any rule promise" in said
    peak = weeks["peak_fixed"]
    assert peak["replicas"] is not None
    assert f"{peak['replicas']} fixed placeholders kept 95% on every week" in said
    assert f"{peak['overhead_node_hours_per_day']:,.1f} overhead node-hours a day" in said
    printed = io.StringIO()
    with redirect_stdout(printed):
        print_recommendation(tune)
    assert said in printed.getvalue()

    shown, last_run, _ = _daemon(config, spiked, at)
    assert last_run["tuning"]["rides"]["unseen_weeks"]["says"] == said
    assert shown["unseen_weeks"]["says"] == said
    report_dir = tmp_path / "report"
    assert cli.main(["report", *base, "--at", when, "--out", str(report_dir)]) == 0
    page = (report_dir / "index.html").read_text()
    assert f"How sure: {said}" in html.unescape(page)
