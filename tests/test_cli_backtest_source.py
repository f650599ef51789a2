"""`backtest` reads history from Prometheus as `tune`, `forecast` and `report` do, and keeps the
history it replayed (`--save-csv`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from promfixture import DEMAND, DEMAND_DATASET

from predictive_headroom.cli import main
from predictive_headroom.commands import iso
from predictive_headroom.sources.csvsource import read_csv_history

DAY = 86_400.0


@pytest.mark.prometheus
def test_backtest_reads_a_query_from_prometheus_and_saves_what_it_replayed(
    prometheus_server, tmp_path, capsys
):
    saved = tmp_path / "replayed.csv"
    argv = [
        "backtest",
        "--prometheus-url",
        prometheus_server.url,
        "--query",
        DEMAND,
        "--history",
        "9d",  # read through the source the other commands use (longer spans in pieces)
        "--at",
        iso(prometheus_server.end),
        "--warmup",
        "7d",
        "--refit-every",
        "2d",
        "--save-csv",
        str(saved),
        "--quiet",
        "-o",
        "json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    kept = read_csv_history(saved)
    full = read_csv_history(DEMAND_DATASET)
    shifted = full.times - full.times[-1] + prometheus_server.end
    wanted = shifted >= prometheus_server.end - 9 * DAY
    assert len(kept) == 9 * 288 + 1
    np.testing.assert_array_equal(kept.times, shifted[wanted])
    np.testing.assert_array_equal(kept.values, full.values[wanted])
    assert result["settings"]["points"] == len(kept)
    assert (
        result["settings"]["data"].startswith("prometheus ")
        and DEMAND in result["settings"]["data"]
    )


@pytest.mark.prometheus
def test_backtest_takes_the_pools_query_from_the_policy(prometheus_server, tmp_path, capsys):
    config = tmp_path / "policy.yaml"
    config.write_text(
        "pools:\n  - name: web\n    target: {namespace: ns, name: web-placeholder}\n"
        f"    maxReplicas: 20\n    forecast: {{query: '{DEMAND}', demandPerReplica: 5}}\n"
    )
    argv = ["backtest", "--prometheus-url", prometheus_server.url, "--config", str(config)]
    argv += ["--history", "9d", "--warmup", "7d", "--refit-every", "2d", "--quiet", "-o", "json"]
    # Up to the fixture's last sample, not now: on a busy machine "now" passes a 5-minute step
    # between the fixture's start and this test, and the last point would be missing.
    argv += ["--at", iso(prometheus_server.end)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert DEMAND in result["settings"]["data"] and result["settings"]["pool"] == "web"
    assert result["settings"]["points"] == 9 * 288 + 1


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "--prometheus-url needs the series to replay: pass --query PROMQL"),
        (["--query", "sum(rate(x[5m])"], "--query: "),
        (["--query", "up", "--history", "12h"], "--history must be at least 1d"),
    ],
)
def test_backtest_from_prometheus_says_what_is_missing(extra, message, capsys):
    argv = ["backtest", "--prometheus-url", "http://127.0.0.1:9", *extra, "--quiet"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_prometheus_only_flags_with_data_are_refused(tmp_path, capsys):
    argv = ["backtest", "--data", str(tmp_path / "x.csv"), "--query", "up"]
    assert main(argv) == 2
    assert "--query reads from Prometheus: use it with --prometheus-url" in capsys.readouterr().err


@pytest.mark.prometheus
def test_the_daemons_view_after_backtest_query_reads_the_series_replayed(prometheus_server):
    """`backtest --query Q --config F` ends with what the daemon would hold for the pool
    (`app.review.daemon_now`), reading Q (`OneQuery`) over the span and at the step of the pool's
    forecast section, not the pool's own query; without copying the pool to swap its query."""
    from predictive_headroom.policy.config import ForecastSpec
    from predictive_headroom.policy.settings import Settings
    from predictive_headroom.sources.prometheus import OneQuery, from_settings

    source = from_settings(Settings(), prometheus_server.url)
    assert source is not None
    end = prometheus_server.end
    pools = ForecastSpec.model_validate(
        {"query": "vector(7)", "demandPerReplica": 1, "history": "2d", "step": "10m"}
    )
    read = OneQuery(source, DEMAND)
    replayed = source.series(DEMAND, 600.0, 2 * DAY, end)
    own = source.history(pools, end)
    got = read.history(pools, end)
    np.testing.assert_array_equal(got.times, replayed.times)
    np.testing.assert_array_equal(got.values, replayed.values)
    assert len(got) == 2 * 144 + 1 and not np.array_equal(got.values, own.values)
    recent = read.recent(pools, end, 3600.0)
    np.testing.assert_array_equal(recent.values, replayed.values[-7:])
