"""What the pages share: human units, the burst section on both pages, templates that ship with the package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from predictive_headroom.pages.burst import LEFT
from predictive_headroom.pages.format import (
    fmt_clock,
    fmt_compact,
    fmt_duration,
    fmt_time,
    fmt_utc,
)
from predictive_headroom.pages.render import environment

DAY_START = datetime(2014, 12, 7, tzinfo=UTC)
PEAK_INDEX = 224  # 18:40 UTC at 5-minute steps


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (0.25, "0.25 s"),
        (30, "30 s"),
        (90, "1 min 30 s"),
        (180, "3 min"),
        (1800, "30 min"),
        (3600, "1 h"),
        (5400, "1 h 30 min"),
        (86400, "1 d"),
        (90000, "1 d 1 h"),
        (14 * 86400, "14 d"),
        (None, "n/a"),
        # rounded to the smaller unit, carrying into the larger one, not truncated
        (86399, "1 d"),
        (93599, "1 d 2 h"),
        (3599.6, "1 h"),
        (119, "1 min 59 s"),
        (7170, "2 h"),
        (-300, "-5 min"),
    ],
)
def test_durations_read_in_their_two_largest_units(seconds, text):
    assert fmt_duration(seconds) == text


def test_instants_read_the_same_from_seconds_or_iso_text():
    assert fmt_utc(1416787200.0) == fmt_utc("2014-11-24T00:00:00Z") == "2014-11-24 00:00 UTC"
    assert (
        fmt_time(1416787200.0)
        == fmt_time("2014-11-24T00:00:00+00:00")
        == "Mon 24 Nov 2014 00:00 UTC"
    )
    assert fmt_clock("2014-12-07T18:40:00Z") == "18:40"


def burst(importance: list[dict] | None = None, model: str = "quantile") -> dict:
    """A synthetic burst of the last day: daily demand, an allowance peaking at 400 at 18:40 UTC."""
    n = 288
    times = [
        (DAY_START + timedelta(minutes=5 * k)).isoformat().replace("+00:00", "Z") for k in range(n)
    ]
    demand = 1000 + 500 * np.sin(2 * np.pi * np.arange(n) / n)
    allowance = np.full(n, 120.0)
    allowance[PEAK_INDEX] = 400.0
    return {
        "pool": "web",
        "quantile": 0.95,
        "lead_seconds": 600.0,
        "model": model,
        "times": times,
        "demand": demand.round(3).tolist(),
        "allowance": allowance.tolist(),
        "importance": [
            {"feature": "latest demand", "drop": 0.42},
            {"feature": "growth over the last 30 min", "drop": 0.2},
            {"feature": "time of day", "drop": 0.05},
            {"feature": "residual", "drop": 0.0},
        ]
        if importance is None
        else importance,
    }


def section(value: object = "absent") -> str:
    template = environment("predictive_headroom.pages").from_string(
        '{% import "macros.html" as m %}'
        + ("{{ m.burst_section() }}" if value == "absent" else "{{ m.burst_section(b) }}")
    )
    return template.render(b=value).strip()


def _points(html: str, cls: str) -> np.ndarray:
    text = re.search(rf'<polyline class="{cls}" points="([^"]*)"', html).group(1)
    return np.array([[float(v) for v in p.split(",")] for p in text.split()])


def test_the_burst_section_draws_demand_and_the_allowance_above_it_and_says_what_moved_it():
    html = section(burst())
    assert html.startswith('<section class="burst" id="burst-web">')
    assert (
        "<script" not in html
        and 'aria-label="demand and demand plus burst allowance for pool web"' in html
    )
    demand, asked = _points(html, "demand"), _points(html, "asked")
    assert demand.shape == asked.shape == (288, 2)
    assert (asked[:, 0] == demand[:, 0]).all() and (
        asked[:, 1] < demand[:, 1]
    ).all()  # SVG y grows downwards
    assert np.argmax(demand[:, 1] - asked[:, 1]) == PEAK_INDEX
    sentence = re.sub(
        r"\s+", " ", re.search(r'<p class="burst-sentence">(.*?)</p>', html, re.S).group(1)
    )
    assert (
        '<abbr title="the burst quantile (burstQuantile)' in sentence
    )  # q=0.95 explained on hover
    sentence = re.sub(r"<[^>]+>", "", sentence)
    assert sentence == (
        "At q=0.95 with a 10 min lead, the burst model asked for up to 400 above demand (at 18:40 UTC); "
        "the features that moved it most: latest demand, growth over the last 30 min, time of day."
    )
    assert (
        "<tr><td>latest demand</td><td>0.42</td></tr>" in html
        and "<tr><td>residual</td><td>0</td></tr>" in html
    )
    assert "2014-12-07 00:00 UTC to 2014-12-07 23:55 UTC" in html
    assert [label for label in re.findall(r'text-anchor="middle">([^<]*)<', html)] == [
        "00:00",
        "06:00",
        "12:00",
        "18:00",
    ]


def test_a_burst_without_importance_or_from_the_profile_says_so():
    html = section(burst(importance=[], model="profile"))
    assert "the time-of-day burst profile asked for up to 400 above demand (at 18:40 UTC)." in html
    assert "features that moved it" not in html and "No feature importance for this model." in html


@pytest.mark.parametrize("value", ["absent", None, {}, {"pool": "web", "times": []}])
def test_no_burst_renders_nothing(value):
    assert section(value) == ""


@pytest.mark.slow
def test_the_backtest_page_shows_a_burst_from_its_json():
    from test_backtest_page import make_result

    from predictive_headroom.backtest.page import page_html

    result = make_result((10, 12.0))
    assert 'class="burst"' not in page_html(result)
    page = page_html(replace(result, burst=burst()))
    assert (
        page.count('<section class="burst" id="burst-web">') == 1
        and "the burst model asked for up to 400" in page
    )


@pytest.mark.slow
def test_the_report_shows_a_pools_burst(tmp_path):
    from test_report import MONDAY, TAXI, policy, report_of, seasonal_forecast

    from predictive_headroom.report.html import render_html
    from predictive_headroom.sources.csvsource import read_csv_history

    taxi = read_csv_history(TAXI).since(MONDAY - 21 * 86400).until(MONDAY)
    report = report_of(
        policy(), {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, MONDAY)}, {}, MONDAY
    )
    assert 'class="burst"' not in render_html(report)
    object.__setattr__(report.pools[0], "burst", {**burst(), "pool": "taxi"})
    page = render_html(report)
    assert '<section class="burst" id="burst-taxi">' in page and page.count("<svg") == 3
    assert page.index('id="burst-taxi"') < page.index("Plan changes")


@pytest.mark.slow
def test_templates_and_css_ship_with_the_package(tmp_path):
    """Only what a wheel holds (the modules and pyproject's package-data) is copied elsewhere; the report renders from there."""
    root = Path(__file__).resolve().parents[1]
    package = root / "predictive_headroom"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["predictive_headroom"]
    shipped = {p for pattern in ["**/*.py", *patterns] for p in package.glob(pattern)}
    templates = {p for p in package.rglob("templates/*") if p.is_file()}
    assert templates and templates <= shipped, sorted(str(p) for p in templates - shipped)
    site = tmp_path / "site"
    for p in shipped:
        (site / "predictive_headroom" / p.relative_to(package)).parent.mkdir(
            parents=True, exist_ok=True
        )
        shutil.copy(p, site / "predictive_headroom" / p.relative_to(package))
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "predictive_headroom",
            "report",
            "--data",
            str(package / "data" / "nab_nyc_taxi_30min.csv"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    page = (out / "index.html").read_text()
    assert (
        page.startswith("<!DOCTYPE html>")
        and "Headroom report" in page
        and "border-collapse" in page
    )


@pytest.mark.parametrize(
    "accuracy, words",
    [
        (
            {"mase": 0.8, "seasonal_period_seconds": 604800, "mape": 9.0, "coverage": 0.8},
            "beats repeating last week (20% less error); MAPE 9.0 %, coverage 80 %",
        ),
        (
            {"mase": 1.5, "seasonal_period_seconds": 86400, "mape": None, "coverage": 0.5},
            "worse than repeating the last day (50% more error); MAPE n/a, coverage 50 %",
        ),
        ({"mase": None, "coverage": 0.9}, "no comparison with repeating the last day"),
    ],
)
def test_the_accuracy_headline_is_scale_free_and_in_words(accuracy, words):
    from predictive_headroom.pages.format import mase_words

    assert mase_words(accuracy).startswith(words)


def test_a_large_mape_next_to_beats_repeating_last_week_is_explained():
    from predictive_headroom.pages.format import mase_words

    words = mase_words(
        {"mase": 0.62, "seasonal_period_seconds": 604800, "mape": 240.4, "coverage": 0.81}
    )
    assert words.startswith("beats repeating last week (38% less error); MAPE 240.4 %")
    assert "near-zero demand (nights, quiet hours) inflates it" in words and "Read MASE" in words


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (8_000_000, "8M"),
        (1_234_567, "1.23M"),
        (350_000, "350k"),
        (2_500, "2.5k"),
        (42, "42"),
        (0.25, "0.25"),
        (0, "0"),
        (-1_500_000, "-1.5M"),
        (3e9, "3G"),
        (None, "n/a"),
        (float("nan"), "n/a"),
    ],
)
def test_fmt_compact_puts_axis_ticks_in_human_units(value, text):
    assert fmt_compact(value) == text


