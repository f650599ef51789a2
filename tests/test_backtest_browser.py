"""The backtest page made by the real CLI from a real series, opened in real headless Chromium."""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import replace
from itertools import pairwise
from unittest import mock

import numpy as np
import pytest
from browser_cdp import chromium_available, visit
from page_layout import (
    BURST_CHART,
    CARDS,
    FIGURES,
    GLOSSARY_SEEN,
    HEADERS,
    PAGE_WIDTH,
    bare_cards,
    chart,
    clipped_tables,
    demand_hidden,
    inside,
    label_clashes,
    labels_on_lines,
    labels_on_markers,
    overflowing_cards,
    page_fits,
    strategy_markers,
    style_of,
    undefined_headers,
    unfilled_figures,
)
from PIL import Image
from testdata import series_path

from predictive_headroom.backtest.page import fmt_x, page_html, write_report
from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.cli import main
from predictive_headroom.pages.format import fmt_duration, fmt_number, fmt_signed, fmt_utc
from predictive_headroom.pages.glossary import term_of

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not chromium_available(),
        reason="needs Debian chromium at /usr/bin/chromium (`make test` installs it)",
    ),
]

ASG = series_path("nab_aws_asg_cpu_5min")  # bursty: the strategies differ


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    work = tmp_path_factory.mktemp("backtest-browser")
    lines = ASG.read_text().splitlines()
    (work / "asg.csv").write_text(
        "\n".join(lines[: 1 + 9 * 288]) + "\n"
    )  # nine days: seven of warm-up, two scored
    out = work / "backtest"
    printed = io.StringIO()
    results = []

    def keep(result, out_dir):
        results.append(result)
        return write_report(result, out_dir)

    with (
        contextlib.redirect_stdout(printed),
        mock.patch("predictive_headroom.backtest.page.write_report", keep),
    ):
        code = main(
            [
                "backtest",
                "--data",
                str(work / "asg.csv"),
                "--warmup",
                "7d",
                "--quiet",
                "--output",
                "json",
                "--dial",
                "0.8,0.95,0.99",  # 0.95, the pool's own, lands on the forecast's point
                "--stabilization-dial",
                "5m,30m",
                "--protection",
                "90%,95%",
                "--interruptions",
                "50%/day",
                "--out",
                str(out),
            ]
        )
    assert code == 0
    seen = visit(
        (out / "backtest.html").as_uri(),
        work / "profile",
        probes={
            "width": PAGE_WIDTH,
            "plot": chart("#plot svg"),
            "frontier": chart("#frontier-plot svg"),
            "burst": BURST_CHART,
            "glossary": GLOSSARY_SEEN,
            "headers": HEADERS,
            "figures": FIGURES,
            "markers": strategy_markers("#plot svg"),
            "cards": CARDS,
        },
    )
    (work / "backtest-page.png").write_bytes(seen.png)
    return out, json.loads(printed.getvalue()), seen, results[0]


@pytest.fixture(scope="module")
def short_page(page, tmp_path_factory):
    """The same backtest with its 90% promise kept only to 77.6% (a shortfall), at 1920 px."""
    _, _, _, result = page
    work = tmp_path_factory.mktemp("backtest-short")
    short = [
        replace(e, realized_protection=e.protection - 0.124) if e.protection == 0.9 else e
        for e in result.promise
    ]
    (work / "backtest.html").write_text(page_html(replace(result, promise=short)))
    return visit(
        (work / "backtest.html").as_uri(),
        work / "profile",
        width=1920,
        probes={
            "width": PAGE_WIDTH,
            "promise": style_of("#promise-headline"),
            "kept": style_of("#promise-headline p:not(.short)"),
            "figures": FIGURES,
            "cards": CARDS,
        },
    )


def test_the_screenshot_shows_a_page_not_a_blank(page):
    _, _, seen, _ = page
    pixels = np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB"), dtype=float)
    assert pixels.shape == (2400, 1280, 3)
    inked = (pixels.min(axis=2) < 200).mean()
    assert inked > 0.03, f"only {inked:.1%} of the screenshot is not near-white"
    assert pixels.std() > 15
    # Colour, not just text: the static curve's blue is on screen.
    assert ((pixels[..., 2] > 150) & (pixels[..., 0] < 80)).mean() > 0.0005


def test_the_page_loads_nothing_from_the_network_and_logs_no_errors(page):
    out, _, seen, _ = page
    assert seen.console_errors == []
    assert seen.requests == [(out / "backtest.html").as_uri()]
    html = (out / "backtest.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", html, re.I)
    assert "<script" not in html.lower() and "data:image" not in html


