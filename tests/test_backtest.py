"""The backtest: strategies, walk-forward without peeking, the yardstick and the CLI contract."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from predictive_headroom.backtest.results import BacktestSettings, headline
from predictive_headroom.backtest.run import run_backtest, static_curve
from predictive_headroom.backtest.text import format_table
from predictive_headroom.cli import main
from predictive_headroom.core.series import History
from predictive_headroom.forecast.naive import seasonal_naive
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.replay.simulator import ClusterSpec

START = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
DAY = 86_400.0


def series(days: float, step: float = 300.0, seed: int = 0) -> History:
    """Daily-shaped demand (median about 100) with occasional bursts."""
    rng = np.random.default_rng(seed)
    t = START + step * np.arange(int(days * DAY / step))
    daily = 100 + 60 * np.sin(2 * np.pi * (t % DAY) / DAY)
    bursts = rng.gamma(1.0, 25.0, t.size) * (rng.random(t.size) < 0.04)
    return History(t, daily + rng.normal(0, 3, t.size) + bursts, "synthetic")


class SeasonalNaiveForecaster:
    """A fast forecaster for tests: the package's seasonal-naive rule with its burst profile."""

    def fit(self, history, spec, settings, now):
        return seasonal_naive(history, spec, now, settings)


POOL = Pool.model_validate(
    {
        "name": "web",
        "target": {"namespace": "ns", "name": "ph"},
        "maxReplicas": 50,
        "leadTime": "4m",
        "schedules": [
            {"name": "day", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 2}
        ],
        "proportional": {"linear": {"nodesPerReplica": 4}},
        "forecast": {"query": "q", "demandPerReplica": 5},
    }
)
FAST = BacktestSettings(replay=WhatIf(warmup_seconds=3 * DAY), refit_every_seconds=DAY)


def fast_run(history: History, pool: Pool | None = POOL, settings: BacktestSettings = FAST):
    return run_backtest(history, pool, settings, forecaster=SeasonalNaiveForecaster())


@pytest.mark.slow
def test_every_strategy_is_scored_and_the_yardstick_is_sane():
    result = fast_run(series(6))
    s = result.strategies
    assert set(s) == {"reactive", "proportional", "schedule", "forecast", "naive", "oracle"}
    assert s["reactive"].metrics.unserved_pod_minutes > 0
    assert s["reactive"].x == pytest.approx(1.0)
    assert s["oracle"].metrics.unserved_pod_minutes == 0
    assert s["forecast"].metrics.unserved_pod_minutes < s["reactive"].metrics.unserved_pod_minutes
    assert all(v.overhead_node_hours >= 0 for k, v in s.items() if k != "reactive")
    unserved = [m.unserved_pod_minutes for _, m in result.static_curve]
    assert [n for n, _ in result.static_curve] == list(range(len(unserved)))
    assert all(b <= a for a, b in itertools.pairwise(unserved)) and unserved[-1] < unserved[0]
    assert "forecast leaves" in headline(result)
    assert "oracle" in format_table(result)


def test_static_curve_goes_past_flat_steps_until_a_node_is_added():
    # 4 pods jump to 16: placeholders 1-4 still fit on the first node and change nothing; the
    # 5th adds a node and serves the jump. Ending at the first flat step would miss that.
    pods = np.array([4] * 30 + [16] * 30)
    curve = static_curve(
        pods, ClusterSpec(node_slots=8, lag_minutes=3, scale_down_minutes=10), 0, 50
    )
    assert [(n, m.unserved_pod_minutes) for n, m in curve] == [
        (0, 24),
        (1, 24),
        (2, 24),
        (3, 24),
        (4, 24),
        (5, 0),
    ]


class CountingForecaster(SeasonalNaiveForecaster):
    def __init__(self):
        self.fits = 0

    def fit(self, history, spec, settings, now):
        self.fits += 1
        return super().fit(history, spec, settings, now)


@pytest.mark.slow
def test_the_dial_replays_each_quantile_from_the_same_refits():
    counting = CountingForecaster()
    result = run_backtest(
        series(6),
        POOL,
        BacktestSettings(replay=WhatIf(warmup_seconds=3 * DAY), dial=(0.5, 0.95, 0.995)),
        forecaster=counting,
    )
    assert counting.fits == result.settings.refits == 3
    assert [p.quantile for p in result.dial] == [0.5, 0.95, 0.995]
    # The pool's own quantile (0.95) replays exactly as the forecast and naive strategies do.
    at_pool = result.dial[1]
    assert at_pool.forecast.metrics == result.strategies["forecast"].metrics
    assert at_pool.naive.metrics == result.strategies["naive"].metrics
    # A higher quantile holds more placeholders and leaves less unserved demand.
    for name in ("forecast", "naive"):
        low, high = (getattr(result.dial[k], name) for k in (0, 2))
        assert high.run.placeholders.mean() > low.run.placeholders.mean()
        assert high.metrics.unserved_pod_minutes < low.metrics.unserved_pod_minutes
    assert [p["quantile"] for p in result.to_dict()["dial"]] == [0.5, 0.95, 0.995]