def _max_label_px(labels: list[str], font_px: float = 11.0) -> float:
    """A generous width of a tick label in DejaVu Sans at `font_px` (digits are 0.64 em wide)."""
    return max(len(label) for label in labels) * 0.64 * font_px


def test_the_burst_chart_keeps_a_tiny_allowance_readable_on_its_own_scale_and_labels_unclipped():
    """Demand in the millions (azure's) and an allowance of 1 % of it: the demand panel's ticks fit
    the left margin in human units, and the allowance alone spans its own panel, not a flat line."""
    b = burst()
    demand = (np.array(b["demand"]) * 6000).round(1)
    allowance = 0.01 * demand * (1 + 0.5 * np.sin(np.arange(len(demand)) / 20))
    html = section({**b, "demand": demand.tolist(), "allowance": allowance.tolist()})
    labels = re.findall(r'text-anchor="end">([^<]*)<', html)
    assert labels and not any(",000" in label for label in labels), labels
    assert {"0", "10M"} <= set(labels)  # 9M of demand at most: the axis tops out at 10M
    assert _max_label_px(labels) <= LEFT - 6, labels  # the text ends 6 px left of the axis
    lower = _points(html, "allowance")
    upper_demand = _points(html, "demand")
    assert lower.shape == upper_demand.shape
    panel_top = float(re.search(r'<text class="panel" x="[^"]*" y="([^"]*)"', html).group(1))
    assert lower[:, 1].min() > panel_top > upper_demand[:, 1].max()  # below the demand panel
    # Its own scale: the allowance's rise and fall fills a good part of its panel (70 px).
    assert np.ptp(lower[:, 1]) > 25
    # A hundred times the allowance is as spread over the panel: the scale follows the allowance alone.
    bigger = section({**b, "demand": demand.tolist(), "allowance": (100 * allowance).tolist()})
    assert np.ptp(_points(bigger, "allowance")[:, 1]) > 25


