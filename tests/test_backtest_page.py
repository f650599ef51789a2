"""The backtest page: the headline in plain words (both views, "Tie"), human units, real tables, self-contained."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from matplotlib.text import Text

from predictive_headroom.backtest.page import page_html, settings_rows
from predictive_headroom.backtest.plot import plot_figure
from predictive_headroom.backtest.results import (
    BacktestResult,
    DialPoint,
    ReplaySettings,
    StrategyResult,
    headline,
)
from predictive_headroom.pages.glossary import GLOSSARY
from predictive_headroom.replay.simulator import ClusterSpec, Metrics, Run

START = datetime(2014, 11, 24, tzinfo=UTC).timestamp()
# Static headroom: 0, 1, 2 placeholders at 10, 12, 14 node-hours; no headroom costs 10.
CURVE = ((100, 10.0), (40, 12.0), (0, 14.0))
SETTINGS = {
    "data": "taxi.csv",
    "points": 8640,
    "data_step_seconds": 1800.0,
    "pool": None,
    "max_replicas": 40,
    "demand_per_replica": 800.0,
    "demand_per_replica_source": "--demand-per-replica",
    "median_app_pods": 19.0,
    "node_slots": 8,
    "lag_seconds": 180,
    "scale_down_delay_seconds": 600,
    "hpa_hold_seconds": 300,
    "lead_seconds": 240.0,
    "quantile": 0.95,
    "scale_down_stabilization_seconds": 1800.0,
    "warmup_seconds": 14 * 86400.0,
    "scored_from": START,
    "scored_to": START + 28 * 86400.0 - 60,
    "scored_minutes": 28 * 1440,
    "refit_every_seconds": 86400.0,
    "refits": 28,
    "models": {"prophet": 28},
    "fit_seconds": 41.3,
    "cores_per_node": 8.0,
    "schedule_windows": "default: daytime 08:00-20:00 UTC, 3 replicas",
    "proportional_rule": "default: CPA linear nodesPerReplica 1 (one placeholder per node, always)",
}


def _strategy(result: BacktestResult, unserved: float, node_hours: float) -> StrategyResult:
    zeros = np.zeros(3)
    return StrategyResult(
        Metrics(unserved, node_hours, 0),
        Run(zeros, zeros, zeros),
        node_hours - 10.0,
        result.x_of(node_hours, unserved),
    )


def make_result(
    forecast: tuple[float, float], curve: tuple[tuple[float, float], ...] = CURVE
) -> BacktestResult:
    """A result whose forecast left `forecast` = (unserved pod-minutes, node-hours); the others are fixed."""
    static = [(n, Metrics(u, nh, 0)) for n, (u, nh) in enumerate(curve)]
    settings = ReplaySettings(**SETTINGS, burst_model="quantile", observation_delay_seconds=60.0)
    result = BacktestResult(
        {}, static, settings, START + 60 * np.arange(3), np.zeros(3), 0, ClusterSpec()
    )
    for name, (u, nh) in {
        "reactive": curve[0],
        "proportional": (70, 11.0),
        "schedule": (60, 11.5),
        "forecast": forecast,
        "naive": (30, 12.5),
        "oracle": (0, 10.2),
    }.items():
        result.strategies[name] = _strategy(result, u, nh)
    return result


@pytest.mark.parametrize(
    ("forecast", "curve", "expected"),
    [
        (
            (0, 12.5),
            ((50, 10.0), (0, 12.0), (0, 14.0)),
            (
                "Tie: at the same cost static headroom and the forecast both leave no demand unserved, so compare the cost to get there: "
                "to protect as well, static headroom needs 2.0 node-hours over no headroom, read along its curve (the fewest reaching it: 1 placeholder); the forecast spends 2.5 (125% of that)."
            ),
        ),
        (
            (10, 12.0),
            CURVE,
            (
                "At the same cost the forecast leaves 4.0x less unserved demand than static headroom (10 unserved pod-minutes against 40). "
                "To protect as well, static headroom needs 3.5 node-hours over no headroom, read along its curve (the fewest reaching it: 2 placeholders); the forecast spends 2.0 (57% of that)."
            ),
        ),
        (
            (80, 12.0),
            CURVE,
            (
                "At the same cost the forecast leaves 2.0x more unserved demand than static headroom (80 unserved pod-minutes against 40). "
                "To protect as well, static headroom needs 0.7 node-hours over no headroom, read along its curve (the fewest reaching it: 1 placeholder); the forecast spends 2.0 (300% of that)."
            ),
        ),
        (
            (41, 12.0),
            CURVE,
            (
                "At the same cost the forecast leaves about as much unserved demand as static headroom (41 unserved pod-minutes against 40). "
                "To protect as well, static headroom needs 2.0 node-hours over no headroom, read along its curve (the fewest reaching it: 1 placeholder); the forecast spends 2.0 (102% of that)."
            ),
        ),
        (
            (0, 12.0),
            CURVE,
            (
                "At the same cost the forecast leaves no demand unserved, where static headroom leaves 40 pod-minutes. "
                "To protect as well, static headroom needs 4.0 node-hours over no headroom, read along its curve (the fewest reaching it: 2 placeholders); the forecast spends 2.0 (50% of that)."
            ),
        ),
        (
            (5, 14.5),
            CURVE,
            (
                "At the same cost the forecast leaves 5 unserved pod-minutes, where static headroom leaves none. "
                "To protect as well, static headroom needs 3.8 node-hours over no headroom, read along its curve (the fewest reaching it: 2 placeholders); the forecast spends 4.5 (120% of that)."
            ),
        ),
        (
            (100, 11.0),
            CURVE,
            (
                "At the same cost the forecast leaves 1.4x more unserved demand than static headroom (100 unserved pod-minutes against 70). "
                "To protect as well, static headroom needs no placeholder at all; the forecast spends 1.0 node-hours over no headroom."
            ),
        ),
        (
            (10, 13.0),
            CURVE[:2],
            (
                "At the same cost the forecast leaves 4.0x less unserved demand than static headroom (10 unserved pod-minutes against 40). "
                "To protect as well, static headroom would need more than 1 placeholder; the forecast spends 3.0 node-hours over no headroom."
            ),
        ),
    ],
    ids=[
        "tie",
        "wins",
        "loses",
        "about-equal",
        "none-unserved",
        "static-none",
        "no-headroom-enough",
        "static-never",
    ],
)
def test_the_headline_gives_both_views_in_plain_words(forecast, curve, expected):
    assert headline(make_result(forecast, curve)) == expected


def test_a_ratio_resting_on_few_events_says_so():
    text = headline(make_result((10, 12.0), ((21, 10.0), (8, 12.0), (0, 14.0))))
    assert text.startswith("At the same cost the forecast leaves 1.2x more unserved demand")
    assert text.endswith(
        "Few events: without headroom only 21 pod-minutes waited for a node (under 60, a few "
        "bursts), so one burst more or less moves this a lot."
    )
    assert "Few events" not in headline(make_result((10, 12.0)))  # 100 waited: enough


@pytest.mark.slow
def test_a_tie_is_x_one_and_the_page_says_tie_first():
    result = make_result((0, 12.5), ((50, 10.0), (0, 12.0), (0, 14.0)))
    assert result.to_dict()["headline"]["x_forecast"] == 1.0
    page = page_html(result)
    assert (
        '<div class="headline" id="headline"><span class="tie">Tie</span>: at the same cost' in page
    )


@pytest.mark.slow
def test_durations_and_times_are_in_human_units():
    page = page_html(make_result((10, 12.0)))
    settings = dict(settings_rows(SETTINGS))
    assert settings["node provisioning lag"] == "3 min"
    assert settings["lead time"] == "4 min"
    assert settings["warm-up (not scored)"] == "14 d"
    assert settings["scored from"] == "2014-11-24 00:00 UTC"
    assert settings["scored to"] == "2014-12-21 23:59 UTC"
    assert settings["scored span"] == "28 d"
    assert settings["demand one placeholder serves"] == "800 (--demand-per-replica)"
    assert settings["models fitted"] == "prophet ×28"
    assert "Scored 2014-11-24 00:00 UTC to 2014-12-21 23:59 UTC (28 d)" in page
    for raw in ("lag_seconds", "scored_from", "1416787200", "180.0", "_seconds"):
        assert raw not in page, raw
    assert "<tr><th>node provisioning lag</th><td>3 min</td></tr>" in page


def test_unknown_settings_still_show_with_a_readable_label():
    rows = dict(
        settings_rows(
            {
                **SETTINGS,
                "observation_delay_seconds": 60.0,
                "burst_model": "quantile",
                "new_knob_seconds": 5400,
            }
        )
    )
    assert (
        rows["observation delay"] == "1 min"
        and rows["burst model"] == "quantile"
        and rows["new knob"] == "1 h 30 min"
    )


@pytest.mark.slow
def test_the_page_has_real_tables_a_plot_and_how_to_read_it():
    result = make_result((10, 12.0))
    page = page_html(result)
    assert "<pre" not in page
    assert (
        re.search(r'<table class="numbers" id="table">', page)
        and 'id="settings"' in page
        and 'id="static-curve"' in page
    )
    assert (
        f'<tr><td title="{GLOSSARY["forecast"]}">forecast</td><td>10</td><td>12</td><td>0</td><td>2</td><td>4.00</td></tr>'
        in page
    )
    assert (
        f'<tr><td title="{GLOSSARY["oracle"]}">oracle</td><td>0</td><td>10.2</td><td>0</td><td>0.20</td><td>∞</td></tr>'
        in page
    )  # the strategy's name explains itself on hover
    assert (
        page.count("<svg") == 1 and 'aria-label="unserved pod-minutes against node-hours"' in page
    )
    assert page.index('id="plot"') < page.index('id="how-to-read"') < page.index('id="table"')
    assert "How to read this" in page
    assert 'id="dial"' not in page and 'id="stabilization-dial"' not in page


@pytest.mark.slow
def test_the_page_is_self_contained_and_escapes_what_it_shows():
    result = make_result((10, 12.0))
    result = replace(result, settings=replace(result.settings, data="<b>odd</b>.csv"))
    page = page_html(result)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", page, re.I)
    assert "<b>odd</b>" not in page and "&lt;b&gt;odd&lt;/b&gt;.csv" in page


def _crowded_dial(result: BacktestResult, scale: float = 1.0) -> BacktestResult:
    """Seven burst quantiles a hair apart in cost and all leaving nothing unserved, as on azure's
    series, for both the forecast and the naive baseline."""
    quantiles = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
    dial = [
        DialPoint(
            q,
            _strategy(result, 0, scale * (12.0 + 0.02 * k)),
            _strategy(result, 0, scale * (12.01 + 0.015 * k)),
        )
        for k, q in enumerate(quantiles)
    ]
    return replace(result, dial=dial)


@pytest.mark.slow
def test_dial_labels_never_overlap_even_when_the_settings_cost_the_same():
    fig = plot_figure(_crowded_dial(make_result((10, 12.0))))
    texts = [t for t in fig.axes[0].texts if t.get_visible() and t.get_text().startswith("q=")]
    for colour in {t.get_color() for t in texts}:  # every quantile of each sweep is labelled
        shown = [t.get_text()[2:].split(", ") for t in texts if t.get_color() == colour]
        assert sorted(q for qs in shown for q in qs) == [
            "0.3",
            "0.5",
            "0.7",
            "0.8",
            "0.9",
            "0.95",
            "0.99",
        ]
    assert len({t.get_color() for t in texts}) == 2
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    boxes = []
    ax = fig.axes[0]
    for t in [*ax.texts, ax.xaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels()]:
        if not t.get_visible() or not t.get_text():
            continue
        if hasattr(t, "update_positions"):
            t.update_positions(renderer)
        boxes.append((t.get_text(), Text.get_window_extent(t, renderer)))
    boxes.append(("legend", ax.get_legend().get_window_extent(renderer)))
    overlapping = [
        (a, b)
        for k, (a, box) in enumerate(boxes)
        for b, other in boxes[k + 1 :]
        if box.overlaps(other)
    ]
    assert not overlapping, overlapping
    # Each label still sits near its own point: within 80 points above or below, just beside it.
    for t in texts:
        assert abs(t.xyann[1]) <= 80 and abs(t.xyann[0]) <= 30


@pytest.mark.slow
def test_backtest_plot_ticks_are_in_human_units_for_millions():
    """Node-hours in the millions are ticked 2.4M, not 2,400,000 (nor with a 1e6 offset)."""
    result = _crowded_dial(make_result((10, 2_000_000.0)), scale=200_000.0)
    ticks = re.findall(r"<text [^>]*>([^<]*)</text>", str(page_html(result)))
    assert any(re.fullmatch(r"[0-9.]+M", t) for t in ticks), ticks
    assert not any(re.fullmatch(r"[0-9,]*,000", t) or "1e6" in t for t in ticks), ticks


@pytest.mark.slow
def test_static_and_dial_labels_stay_inside_the_axes_and_never_overprint():
    """N=0 and N=1 a hair apart in cost and demand, seven dial settings at the axis' floor: every
    label shown sits inside the axes (none below the axis) and no two labels overlap."""
    crowded = ((100, 10.0), (99, 10.02), (40, 12.0), (0, 14.0))
    fig = plot_figure(_crowded_dial(make_result((10, 12.0), curve=crowded)))
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[0]
    axes_box = ax.get_window_extent(renderer)
    shown = []
    for t in ax.texts:
        if t.get_visible() and t.get_text():
            t.update_positions(renderer)
            shown.append((t.get_text(), Text.get_window_extent(t, renderer)))
    assert {"N=0", "N=1"} <= {text for label, _ in shown for text in _names(label)}
    outside = [
        label
        for label, box in shown
        if box.x0 < axes_box.x0 - 0.5
        or box.x1 > axes_box.x1 + 0.5
        or box.y0 < axes_box.y0 - 0.5
        or box.y1 > axes_box.y1 + 0.5
    ]
    assert outside == []
    overlapping = [
        (a, b)
        for k, (a, box) in enumerate(shown)
        for b, other in shown[k + 1 :]
        if box.overlaps(other)
    ]
    assert overlapping == []


def _names(label: str) -> list[str]:
    """'N=0, 1' names N=0 and N=1; 'q=0.5' names q=0.5."""
    prefix, values = label.split("=", 1)
    return [f"{prefix}={v}" for v in values.split(", ")]
