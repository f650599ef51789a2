"""`tune`: the cheapest setting reaching a protection target, on a CSV and on a real Prometheus."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series, write_csv

from predictive_headroom.backtest.frontier import protection
from predictive_headroom.backtest.recommend import recommend
from predictive_headroom.backtest.run import BacktestSettings, run_backtest
from predictive_headroom.cli import main
from predictive_headroom.commands.tune import print_recommendation
from predictive_headroom.policy.load import parse_policy

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


def config(tmp_path, protection="90%", query="demand", history="28d"):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(protection=protection, query=query, history=history))
    return str(path)


def check(out, target):
    """What every recommendation promises."""
    chosen = out["chosen"]
    assert out["protection_target"] == target
    assert out["status"] != "unreachable"
    assert chosen["protection"] >= target or out["status"] != "forecast"
    assert all(
        r["overhead_node_hours"] >= chosen["overhead_node_hours"] and r["protection"] >= target
        for r in out["runner_ups"]
    )
    assert chosen["burst_quantile"] in (0.5, 0.95)
    assert chosen["scale_down_stabilization_seconds"] in (300.0, 1800.0)
    if out["status"] == "forecast":
        assert out["yaml"] == [
            f"scaleDownStabilization: {chosen['scale_down_stabilization_seconds'] / 60:g}m",
            "forecast:",
            f"  burstQuantile: {chosen['burst_quantile']:g}",
        ]
    elif out["status"] == "static-cheaper":
        assert out["yaml"] == [f"minReplicas: {out['static']['replicas']}"]
        assert out["static"]["protection"] >= target
        forecast = out["walk_forward"]["cost_at_target"]
        assert forecast is None or out["static"]["overhead_node_hours"] < forecast


def test_tune_on_a_csv_recommends_yaml_and_prints_it_in_words(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(9, seed=5))
    code = main(["tune", "-c", config(tmp_path), "--data", str(csv), *GRID, "-o", "json", "-q"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    check(out, 0.9)
    assert out["history"]["refits"] == 2  # 9 days: 7 of warm-up, refitted daily on the 2 after
    print_recommendation(out)
    text = capsys.readouterr().out
    assert "absorb at least 90% of the pod-minutes that would otherwise wait for a node" in text
    for line in out["yaml"]:
        assert f"\n  {line}\n" in text
    assert "static" in text and "oracle" in text
    if out["status"] == "static-cheaper":
        assert "static headroom" in text and "recommended instead" in text


def test_tune_against_a_real_prometheus(prometheus_server, tmp_path, capsys):
    from promfixture import DEMAND

    from predictive_headroom.commands import iso

    path = config(tmp_path, protection="95%", query=DEMAND, history="9d")
    at = iso(prometheus_server.end)
    args = ["tune", "-c", path, "--prometheus-url", prometheus_server.url, "--at", at, *GRID]
    assert main([*args, "-o", "json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    check(out, 0.95)
    assert (
        out["history"]["to"] == at and out["history"]["refits"] == 3
    )  # 9 days + the newest sample


def test_too_little_history_says_how_much_is_needed(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(5))
    assert main(["tune", "-c", config(tmp_path), "--data", str(csv), "-q"]) == 2
    err = capsys.readouterr().err
    assert "too little history to tune" in err and "spans 5.0 days" in err


def test_an_unreachable_target_says_the_best_reached(capsys):
    pool = parse_policy(POLICY.format(protection="90%", query="q", history="28d"), "t").pools[0]
    settings = BacktestSettings(
        warmup_seconds=3 * DAY, dial=(0.3,), stabilization_dial=(60.0,), protections=(1.0,)
    )
    result = run_backtest(series(6, seed=2), pool, settings, forecaster=SeasonalNaiveForecaster())
    reactive = result.strategies["reactive"].metrics.unserved_pod_minutes
    best = max(
        protection(g.metrics.unserved_pod_minutes, reactive)
        for g in result.grid
        if g.family == "forecast"
    )
    assert best < 1.0
    out = recommend(result, pool, 1.0)
    assert out["chosen"]["protection"] == pytest.approx(best, abs=1e-5)
    # Static headroom reaches it (its curve runs until nothing is unserved): recommended instead.
    assert out["status"] == "static-cheaper" and out["static"]["protection"] == 1.0
    out["seconds"] = 1.0
    print_recommendation(out)
    text = capsys.readouterr().out
    assert "static headroom reaches 100% where no forecast setting does" in text
    assert f"minReplicas: {out['static']['replicas']}" in text
    # A static curve that stopped short (a plateau) and nothing else reaching it: unreachable.
    result = replace(
        result,
        static_curve=[(n, m) for n, m in result.static_curve if m.unserved_pod_minutes > 0],
    )
    out = recommend(result, pool, 1.0)
    assert out["status"] == "unreachable" and out["yaml"] == []
    out["seconds"] = 1.0
    print_recommendation(out)
    text = capsys.readouterr().out
    assert "no setting reaches 100% on this history: the best" in text
    assert f"reached {100 * best:.1f}%" in text
