"""The backtest page made by the real CLI from a real series, opened in real headless Chromium."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from browser_cdp import chromium_available, visit
from page_layout import (
    BURST_CHART,
    GLOSSARY_SEEN,
    PAGE_WIDTH,
    chart,
    demand_hidden,
    inside,
    label_clashes,
    labels_on_lines,
    page_fits,
)
from PIL import Image

from predictive_headroom.backtest.plot import fmt_x
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.cli import main
from predictive_headroom.pages.format import fmt_duration, fmt_number, fmt_utc

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not chromium_available(),
        reason="needs Debian chromium at /usr/bin/chromium (`make test` installs it)",
    ),
]

ASG = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "nab_aws_asg_cpu_5min.csv"
)  # bursty: the strategies differ


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    work = tmp_path_factory.mktemp("backtest-browser")
    lines = ASG.read_text().splitlines()
    (work / "asg.csv").write_text(
        "\n".join(lines[: 1 + 9 * 288]) + "\n"
    )  # nine days: seven of warm-up, two scored
    out = work / "backtest"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
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
                "0.8,0.99",
                "--stabilization-dial",
                "5m,30m",
                "--protection",
                "90%,95%",
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
        },
    )
    (work / "backtest-page.png").write_bytes(seen.png)
    return out, json.loads(printed.getvalue()), seen


def test_the_screenshot_shows_a_page_not_a_blank(page):
    _, _, seen = page
    pixels = np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB"), dtype=float)
    assert pixels.shape == (2400, 1280, 3)
    inked = (pixels.min(axis=2) < 200).mean()
    assert inked > 0.03, f"only {inked:.1%} of the screenshot is not near-white"
    assert pixels.std() > 15
    # Colour, not just text: the static curve's blue is on screen.
    assert ((pixels[..., 2] > 150) & (pixels[..., 0] < 80)).mean() > 0.0005


def test_the_page_loads_nothing_from_the_network_and_logs_no_errors(page):
    out, _, seen = page
    assert seen.console_errors == []
    assert seen.requests == [(out / "backtest.html").as_uri()]
    html = (out / "backtest.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", html, re.I)
    assert "<script" not in html.lower() and "data:image" not in html


def test_the_key_sections_are_on_the_page(page):
    _, _, seen = page
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
        seen.dom.count("<svg") == 3
        and 'aria-label="unserved pod-minutes against node-hours"' in seen.dom
    )
    assert 'aria-label="demand and demand plus burst allowance' in seen.dom
    assert seen.text.index("How to read this") < seen.text.index("Strategies")


def test_the_json_numbers_are_the_ones_on_the_page(page):
    _, data, seen = page
    text = seen.text
    assert data["headline"]["text"] in text
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
    _, data, seen = page
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
    _, data, seen = page
    fit = data["burst"]["fit"]
    assert fit["kind"] == "walk-forward" and fit["fits"] >= 1
    assert "Read from the walk-forward refits the replay had in force" in seen.text
    assert "The report reads the fit it plans with now" in seen.text


def test_the_page_fits_a_1280_px_window_and_wide_tables_scroll_in_their_own_box(page):
    _, _, seen = page
    width = seen.probes["width"]
    assert width["viewport"] == 1280
    assert page_fits(width) == []
    frontier = next(t for t in width["tables"] if t["id"] == "frontier")
    assert frontier["overflow"] == "auto"  # 11 columns: it scrolls inside the page's column


def test_plot_labels_overlap_nothing_and_stay_inside_the_axes(page):
    _, _, seen = page
    plot = seen.probes["plot"]
    labels = [t for t in plot["texts"] if t["kind"] == "label"]
    assert any(t["text"].startswith("N=") for t in labels)
    assert any(t["text"].startswith("q=") for t in labels)
    assert label_clashes(plot) == []  # N=0 / N=1, dial labels, ticks, legend
    outside = [t["text"] for t in labels if not inside(t["box"], plot["axes"])]
    assert outside == []  # q=0.99 does not drop below the axis


def test_the_frontier_names_the_setting_tune_would_choose_off_the_lines(page):
    _, data, seen = page
    frontier = seen.probes["frontier"]
    assert labels_on_lines(frontier) == [] and label_clashes(frontier) == []
    chosen = [a for a in data["frontier"]["at"] if a["chosen"]]
    legend = [t["text"] for t in frontier["texts"] if t["kind"] == "legend"]
    for at in chosen:
        assert f"choose: {at['chosen']['label']} for {100 * at['protection']:g}%" in legend


def test_the_burst_chart_keeps_its_ticks_and_shows_demand_on_top(page):
    _, _, seen = page
    burst = seen.probes["burst"]
    clipped = [t["text"] for t in burst["texts"] if not inside(t["box"], burst["svg"])]
    assert clipped == []
    assert demand_hidden(burst) <= len(burst["demand_stacks"]) // 50  # a stray pixel at a spike


def test_the_words_are_explained_on_the_page_and_match_the_cli(page):
    _, _, seen = page
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
    _, data, seen = page
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
        said = sentence(e)
        said = said[0].upper() + said[1:] + "."
        assert said.startswith(f"Asked {100 * e['protection']:g}%: kept ")
        # First on the page: before the x headline and everything else.
        assert text.index(said) < text.index(data["headline"]["text"])
        assert text.index(said) < text.index("How to read this")
        row = f"{100 * e['protection']:g}%\t{100 * e['realized_protection']:.1f}%\t"
        assert row in text[text.index("The promise, walk-forward") :], row
