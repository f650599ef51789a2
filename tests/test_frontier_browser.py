"""The backtest page's frontier with the user's fixed N: both curves (static headroom and the promise
walked forward), the N as a point of the static curve, every name in the legend and no label
over another or over a line; drawn by matplotlib and opened in real headless Chromium."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from browser_cdp import chromium_available, visit
from page_layout import chart, label_clashes, labels_on_lines
from test_backtest import DAY, SeasonalNaiveForecaster, series

from predictive_headroom.backtest.against_fixed import current, replays
from predictive_headroom.backtest.frontier_plot import CURRENT_COLOUR, frontier_figure
from predictive_headroom.backtest.page import page_html
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.replay.promise import PROMISE_QUANTILES
from predictive_headroom.replay.setup import WhatIf

POLICY = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 200
    leadTime: 4m
    protection: 90%
    forecast: {query: demand, demandPerReplica: 5, history: 9d}
"""


@pytest.fixture(scope="module")
def result():
    """A backtest of 12 days (6 scored) with the promise at 90% and 95% and the user's N read
    against it, as `backtest --protection 90%,95% --current N` makes it."""
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=6 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0, 1800.0),
        protections=(0.9, 0.95),
        burst_view=False,
    )
    pool = parse_policy(POLICY, "t").pools[0]
    res = run_backtest(series(12, seed=3), pool, settings, forecaster=SeasonalNaiveForecaster())
    r = replays(res, (0.9, 0.95))
    n = next(n for n, _ in res.static_curve if n >= 3)  # on the static curve
    return replace(res, current=[current(r, n).to_dict()])


def test_the_users_n_is_a_point_of_the_static_curve_on_the_chart(result):
    data = result.to_dict()
    days = data["settings"]["scored_minutes"] / 1440
    fig = frontier_figure(data["frontier"], data["promise"], data["current"], days)
    ax = fig.axes[0]
    mine = data["current"][0]
    star = next(
        c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], _rgb(CURRENT_COLOUR))
    )
    x, y = star.get_offsets()[0]
    static = {pt["label"]: pt for pt in data["frontier"]["families"]["static"]}[
        f"N={mine['replicas']}"
    ]
    assert x == pytest.approx(100 * static["protection"], abs=0.01)
    assert y == pytest.approx(static["overhead_node_hours"], rel=0.01)
    lo, hi = ax.get_xlim()
    assert lo <= x <= hi  # a low protection widens the axis rather than falling off it
    promise = next(line for line in ax.lines if line.get_label().startswith("protection: walk"))
    kept = sorted(100 * e["realized_protection"] for e in data["promise"])
    assert list(promise.get_xdata()) == pytest.approx(kept)


def _rgb(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.lstrip("#")
    return tuple(int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


@pytest.mark.browser
@pytest.mark.skipif(
    not chromium_available(),
    reason="needs Debian chromium at /usr/bin/chromium (`make test` installs it)",
)
def test_the_frontier_names_both_curves_and_your_n_without_a_label_over_anything(result, tmp_path):
    (tmp_path / "backtest.html").write_text(page_html(result))
    seen = visit(
        (tmp_path / "backtest.html").as_uri(),
        tmp_path / "profile",
        probes={"frontier": chart("#frontier-plot svg")},
    )
    frontier = seen.probes["frontier"]
    legend = [t["text"] for t in frontier["texts"] if t["kind"] == "legend"]
    mine = result.current[0]
    assert "static" in legend
    assert "protection: walk-forward (asked 90%, 95%)" in legend
    assert any(t.startswith(f"your fixed {mine['replicas']}: ") for t in legend)
    assert label_clashes(frontier) == [] and labels_on_lines(frontier) == []
    assert seen.console_errors == []
