"""Cost at equal protection: reading a family's curve, the grid of settings, walk-forward tuning."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from test_backtest import DAY, POOL, SeasonalNaiveForecaster, series, write_csv

from predictive_headroom.backtest.frontier import Point, cost_at, protection, protection_at
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.cli import main
from predictive_headroom.policy.shares import parse_protections
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.replay.simulator import ClusterSpec, score, simulate
from predictive_headroom.replay.tuning import (
    GridRun,
    Setting,
    Walk,
    choose,
    tune_walk_forward,
)

# A static-like curve: reactive leaves 1000 unserved pod-minutes.
CURVE = [Point(0, 1000, "N=0"), Point(10, 400, "N=1"), Point(20, 100, "N=2"), Point(30, 0, "N=3")]


@pytest.mark.parametrize(
    ("p", "cost", "between"),
    [
        (0.6, 10.0, ("N=1",)),  # exactly a point
        (0.75, 15.0, ("N=1", "N=2")),  # halfway between 60% and 90%
        (0.95, 25.0, ("N=2", "N=3")),
        (1.0, 30.0, ("N=3",)),
    ],
)
def test_cost_is_read_along_the_curve_between_neighbours(p, cost, between):
    reading = cost_at(CURVE, 1000, p)
    assert reading.cost == pytest.approx(cost)
    assert reading.between[-1] == between[-1] and reading.reached == 1.0


def test_a_dominated_point_is_not_a_neighbour_and_an_unreached_protection_says_the_best():
    points = [Point(5, 500, "a"), Point(8, 700, "dominated"), Point(12, 200, "b")]
    reading = cost_at(points, 1000, 0.6)
    assert reading.between == ("a", "b") and reading.cost == pytest.approx(5 + 7 * (0.1 / 0.3))
    short = cost_at(points, 1000, 0.9)
    assert short.cost is None and short.reached == pytest.approx(0.8)


def test_no_headroom_is_a_point_of_every_family_and_ties_go_to_cost():
    # Below its cheapest point a family is read from no headroom (cost 0, protection 0), as
    # `protection_at` reads it: the two readings are one line (`core.curve`).
    family = [Point(40, 0, "q=0.99"), Point(20, 50, "q=0.5")]
    reading = cost_at(family, 1000, 0.5)
    assert reading.cost == pytest.approx(20 * 0.5 / 0.95)
    assert reading.between == ("no headroom", "q=0.5")
    for p in (0.1, 0.5, 0.95, 0.97, 1.0):
        assert protection_at(family, 1000, cost_at(family, 1000, p).cost) == pytest.approx(p)
    # Reactive leaves nothing unserved: every point protects fully, the cheapest wins.
    tie = cost_at([Point(3, 0, "N=1"), Point(0, 0, "N=0")], 0, 0.95)
    assert tie.cost == 0 and protection(0, 0) == 1.0


def test_choose_takes_the_cheapest_reaching_the_target_else_the_most_protective():
    a, b, c = Setting(0.5, 300), Setting(0.9, 300), Setting(0.99, 1800)
    cands = [(a, 10.0, 300.0), (b, 20.0, 80.0), (c, 50.0, 10.0)]
    assert choose(cands, 1000, 0.9) == (b, pytest.approx(0.92))
    assert choose(cands, 1000, 0.995) == (c, pytest.approx(0.99))
    assert choose(cands, 0, 0.95)[0] == a  # nothing to protect: cost decides


def _grid(pods, cluster, rng, size):
    grid = []
    for k, setting in enumerate((Setting(0.5, 300), Setting(0.9, 300), Setting(0.99, 1800))):
        p = rng.poisson(1 + 3 * k, size)
        run = simulate(pods, p, cluster)
        grid.append(GridRun("forecast", setting, run, score(run)))
    return grid


def test_walk_forward_tuning_chooses_each_day_only_from_the_days_before():
    rng = np.random.default_rng(1)
    size = 6 * 1440
    cluster = ClusterSpec()
    pods = rng.poisson(20, size) + 30 * (rng.random(size) < 0.01)
    grid = _grid(pods, cluster, rng, size)
    reactive = simulate(pods, np.zeros(size, dtype=np.int64), cluster)
    default = Setting(0.99, 1800)

    def tune(pods, grid, reactive):
        walk = Walk.daily(pods, cluster, 1440, known_lag=2, max_replicas=1000)
        return tune_walk_forward(grid, "forecast", 0.5, reactive, walk, default)

    before = tune(pods, grid, reactive)
    assert before.choices[0] == default and before.reached_in_past[0] is None
    assert len(set(before.choices)) > 1
    # Change the data and every run from 2 minutes before day 3 (index 2 of the periods) on.
    cut = before.period_starts[2] - 2
    later = pods.copy()
    later[cut:] = later[cut:] * 3
    changed = []
    for g in grid:
        p = g.run.placeholders.copy()
        p[cut:] = 0
        run = simulate(later, p, cluster)
        changed.append(GridRun(g.family, g.setting, run, score(run)))
    after = tune(later, changed, simulate(later, np.zeros(size, dtype=np.int64), cluster))
    assert after.choices[:3] == before.choices[:3]
    assert (
        after.choices[3:] != before.choices[3:]
        or after.reached_in_past[3:] != (before.reached_in_past[3:])
    )


def run_grid(pool, settings):
    return run_backtest(series(6), pool, settings, forecaster=SeasonalNaiveForecaster())


@pytest.mark.slow
@pytest.mark.parametrize("pool", [None, POOL], ids=["no-rule: stabilised once", "rule: replayed"])
def test_the_grid_holds_the_pools_own_setting_as_the_strategy_replays_it(pool):
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=3 * DAY),
        dial=(0.5, 0.95),
        stabilization_dial=(300.0, 1800.0),
        grid=True,
    )
    result = run_grid(pool, settings)
    own = {g.family: g.metrics for g in result.grid if g.setting == Setting(0.95, 1800.0)}
    assert own["forecast"] == result.strategies["forecast"].metrics
    assert own["naive"] == result.strategies["naive"].metrics
    assert len(result.grid) == 2 * 2 * 2
    assert [p.forecast.metrics for p in result.dial][1] == own["forecast"]


def test_parse_protections():
    assert parse_protections("95%,0.9,90%") == (0.9, 0.95)
    with pytest.raises(ValueError, match="at most 100%"):
        parse_protections("120%")
    with pytest.raises(ValueError, match="like 95%"):
        parse_protections("lots")


@pytest.mark.slow
def test_cli_protection_prints_each_familys_cost_and_the_json_and_page_carry_it(tmp_path, capsys):
    csv = write_csv(tmp_path / "demand.csv", series(6, seed=3))
    out = tmp_path / "page"
    common = ["backtest", "--data", str(csv), "--warmup", "3d", "--quiet"]
    grid = ["--protection", "50%,90%", "--dial", "0.5,0.95", "--stabilization-dial", "5m,30m"]
    assert main([*common, *grid, "--out", str(out), "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["frontier"]
    assert [a["protection"] for a in data["at"]] == [0.5, 0.9]
    for at in data["at"]:  # a family either reaches the protection or says how far it got
        for family, cost in at["cost"].items():
            assert (cost is not None) == (at["reached"][family] >= at["protection"])
    at = data["at"][0]
    assert set(at["cost"]) >= {"static", "forecast tuned", "naive tuned", "oracle", "proportional"}
    static = at["cost"]["static"]
    assert static is not None and static > 0
    assert at["ratios"]["static/forecast"] == pytest.approx(
        static / at["cost"]["forecast tuned"], rel=1e-3
    )
    assert at["chosen"]["quantile"] in (0.5, 0.95)
    page = (out / "backtest.html").read_text()
    assert 'id="frontier"' in page and 'id="frontier-plot"' in page


def test_format_frontier_prints_a_row_per_protection_and_says_when_one_is_not_reached():
    from predictive_headroom.backtest.text import format_frontier

    frontier = {
        "families": {"static": [], "forecast tuned": [], "oracle": []},
        "at": [
            {
                "protection": p,
                "cost": {"static": 100.0 * p, "forecast tuned": cost, "oracle": 5.0},
                "ratios": {
                    "static/forecast": None if cost is None else 100 * p / cost,
                    "naive/forecast": None,
                    "forecast/oracle": None if cost is None else cost / 5,
                },
                "chosen": {"label": "q=0.9 w=5m"},
            }
            for p, cost in ((0.9, 45.0), (0.95, None))
        ],
    }
    text = format_frontier(frontier)
    assert re.search(
        r"^\s+90%\s+90\.0\s+45\.0\s+5\.0\s+2\.00\s+-\s+9\.00\s+q=0\.9 w=5m$", text, re.M
    )
    assert re.search(r"^\s+95%\s+95\.0\s+not reached\s+5\.0\s+-", text, re.M)