def test_the_key_sections_are_on_the_page(page):
    _, _, seen, _ = page
    for heading in (
        "Backtest: ",
        "How to read this",
        "Strategies",
        "Burst quantile dial",
        "Scale-down stabilisation dial",
        "Cost at equal protection",
        "Settings",
    ):
        assert heading in seen.text, heading
    # The cost/protection plot, the frontier and the burst model's last day.
    assert 'aria-label="overhead node-hours against protection, one line per family"' in seen.dom
    assert (
        seen.dom.count("<svg") == 4  # and the disruption component's chart (--interruptions)
        and 'aria-label="unserved pod-minutes against node-hours"' in seen.dom
    )
    assert 'aria-label="demand and demand plus burst allowance' in seen.dom
    assert seen.text.index("How to read this") < seen.text.index("Strategies")


def test_the_json_numbers_are_the_ones_on_the_page(page):
    _, data, seen, _ = page
    text = seen.text
    # With the promise the verdict against fixed headroom is the promise's alone: the untuned
    # x-vs-static sentence is not on the page (one answer), its figures are.
    assert (data["headline"]["text"] in text) == (not data.get("promise"))
    assert set(data["strategies"]) == {
        "reactive",
        "proportional",
        "schedule",
        "forecast",
        "naive",
        "oracle",
    }
    for name, s in data["strategies"].items():
        row = "\t".join(
            [
                name,
                fmt_number(s["unserved_pod_minutes"]),
                fmt_number(s["node_hours"]),
                fmt_number(s["cold_starts"]),
                fmt_number(s["overhead_node_hours"]),
                fmt_x(s["x"]),
            ]
        )
        assert row in text, row
    for p in data["dial"]:
        row = "\t".join(
            [
                f"{p['quantile']:g}",
                *(
                    v
                    for side in ("forecast", "naive")
                    for v in (
                        fmt_number(p[side]["unserved_pod_minutes"]),
                        fmt_number(p[side]["overhead_node_hours"]),
                        fmt_x(p[side]["x"]),
                    )
                ),
            ]
        )
        assert row in text, row
    assert [fmt_duration(p["stabilization_seconds"]) for p in data["stabilization_dial"]] == [
        "5 min",
        "30 min",
    ]
    for p in data["stabilization_dial"]:
        assert (
            f"{fmt_duration(p['stabilization_seconds'])}\t{fmt_number(p['forecast']['unserved_pod_minutes'])}\t"
            in text
        )
    s = data["settings"]
    for label, value in (
        ("node provisioning lag", "3 min"),
        ("lead time", fmt_duration(s["lead_seconds"])),
        ("warm-up (not scored)", "7 d"),
        ("scored from", fmt_utc(s["scored_from"])),
        ("scored to", fmt_utc(s["scored_to"])),
        ("refit every", "1 d"),
    ):
        assert f"{label}\t{value}" in text, label
    assert f"Scored {fmt_utc(s['scored_from'])} to {fmt_utc(s['scored_to'])}" in text
    assert str(s["scored_from"]) not in text and "lag_seconds" not in text


def test_the_frontier_table_shows_each_familys_cost_from_the_json(page):
    _, data, seen, _ = page
    frontier = data["frontier"]
    assert [a["protection"] for a in frontier["at"]] == [0.9, 0.95]
    for at in frontier["at"]:
        label = f"{100 * at['protection']:g}%"
        row = next(line for line in seen.text.splitlines() if line.startswith(label + "\t"))
        cells = row.split("\t")
        static = at["cost"]["static"]
        assert cells[1] == (fmt_number(static) if static is not None else cells[1])
        assert cells[-1] == (at["chosen"]["label"] if at["chosen"] else "–")
        oracle = at["cost"]["oracle"]
        assert fmt_number(oracle) in cells


def test_the_burst_section_says_it_reads_the_walk_forward_refits(page):
    _, data, seen, _ = page
    fit = data["burst"]["fit"]
    assert fit["kind"] == "walk-forward" and fit["fits"] >= 1
    assert "Read from the walk-forward refits the replay had in force" in seen.text
    assert "The report reads the fit it plans with now" in seen.text


def test_the_page_fits_a_1280_px_window_and_wide_tables_scroll_in_their_own_box(page):
    _, _, seen, _ = page
    width = seen.probes["width"]
    assert width["viewport"] == 1280
    assert page_fits(width) == []
    frontier = next(t for t in width["tables"] if t["id"] == "frontier")
    assert frontier["overflow"] == "auto"  # 11 columns: it scrolls inside the page's column