@pytest.mark.slow
def test_without_a_dial_the_json_has_no_dial():
    data = fast_run(series(6)).to_dict()
    assert "dial" not in data and "stabilization_dial" not in data


@pytest.mark.slow
def test_the_stabilization_dial_replays_each_window_from_the_same_refits():
    counting = CountingForecaster()
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=3 * DAY), stabilization_dial=(1800.0, 0.0, 300.0, 300.0)
    )
    result = run_backtest(series(6), POOL, settings, forecaster=counting)
    assert counting.fits == result.settings.refits == 3
    assert [w.stabilization_seconds for w in result.stabilization_dial] == [0.0, 300.0, 1800.0]
    # The pool's own window (30m) replays exactly as the forecast and naive strategies do.
    own = result.stabilization_dial[2]
    assert result.settings.scale_down_stabilization_seconds == 1800.0
    assert own.forecast.metrics == result.strategies["forecast"].metrics
    assert own.naive.metrics == result.strategies["naive"].metrics
    # A longer window holds at least as many placeholders every minute (the max over more plans).
    for name in ("forecast", "naive"):
        held = [getattr(w, name).run.placeholders for w in result.stabilization_dial]
        assert all(np.all(longer >= shorter) for shorter, longer in itertools.pairwise(held))
        assert held[2].sum() > held[0].sum()
    assert [w["stabilization_seconds"] for w in result.to_dict()["stabilization_dial"]] == [
        0.0,
        300.0,
        1800.0,
    ]


@pytest.mark.slow
def test_only_the_period_after_warmup_is_scored():
    result = fast_run(series(6))
    assert result.settings.scored_minutes == pytest.approx(3 * 1440, abs=5)
    assert result.settings.scored_from == pytest.approx(START + 3 * DAY)


@pytest.fixture(scope="module")
def before_and_after_change():
    """Two runs whose data differ only after `cut`, a sample time in the scored period."""
    history = series(6)
    cut = float(history.times[int(4.5 * DAY / 300)])
    changed = history.values.copy()
    later = history.times > cut
    changed[later] = changed[later] * 3 + 200
    return cut, fast_run(history), fast_run(History(history.times, changed, history.source))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["reactive", "proportional", "schedule", "forecast", "naive"])
def test_no_strategy_sees_the_future(before_and_after_change, strategy):
    cut, a, b = before_and_after_change
    upto = int(np.searchsorted(a.times, cut, side="right"))
    pa, pb = a.strategies[strategy].run.placeholders, b.strategies[strategy].run.placeholders
    assert pa[:upto].tolist() == pb[:upto].tolist()
    if strategy in ("forecast", "naive"):
        assert pa[upto:].tolist() != pb[upto:].tolist()  # the change is visible once known


@pytest.mark.slow
def test_demand_per_replica_is_chosen_for_about_twenty_pods():
    result = fast_run(series(6), pool=None)
    assert result.settings.demand_per_replica_source.startswith("auto")
    assert 17 <= result.settings.median_app_pods <= 23


def test_too_short_series_says_how_long_it_is_and_what_is_needed():
    with pytest.raises(ValueError, match=r"spans 3\.0 days.*warm-up \(3 days\).*4 days"):
        fast_run(series(3))


