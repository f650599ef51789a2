"""What you review is what runs (issue 36): for a `protection:` pool, `plan`, `report`,
`forecast`, `tune` and `backtest --protection` show the setting, reserve, protection kept and
placeholder count the daemon would write at the same instant, and price money one way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from fake_apiserver import FakeApiServer
from test_backtest import DAY, SeasonalNaiveForecaster, series
from test_daemon import NS, Clock, make_daemon, pool_yaml
from test_retune import SeriesSource

from predictive_headroom import cli
from predictive_headroom.app import fit as app_fit
from predictive_headroom.commands import report as report_command
from predictive_headroom.commands import tune as tune_command
from predictive_headroom.core.price import NodeShape, price_node_hour
from predictive_headroom.forecast import forecaster as prophet_forecaster
from predictive_headroom.policy.config import Cost

WINDOW = 2 * DAY


def write_csv(path: Path, history) -> Path:
    lines = ["timestamp,value"] + [
        f"{int(t)},{v:.4f}" for t, v in zip(history.times, history.values, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(capsys, *argv: str) -> dict:
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1), out  # tune says 1 when the promise fell short
    return json.loads(out)


def fast(monkeypatch) -> None:
    """Every command that fits (and the modules that imported the name) uses seasonal naive."""
    for module in (app_fit, report_command, tune_command):
        monkeypatch.setattr(module, "default_forecaster", SeasonalNaiveForecaster)
    monkeypatch.setattr(prophet_forecaster, "ProphetForecaster", SeasonalNaiveForecaster)


@pytest.fixture
def naive(monkeypatch):
    """Every command fits with the fast seasonal-naive forecaster and re-tunes on 2 days, as the
    daemon below does (`PH_RETUNE_WINDOW`)."""
    fast(monkeypatch)
    monkeypatch.setenv("PH_RETUNE_WINDOW", str(WINDOW))


@pytest.mark.slow
def test_the_daemon_plan_report_and_tune_write_and_show_the_same_count(tmp_path, capsys, naive):
    history = series(9)
    data = write_csv(tmp_path / "demand.csv", history)
    pool = pool_yaml(
        "web",
        maxReplicas=12,  # binds: the reserve is capped where the daemon caps it
        leadTime="4m",
        scaleDownStabilization="20m",
        protection="90%",
        forecast={"query": "q", "demandPerReplica": 8, "history": "28d"},
        placeholder={"requests": {"cpu": "2", "memory": "4Gi"}},
    )
    cost = {"costPerCpuHour": 0.04, "costPerGiBHour": 0.005}
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [pool], "cost": cost}, sort_keys=False))
    at = float(history.end)
    when = f"{np.datetime64(int(at), 's')}Z"

    with FakeApiServer() as server:
        server.add_deployment(NS, "web-placeholder", 0)
        daemon = make_daemon(
            config,
            server,
            Clock(at),
            source=SeriesSource(history),
            forecaster=SeasonalNaiveForecaster(),
        )
        daemon.retune_window = WINDOW
        assert daemon.refit()
        assert daemon.reconcile().ok
        written = server.replicas(NS, "web-placeholder")
        tuning = daemon.tunings["web"]

    plan = run_cli(
        capsys, "plan", "-c", str(config), "--data", str(data), "--at", when, "-o", "json"
    )
    out = tmp_path / "report"
    assert (
        cli.main(
            ["report", "-c", str(config), "--data", str(data), "--at", when, "--out", str(out)]
        )
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    tune = run_cli(
        capsys, "tune", "-c", str(config), "--data", str(data), "--at", when, "-q", "-o", "json"
    )

    backtest = run_cli(
        capsys,
        "backtest",
        "-c",
        str(config),
        "--data",
        str(data),
        "--protection",
        "90%",
        "-q",
        "-o",
        "json",
    )
    [entry] = backtest["promise"]
    # tune and backtest --protection replay the same history the same way: one figure.
    for key in ("realized_protection", "overhead_node_hours", "overhead_node_hours_per_day"):
        assert tune["promise"][key] == entry[key], key
    assert tune["cost"]["price_per_node_hour"] == entry["price_per_node_hour"]
    assert entry["daemon_now"] == tune["daemon_now"]

    [row] = plan["pools"]
    [section] = report["pools"]
    now = tune["daemon_now"]
    assert tuning.status == "tuned" and tuning.reserve > 0, tuning.reason
    assert written == row["desired_replicas"] == section["plan"]["now"]["desired_replicas"]
    assert written == now["replicas"]
    # One promise: asked, kept, the setting and reserve held, its cost a day and its money.
    promises = [row["promise"], section["promise"], now["promise"]]
    for key in ("asked", "kept", "burst_quantile", "scale_down_stabilization_seconds", "reserve"):
        assert {json.dumps(p[key]) for p in promises} == {json.dumps(promises[0][key])}, key
    assert promises[0]["kept"] == pytest.approx(tuning.realized_protection, abs=1e-4)
    assert promises[0]["reserve"] == tuning.reserve
    money = {p["money_per_day"] for p in promises}
    assert len(money) == 1 and None not in money
    assert len({p["price_assumed"] for p in promises}) == 1
    # The report's money and tune's are priced alike: 8 placeholders of 2 CPU and 4 GiB a node.
    assert tune["cost"]["price_per_node_hour"] == pytest.approx(8 * (2 * 0.04 + 4 * 0.005))
    assert section["cost"]["money"] == pytest.approx(
        section["cost"]["replica_hours"] * (2 * 0.04 + 4 * 0.005)
    )


@pytest.mark.slow
def test_a_shortfall_is_a_warning_in_the_report_and_on_plans_output(tmp_path, capsys, naive):
    history = series(9, seed=3)
    data = write_csv(tmp_path / "demand.csv", history)
    pool = pool_yaml(
        "web",
        maxReplicas=3,  # too few to keep anything: short whatever it holds
        protection="99.9%",
        forecast={"query": "q", "demandPerReplica": 4},
    )
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    out = tmp_path / "report"
    assert cli.main(["report", "-c", str(config), "--data", str(data), "--out", str(out)]) == 0
    [section] = json.loads((out / "report.json").read_text())["pools"]
    assert section["promise"]["short"] is True
    assert "promise-short" in {w["code"] for w in section["warnings"]}
    capsys.readouterr()
    assert (
        cli.main(["plan", "-c", str(config), "--data", str(data), "--at", "2024-01-10T00:00:00Z"])
        == 0
    )
    text = capsys.readouterr().out
    assert "warning: pool web: protection asked 99.9%, last week" in text


@pytest.mark.slow
def test_tune_on_too_short_a_history_says_what_the_daemon_holds_until_when(
    tmp_path, capsys, monkeypatch
):
    fast(monkeypatch)
    monkeypatch.delenv("PH_RETUNE_WINDOW", raising=False)  # the daemon's 14 days
    history = series(9)
    data = write_csv(tmp_path / "demand.csv", history)
    pool = pool_yaml("web", protection="95%", forecast={"query": "q", "demandPerReplica": 8})
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    capsys.readouterr()
    cli.main(["tune", "-c", str(config), "--data", str(data), "-q"])
    text = capsys.readouterr().out
    assert "not tuned yet" in text
    # 14 days to replay after at least a day of history: from day 15 of the data.
    start = float(history.start) + 15 * DAY
    assert f"until {np.datetime64(int(start), 's')}Z, when the history is long enough" in text
    assert "re-tunes at each refit to keep it" not in text


@pytest.mark.parametrize(
    "cost, shape, price, slots, assumed",
    [
        # the node is 8 placeholders: memory and the placeholder's size count
        ({"costPerCpuHour": 0.04, "costPerGiBHour": 0.005}, None, 0.8, 8, "8 placeholders"),
        # the node's shape: as many placeholders as fit in CPU and memory
        (
            {"costPerCpuHour": 0.04, "costPerGiBHour": 0.005},
            NodeShape(16, 30),
            16 * 0.04 + 30 * 0.005,
            7,
            "holding 7 placeholders",
        ),
        # the provider's node price wins
        (
            {"costPerCpuHour": 0.04, "nodeHourPrice": 1.1},
            NodeShape(16, 64),
            1.1,
            8,
            "nodeHourPrice",
        ),
        ({"currency": "EUR"}, None, None, 8, "no prices"),
    ],
)
def test_one_price_says_what_it_assumed(cost, shape, price, slots, assumed):
    p = price_node_hour(Cost.model_validate(cost), 2.0, 4.0, shape=shape)
    assert p.node_hour == (None if price is None else pytest.approx(price))
    assert p.slots == slots and assumed in p.assumed
    if price is not None:
        assert p.placeholder_hour == pytest.approx(price / slots)
        assert p.text(10) == f"{10 * price:,.2f} {p.currency}"


def test_a_policy_can_give_the_nodes_shape_and_both_halves_are_needed(tmp_path, capsys):
    pool = pool_yaml("web", forecast={"query": "q", "demandPerReplica": 8})
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [pool], "cost": {"nodeCpu": 16}}))
    assert cli.main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert "nodeCpu is set without nodeMemory" in err