def test_plot_labels_overlap_nothing_and_stay_inside_the_axes(page):
    _, _, seen, _ = page
    plot = seen.probes["plot"]
    labels = [t for t in plot["texts"] if t["kind"] == "label"]
    assert any(t["text"].startswith("N=") for t in labels)
    assert any(t["text"].startswith("q=") for t in labels)
    assert label_clashes(plot) == []  # N=0 / N=1, dial labels, ticks, legend
    outside = [t["text"] for t in labels if not inside(t["box"], plot["axes"])]
    assert outside == []  # q=0.99 does not drop below the axis


def test_the_frontier_names_the_setting_tune_would_choose_off_the_lines(page):
    _, data, seen, _ = page
    frontier = seen.probes["frontier"]
    assert labels_on_lines(frontier) == [] and label_clashes(frontier) == []
    chosen = [a for a in data["frontier"]["at"] if a["chosen"]]
    legend = [t["text"] for t in frontier["texts"] if t["kind"] == "legend"]
    for at in chosen:
        assert f"choose: {at['chosen']['label']} for {100 * at['protection']:g}%" in legend


def test_the_burst_chart_keeps_its_ticks_and_shows_demand_on_top(page):
    _, _, seen, _ = page
    burst = seen.probes["burst"]
    clipped = [t["text"] for t in burst["texts"] if not inside(t["box"], burst["svg"])]
    assert clipped == []
    assert demand_hidden(burst) <= len(burst["demand_stacks"]) // 50  # a stray pixel at a spike


def test_the_words_are_explained_on_the_page_and_match_the_cli(page):
    _, _, seen, _ = page
    words = seen.probes["glossary"]
    for term in (
        "overhead node-hours",
        "cold starts",
        "naive",
        "oracle",
        "choose",
        "q=0.95",
        "score drop when shuffled",
        "time of day (sin)/(cos)",
    ):
        assert term in words["terms"], term
    titled = {text for text, _ in words["titled"]}
    assert {"overhead node-hours", "cold starts", "naive", "oracle", "choose"} <= titled
    assert "score drop when shuffled" in titled
    assert {"time of day (sin)", "time of day (cos)"} <= titled  # the burst model's features
    assert any(text.startswith("q=") for text in titled)
    assert "extra node-hours" not in seen.text and "tune picks" not in seen.text


def test_the_page_leads_with_the_promise_kept_walk_forward(page):
    _, data, seen, _ = page
    text = seen.text
    promise = data["promise"]
    assert [e["protection"] for e in promise] == [0.9, 0.95]
    for e in promise:
        for key in (
            "realized_protection",
            "unserved_pod_minutes",
            "overhead_node_hours",
            "reserve_walk_forward_overhead_node_hours",
            "static_hindsight_overhead_node_hours",
            "choices",
        ):
            assert key in e, key
        said = sentence(PromiseEntry.from_dict(e))
        said = said[0].upper() + said[1:] + "."
        assert said.startswith(f"Asked {100 * e['protection']:g}%: kept ")
        # First on the page: before the untuned figures and everything else.
        assert text.index(said) < text.index("Without the promise")
        assert text.index(said) < text.index("How to read this")
        row = f"{100 * e['protection']:g}%\t{100 * e['realized_protection']:.1f}%\t"
        assert row in text[text.index("The promise, walk-forward") :], row


def test_no_table_clips_a_column_at_1280_or_1920_px(page, short_page):
    _, _, seen, _ = page
    assert seen.probes["width"]["viewport"] == 1280
    assert clipped_tables(seen.probes["width"]) == []
    assert short_page.probes["width"]["viewport"] == 1920
    assert page_fits(short_page.probes["width"]) == []
    assert clipped_tables(short_page.probes["width"]) == []
    ids = {t["id"] for t in short_page.probes["width"]["tables"]}
    assert {"frontier", "promise", "interruptions", "dial"} <= ids


def test_a_shortfall_reads_as_a_warning_and_a_kept_promise_does_not(short_page):
    headline = short_page.probes["promise"]
    assert headline["background"] == "rgb(255, 251, 235)"  # the warnings' amber, not the blue
    assert headline["border"] == "rgb(245, 158, 11)"
    assert headline["text"].startswith(
        "Warning, short of the protection asked: Asked 90%: kept 77.6%"
    )
    assert "Short of 90% by 12.4 points" in headline["text"]
    kept = short_page.probes["kept"]
    assert kept["text"].startswith("Asked 95%") and "Warning" not in kept["text"]


def test_dial_labels_keep_clear_of_the_strategies_points(page):
    _, _, seen, _ = page
    markers = seen.probes["markers"]
    assert len(markers) == 6  # reactive, proportional, schedule, forecast, naive, oracle
    labels = [t["text"] for t in seen.probes["plot"]["texts"] if t["kind"] == "label"]
    assert any("0.95" in t for t in labels)  # the dial's 0.95 is the forecast's own point
    assert labels_on_markers(seen.probes["plot"], markers) == []


