"""`forecast` and `plan --data` through the real entry point on a real series."""

import json
import logging
from pathlib import Path

import pytest

from predictive_headroom.cli import main

TAXI = (
    Path(__file__).resolve().parents[1] / "predictive_headroom" / "data" / "nab_nyc_taxi_30min.csv"
)

POLICY = """\
pools:
  - name: taxi
    target: {namespace: ns, name: taxi-placeholder}
    maxReplicas: 50
    leadTime: 1h
    forecast: {query: taxi, demandPerReplica: 1000, step: 30m, history: 21d}
  - name: plain
    target: {namespace: ns, name: plain-placeholder}
    maxReplicas: 5
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


@pytest.mark.slow
def test_forecast_json_has_model_peaks_accuracy_and_points(config, capsys):
    assert (
        main(
            [
                "forecast",
                "-c",
                config,
                "--data",
                str(TAXI),
                "--at",
                "2014-12-10T00:00:00Z",
                "-o",
                "json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    [pool] = out["pools"]  # only pools with a forecast section
    assert pool["name"] == "taxi" and pool["status"] == "ok" and pool["model"] == "prophet"
    assert pool["history_end"] <= "2014-12-10T00:00:00Z"  # --at cuts history: no peeking
    assert len(pool["points"]) == 48 * 2 + 1  # 48 h at 30 min
    # Next peaks are true local maxima: after now, highest within 6 h either side, never twice.
    peaks, points = pool["next_peaks"], pool["points"]
    assert 2 <= len(peaks) <= 4
    at = [p["at"] for p in peaks]
    assert at == sorted(at) and at[0] > "2014-12-10T00:00:00Z" and at[-1] < points[-1]["at"]
    index = {p["at"]: i for i, p in enumerate(points)}
    for peak in peaks:
        i = index[peak["at"]]
        around = [p["yhat"] for p in points[max(0, i - 12) : i + 13]]
        assert peak["yhat"] == pytest.approx(max(around), abs=1e-3)
    acc = pool["accuracy"]
    assert acc["points"] > 0 and 0 <= acc["coverage"] <= 1 and acc["mase"] > 0


@pytest.mark.slow
def test_plan_with_data_fills_the_forecast_component(config, capsys):
    # 10:00 UTC is 05:00 in New York: the morning rise is within the one-hour lead time.
    assert (
        main(
            [
                "plan",
                "-c",
                config,
                "--data",
                str(TAXI),
                "--at",
                "2014-12-10T10:00:00Z",
                "-o",
                "json",
            ]
        )
        == 0
    )
    taxi, plain = json.loads(capsys.readouterr().out)["pools"]
    assert taxi["components"]["forecast"] >= 1
    assert taxi["reason"] == "forecast"
    assert taxi["details"]["forecast_status"] == "ok" and taxi["details"]["ramp"] > 0
    assert plain["components"]["forecast"] is None and plain["reason"] == "min"


def test_forecast_needs_a_pool_with_a_forecast(config, capsys):
    assert main(["forecast", "-c", config, "--data", str(TAXI), "--pool", "plain"]) == 2
    assert "has a 'forecast' section" in capsys.readouterr().err


def test_forecast_with_missing_csv(config, capsys, tmp_path):
    assert main(["forecast", "-c", config, "--data", str(tmp_path / "none.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err


@pytest.mark.slow
def test_forecast_and_plan_against_a_real_prometheus(prometheus_server, tmp_path, capsys):
    from promfixture import DEMAND

    from predictive_headroom.commands import iso

    config = tmp_path / "policy.yaml"
    config.write_text(
        "pools:\n  - name: web\n    target: {namespace: ns, name: web-placeholder}\n    maxReplicas: 20\n"
        f"    forecast: {{query: '{DEMAND}', demandPerReplica: 5, history: 14d}}\n"
    )
    at = iso(prometheus_server.end)
    assert (
        main(
            [
                "forecast",
                "-c",
                str(config),
                "--prometheus-url",
                prometheus_server.url,
                "--at",
                at,
                "--no-accuracy",
                "-o",
                "json",
            ]
        )
        == 0
    )
    [pool] = json.loads(capsys.readouterr().out)["pools"]
    assert pool["status"] == "ok" and pool["model"] == "prophet"
    assert pool["history_points"] == 14 * 288 + 1  # 14 days at 5 minutes, both ends included
    assert pool["history_end"] == at
    assert (
        main(
            [
                "plan",
                "-c",
                str(config),
                "--prometheus-url",
                prometheus_server.url,
                "--at",
                at,
                "-o",
                "json",
            ]
        )
        == 0
    )
    [plan] = json.loads(capsys.readouterr().out)["pools"]
    assert plan["details"]["forecast_status"] == "ok" and plan["components"]["forecast"] is not None


@pytest.mark.slow
def test_forecast_with_unreachable_prometheus_exits_2(config, capsys, caplog, monkeypatch):
    monkeypatch.setenv("PH_PROMETHEUS_RETRIES", "2")
    with caplog.at_level(logging.DEBUG):
        assert (
            main(
                [
                    "forecast",
                    "-c",
                    config,
                    "--prometheus-url",
                    "http://127.0.0.1:9",
                    "--at",
                    "2026-11-20T00:00:00Z",
                ]
            )
            == 2
        )
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err
    # Each retried attempt is said once, in our words, at WARNING; urllib3's own lines are gone.
    retries = [
        r.getMessage()
        for r in caplog.records
        if "attempt" in r.getMessage() and r.levelno == logging.WARNING
    ]
    assert retries == [
        "Prometheus at http://127.0.0.1:9: attempt 1 of 3 failed (Connection refused); retrying",
        "Prometheus at http://127.0.0.1:9: attempt 2 of 3 failed (Connection refused); retrying in 1.0s",
    ]
    assert "Retrying (Retry(" not in caplog.text + err
    assert "after 3 attempt(s)" in err
    # The failure itself is said once: as the CLI's error, not also as an ERROR log line.
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [] and err.count("Connection refused after 3 attempt(s)") == 1, (errors, err)
