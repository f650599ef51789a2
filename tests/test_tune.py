"""`tune`: the cheapest setting reaching a protection target, on a CSV and on a real Prometheus."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series, write_csv

from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.recommend import recommend
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.cli import main
from predictive_headroom.commands.tune import print_recommendation
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.replay.setup import WhatIf

POLICY = """\
pools:
  - name: web
    target: {{namespace: ns, name: web-placeholder}}
    maxReplicas: 200
    leadTime: 4m
    protection: {protection}
    forecast: {{query: '{query}', demandPerReplica: 5, history: {history}}}
"""
GRID = ["--quantiles", "0.5,0.95", "--windows", "5m,30m", "--refit-every", "1d"]


def config(tmp_path, protection="90%", query="demand", history="28d", extra=""):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(protection=protection, query=query, history=history) + extra)
    return str(path)


def check(out, target):
    """What every recommendation promises: the walk-forward figure, YAML that keeps the promise
    through protection: (never next to burstQuantile), costs per day and month."""
    promise = out["promise"]
    assert out["protection_target"] == target == promise["protection"]
    assert out["status"] in ("kept", "short", "proportional-cheaper")
    assert (out["status"] == "short") == (
        promise["realized_protection"] < target and out["status"] != "proportional-cheaper"
    )
    rec = out["recommendation"]
    if out["status"] != "proportional-cheaper" and rec["kind"] == "protection":
        assert out["yaml"] == [f"protection: {100 * rec['protection']:g}%"]
        assert rec["protection"] <= target
    elif out["status"] != "proportional-cheaper":  # fixed headroom, judged on unseen days
        assert out["yaml"][0] == f"minReplicas: {rec['replicas']}"
        assert rec["remove"] == ["protection"] and rec["unseen"] is not None
    assert round(promise["days"]) <= len(promise["choices"]) <= round(promise["days"]) + 1
    hs = out["hindsight"]
    assert hs["burst_quantile"] in (0.5, 0.95)
    assert hs["scale_down_stabilization_seconds"] in (300.0, 1800.0)
    cost = out["cost"]
    assert cost["per_day"] == pytest.approx(promise["overhead_node_hours"] / promise["days"], 0.01)
    assert cost["per_month"] == pytest.approx(30 * cost["per_day"], 0.01)


def pasted(path, yaml_lines, remove=()):
    """The policy at `path` with the printed YAML pasted into its pool (replacing its keys, and
    deleting those in `remove`)."""
    keys = {line.split(":")[0] for line in yaml_lines if not line.startswith(" ")} | set(remove)
    kept = [
        line for line in path.read_text().splitlines() if line.strip().split(":")[0] not in keys
    ]
    return "\n".join(kept + [f"    {line}" for line in yaml_lines]) + "\n"


@pytest.mark.slow
def test_tune_on_a_csv_recommends_yaml_and_prints_it_in_words(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(9, seed=5))
    code = main(["tune", "-c", config(tmp_path), "--data", str(csv), *GRID, "-o", "json", "-q"])
    out = json.loads(capsys.readouterr().out)
    check(out, 0.9)
    assert code == (1 if out["status"] == "short" else 0)
    assert out["history"]["refits"] == 2  # 9 days: 7 of warm-up, refitted daily on the 2 after
    print_recommendation(out)
    text = capsys.readouterr().out
    assert "absorb at least 90% of the pod-minutes that would otherwise wait for a node" in text
    for line in out["yaml"]:
        assert f"\n  {line}\n" in text
    # The walk-forward figure leads; hindsight comes after it; no broken sentences.
    walk = text.index("walk-forward over the whole history (refit every 1d, each day's setting")
    assert walk < text.index("in hindsight") and "asked 90%: kept" in text
    assert "a day" in text and "a month" in text and "not reached node-hours" not in text
    # The YAML validates as printed, pasted into the pool.
    policy = tmp_path / "pasted.yaml"
    policy.write_text(
        pasted(tmp_path / "policy.yaml", out["yaml"], out["recommendation"]["remove"])
    )
    assert main(["validate", str(policy)]) == 0, capsys.readouterr()


@pytest.mark.slow
def test_tune_against_a_real_prometheus(prometheus_server, tmp_path, capsys):
    from promfixture import DEMAND

    from predictive_headroom.commands import iso

    path = config(tmp_path, protection="95%", query=DEMAND, history="9d")
    at = iso(prometheus_server.end)
    args = ["tune", "-c", path, "--prometheus-url", prometheus_server.url, "--at", at, *GRID]
    code = main([*args, "-o", "json", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert code == (1 if out["status"] == "short" else 0)
    check(out, 0.95)
    assert (
        out["history"]["to"] == at and out["history"]["refits"] == 3
    )  # 9 days + the newest sample


def test_too_little_history_says_how_much_is_needed(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(5))
    assert main(["tune", "-c", config(tmp_path), "--data", str(csv), "-q"]) == 2
    err = capsys.readouterr().err
    assert "too little history to tune" in err and "spans 5.0 days" in err


@pytest.mark.slow
def test_a_target_not_kept_walk_forward_says_so_with_money_and_exits_1(capsys):
    pool = parse_policy(POLICY.format(protection="90%", query="q", history="28d"), "t").pools[0]
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=3 * DAY),
        dial=(0.3,),
        stabilization_dial=(60.0,),
        protections=(1.0,),
    )
    result = run_backtest(series(6, seed=2), pool, settings, forecaster=SeasonalNaiveForecaster())
    out = recommend(result, pool, 1.0, price=0.32, currency="EUR")
    assert out["status"] == "short" and out["yaml"] == ["protection: 100%"]
    assert out["promise"]["realized_protection"] < 1.0
    assert out["cost"]["money_per_day"] == pytest.approx(0.32 * out["cost"]["per_day"], 0.01)
    out["seconds"] = 1.0
    print_recommendation(out)
    text = capsys.readouterr().out
    kept = 100 * out["promise"]["realized_protection"]
    assert f"asked 100%: kept {kept:.1f}%" in text
    assert f"warning: walk-forward it kept {kept:.1f}%, short of 100%" in text
    assert f"overhead node-hours a day: {0.32 * out['cost']['per_day']:,.2f} EUR (" in text


def test_a_figure_resting_on_few_events_says_so():
    entry = PromiseEntry(
        protection=0.95,
        realized_protection=1.0,
        unserved_pod_minutes=0.0,
        reactive_unserved_pod_minutes=21.0,
        overhead_node_hours=120.0,
        overhead_node_hours_per_day=8.0,
        days=15,
        reserve_walk_forward_overhead_node_hours=150.0,
        reserve_walk_forward_best_protection=1.0,
        static_hindsight_overhead_node_hours=None,
        reserve_ratio=None,
        static_ratio=None,
        kept=True,
        short_days=0,
        few_events=True,
    )
    text = sentence(entry)
    # Every figure a day's (issue 63: no total beside a day's figure): 120 over 15 days is 8.0.
    assert text.startswith("asked 95%: kept 100.0% for 8.0 overhead node-hours a day (240 a month)")
    assert "would have needed 10.0 a day" in text
    assert "only 21 pod-minutes waited without headroom" in text
    entry = replace(entry, few_events=False, reactive_unserved_pod_minutes=2000.0)
    assert "waited without headroom" not in sentence(entry)
    assert PromiseEntry.from_dict(entry.to_dict()) == entry


def test_the_hindsight_line_says_a_day_as_the_lines_beside_it():
    """Issue 63: "absorbed 68.3% for 355.4 overhead node-hours" (a total) stood beside "... 53.7
    overhead node-hours a day"; on 7 scored days the line now says a day's figures."""
    from predictive_headroom.commands.tune import _hindsight_line

    hindsight = {
        "burst_quantile": 0.95,
        "scale_down_stabilization_seconds": 1800,
        "protection": 0.683,
        "overhead_node_hours": 355.4,
    }
    line = _hindsight_line(hindsight, {"replicas": 6, "overhead_node_hours": 70.0}, "90%", 7)
    assert "absorbed 68.3% for 50.8 overhead node-hours a day" in line
    assert (
        "static headroom at 90%: 10.0 overhead node-hours a day, read along its curve "
        "(the fewest reaching it: 6 placeholders)"
    ) in line
    assert "355.4" not in line
    assert "355.4 overhead node-hours in all" in _hindsight_line(hindsight, None, "90%", None)