def test_the_interrupted_cluster_has_its_table_and_the_components_chart(page):
    _, data, seen, _ = page
    text = seen.text
    report = data["interruptions"]
    assert "Nodes interrupted at random" in text and "caused by" not in text
    assert (
        'aria-label="placeholders the disruption component held, and the interruptions"' in seen.dom
    )
    assert len(report["component"]["times"]) == len(report["component"]["placeholders"]) > 0
    for row in report["strategies"]:
        cells = [
            row["strategy"],
            fmt_number(row["unserved_pod_minutes"]),
            fmt_number(row["unserved_pod_minutes_without_interruptions"]),
            fmt_signed(row["waiting_change_with_interruptions"], 0),
            fmt_number(row["node_hours"]),
            fmt_signed(row["node_hours_change"], 1),
            str(row["interruptions"]),
        ]
        assert "\t".join(cells) in text, cells
        assert "-0.0" not in cells
    if any(r["waiting_change_with_interruptions"] < 0 for r in report["strategies"]):
        assert "Change in waiting: a change below 0 means" in text


def test_every_chart_fills_its_card_at_1280_and_1920_px(page, short_page):
    _, _, seen, _ = page
    figures = seen.probes["figures"]
    assert {f["id"] for f in figures} >= {"plot", "frontier-plot", "component-plot"}
    assert any(f["id"].startswith("burst-") for f in figures)
    assert unfilled_figures(figures) == []
    assert unfilled_figures(short_page.probes["figures"]) == []


def test_every_column_and_card_is_in_the_pages_glossary(page):
    _, _, seen, _ = page
    terms = seen.probes["glossary"]["terms"]
    headers = seen.probes["headers"]
    assert len(headers) > 40
    assert undefined_headers(headers, terms, term_of) == []
    for word in ("static ÷ promise", "change in waiting", "naive ÷ forecast", "a day"):
        assert word in terms, word


def test_with_protection_the_promise_is_the_headline_and_the_untuned_figure_comes_second(page):
    _, data, seen, _ = page
    dom = seen.dom
    first, second = dom.index('id="promise-headline"'), dom.index('id="headline"')
    assert first < second < dom.index('id="promise-cards"')
    assert "Without the promise</b>, at the pool's own setting" in dom
    for entry in data["promise"]:
        assert f"{100 * entry['realized_protection']:.1f}%" in seen.text


def test_every_headline_card_says_what_its_number_counts_at_1280_and_1920_px(page, short_page):
    _, _, seen, _ = page
    for shown in (seen, short_page):
        cards = shown.probes["cards"]
        assert len(cards) >= 5
        assert bare_cards(cards) == []
        assert overflowing_cards(cards) == []
    values = {c["title"]: c["value"] for c in seen.probes["cards"]}
    assert values["Forecast: overhead node-hours"].endswith("node-h")


@pytest.fixture(scope="module")
def wide_page(tmp_path_factory):
    """The backtest of a large pool (a placeholder serves 0.003 of demand: thousands of nodes),
    its x-axis running from about 100k to 190k node-hours, opened at 1280 px."""
    work = tmp_path_factory.mktemp("backtest-wide")
    lines = ASG.read_text().splitlines()
    (work / "asg.csv").write_text("\n".join(lines[: 1 + 9 * 288]) + "\n")
    out = work / "backtest"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "backtest",
                "--data",
                str(work / "asg.csv"),
                "--warmup",
                "7d",
                "--quiet",
                "--demand-per-replica",
                "0.003",
                "--out",
                str(out),
            ]
        )
    assert code == 0
    return visit(
        (out / "backtest.html").as_uri(), work / "profile", probes={"plot": chart("#plot svg")}
    ).probes["plot"]


def test_on_a_wide_x_axis_the_static_labels_spread_along_the_curve_and_never_overlap(wide_page):
    plot = wide_page
    ticks = [t["text"] for t in plot["texts"] if t["kind"] == "tick"]
    assert "180k" in ticks, ticks  # the wide x-axis this test is about
    static = [t for t in plot["texts"] if t["kind"] == "label" and t["text"].startswith("N=")]
    assert label_clashes(plot) == []
    assert all(inside(t["box"], plot["axes"]) for t in static), static
    # by place, not by index: not the first hundred N crowded into the top-left corner
    assert len(static) >= 5, static
    left, _, right, _ = plot["axes"]
    assert max(t["box"][0] for t in static) > left + 0.7 * (right - left), static
    lefts = sorted(t["box"][0] for t in static)
    assert min(b - a for a, b in pairwise(lefts)) > 20, static  # no two labels stacked on one spot