def write_csv(path: Path, history: History) -> Path:
    rows = [
        f"{datetime.fromtimestamp(t, tz=UTC).strftime('%Y-%m-%dT%H:%M:%SZ')},{v:.3f}"
        for t, v in zip(history.times, history.values, strict=False)
    ]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_cli_json_shape_and_page_with_prophet(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(9, seed=2))
    out = tmp_path / "page"
    code = main(
        [
            "backtest",
            "--data",
            str(csv),
            "--warmup",
            "7d",
            "--output",
            "json",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {
        "strategies",
        "static_curve",
        "settings",
        "headline",
        "burst",
    }  # burst: Prophet carries the burst model
    assert set(data["strategies"]) == {
        "reactive",
        "proportional",
        "schedule",
        "forecast",
        "naive",
        "oracle",
    }
    for body in data["strategies"].values():
        assert {
            "unserved_pod_minutes",
            "node_hours",
            "cold_starts",
            "overhead_node_hours",
            "x",
        } <= set(body)
    assert set(data["static_curve"][0]) == {
        "replicas",
        "unserved_pod_minutes",
        "node_hours",
        "cold_starts",
    }
    assert data["settings"]["refits"] == 2 and data["settings"]["models"] == {"prophet": 2}
    assert "forecast leaves" in data["headline"]["text"]
    burst = data["burst"]
    assert burst["quantile"] == 0.95 and burst["model"] == "quantile" and len(burst["times"]) == 288
    assert (
        len(burst["allowance"]) == len(burst["demand"]) == 288 and max(burst["allowance"]) > 0
    )  # below 0: less than the ramp
    assert (
        data["settings"]["burst_model"] == "quantile"
        and data["settings"]["observation_delay_seconds"] == 60
    )
    page = (out / "backtest.html").read_text()
    assert 'aria-label="unserved pod-minutes against node-hours"' in page and "oracle" in page
    assert burst["importance"][0]["feature"] in page
    assert (out / "backtest.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_cli_dial_prints_the_sweep_table_and_page_section(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(5, seed=3))
    out = tmp_path / "page"
    args = [
        "backtest",
        "--data",
        str(csv),
        "--warmup",
        "3d",
        "--quiet",
        "--dial",
        "0.99,0.8,0.8",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    dial = text[text.index("burst quantile dial") :]
    assert re.search(r"^\s+0\.8\s+\d+", dial, re.M) and re.search(r"^\s+0\.99\s+\d+", dial, re.M)
    assert 'id="dial"' in (out / "backtest.html").read_text()


@pytest.mark.slow
def test_cli_stabilization_dial_prints_the_window_table_and_page_section(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(5, seed=3))
    out = tmp_path / "page"
    args = [
        "backtest",
        "--data",
        str(csv),
        "--warmup",
        "3d",
        "--quiet",
        "--stabilization-dial",
        "30m,5m",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    table = text[text.index("scale-down stabilisation dial") :]
    assert re.search(r"^\s+5m\s+\d+", table, re.M) and re.search(r"^\s+30m\s+\d+", table, re.M)
    assert 'id="stabilization-dial"' in (out / "backtest.html").read_text()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--quantile", "0"], "--quantile must be between 0 and 1"),
        (["--quantile", "95"], "--quantile: 95 is not a quantile: did you mean 95%?"),
        (["--dial", "0.8,abc"], "'abc' is not a number"),
        (["--dial", "0.8,1"], "quantile 1 must be between 0 and 1"),
        (["--stabilization-dial", "5m,soon"], "--stabilization-dial: 'soon' is not a duration"),
        (
            ["--node-slots", "0", "--demand-per-replica", "-1"],
            "--demand-per-replica must be positive.*--node-slots",
        ),
        (["--pool", "web"], "--pool needs --config"),
        (["--warmup", "30d"], r"spans 4\.0 days.*31 days"),
    ],
)
def test_cli_bad_input_exits_2_saying_what(tmp_path, capsys, extra, message):
    csv = write_csv(tmp_path / "demand.csv", series(4))
    assert main(["backtest", "--data", str(csv), "--quiet", *extra]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_cli_missing_csv_exits_2(tmp_path, capsys):
    assert main(["backtest", "--data", str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv" in capsys.readouterr().err


@pytest.mark.slow
def test_interruptions_report_what_each_strategy_leaves_waiting_and_the_component_cuts_it():
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=3 * DAY),
        refit_every_seconds=DAY,
        interruption_rate=2.0 / 24,  # 200%/day: plenty of interruptions in three scored days
        seed=1,
        burst_view=False,
    )
    pool = POOL.model_copy(update={"proportional": None, "schedules": []})
    result = fast_run(series(6), pool, settings)
    rows = {row.name: row for row in result.interruptions.rows}
    assert rows["reactive"].interruptions >= 5
    # every row saw the same interruptions where the cluster had the same nodes; the calm run of
    # each strategy is the table's
    assert rows["forecast"].calm == result.strategies["forecast"].metrics
    assert rows["disruption only"].calm == result.strategies["reactive"].metrics
    # the component alone cuts what reactive leaves waiting, and the forecast with it leaves less
    # than without it
    assert rows["disruption only"].change < rows["reactive"].change
    assert rows["forecast"].change <= rows["forecast without disruption"].change
    data = result.to_dict()["interruptions"]
    assert data["rate_per_node_day"] == pytest.approx(2.0)
    assert data["notice_seconds"] == 120 and data["seed"] == 1
    assert {"waiting_change_with_interruptions", "node_hours_change"} <= set(data["strategies"][0])


def test_cli_interruptions_flag_prints_the_table_and_rejects_a_bad_rate(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(5))
    assert main(["backtest", "--data", str(csv), "--quiet", "--interruptions", "often"]) == 2
    assert "--interruptions: 'often' is not an interruption rate" in capsys.readouterr().err