@pytest.mark.slow
def test_the_reports_plots_tick_million_scale_demand_in_human_units():
    """Azure-like demand in the millions: every axis tick on the report is short (8M, not
    8,000,000), the burst chart's included, so none is clipped at the left edge."""
    from test_report import MONDAY, TAXI, policy, report_of, seasonal_forecast

    from predictive_headroom.report.html import render_html
    from predictive_headroom.sources.csvsource import read_csv_history

    taxi = read_csv_history(TAXI).since(MONDAY - 21 * 86400).until(MONDAY)
    big = replace(taxi, values=taxi.values * 1000)
    report = report_of(
        policy(forecast="{query: taxi, demandPerReplica: 1000000, step: 30m}"),
        {"taxi": big},
        {"taxi": seasonal_forecast(big, MONDAY)},
        {},
        MONDAY,
    )
    b = burst()
    object.__setattr__(
        report.pools[0],
        "burst",
        {**b, "pool": "taxi", "demand": [6000 * d for d in b["demand"]]},
    )
    page = render_html(report)
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", page)
    assert any(re.fullmatch(r"[0-9.]+M", t) for t in texts), texts
    assert not any(re.fullmatch(r"-?[0-9,.]*,[0-9]{3}", t) for t in texts), texts


@pytest.mark.parametrize(
    ("fit", "says", "points_to"),
    [
        (
            {"kind": "current", "history_end": "2014-12-08T00:00:00Z", "fits": 1},
            "Read from the fit the plan uses now (history to 2014-12-08 00:00 UTC)",
            "The backtest page shows the walk-forward refits instead",
        ),
        (
            {"kind": "walk-forward", "history_end": "2014-12-07T00:00:00Z", "fits": 2},
            "Read from the walk-forward refits the replay had in force (2 over this day",
            "The report reads the fit it plans with now",
        ),
    ],
)
def test_each_burst_section_says_which_fit_it_shows_and_where_the_other_fit_is(
    fit, says, points_to
):
    html = re.sub(r"\s+", " ", section({**burst(), "fit": fit}))
    words = re.search(r'<p class="burst-fit note">(.*?)</p>', html).group(1)
    assert says in words and points_to in words
