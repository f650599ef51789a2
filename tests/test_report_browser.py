"""The report made by the real CLI from a real series, opened in real headless Chromium."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from datetime import datetime
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
    clipped_tables,
    demand_hidden,
    inside,
    overflowing_cards,
    page_fits,
    style_of,
    undefined_headers,
    unfilled_figures,
)
from PIL import Image
from testdata import series_path

from predictive_headroom.cli import main
from predictive_headroom.pages.format import (
    fmt_lead,
    fmt_money,
    fmt_number,
    fmt_percent,
    fmt_ratio,
    fmt_share,
    fmt_time,
)
from predictive_headroom.pages.glossary import term_of
from predictive_headroom.report.html import render_html
from predictive_headroom.report.store import write_report_files

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not chromium_available(),
        reason="needs Debian chromium at /usr/bin/chromium (`make test` installs it)",
    ),
]

AZURE = series_path("azure_v2_vm_cpu_total_5min")
POLICY = """\
pools:
  - name: web
    target: {namespace: headroom, name: web-placeholder}
    minReplicas: 1
    maxReplicas: 6
    leadTime: 10m
    schedules:
      - {name: business-hours, timezone: Europe/Berlin, start: "0 8 * * 1-5", end: "0 18 * * 1-5", desiredReplicas: 3}
    forecast: {query: "sum(rate(cpu_usage[5m]))", demandPerReplica: 50000}
    placeholder: {cpu: "2", memory: 4Gi}
cost: {costPerCpuHour: 0.04, costPerGiBHour: 0.005, currency: USD}
"""


def _time(iso_text: str) -> str:
    return fmt_time(datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp())


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    work = tmp_path_factory.mktemp("browser")
    lines = AZURE.read_text().splitlines()
    (work / "azure.csv").write_text(
        "\n".join(lines[: 2 + 21 * 288]) + "\n"
    )  # the first three weeks and the next midnight (the burst chart's last tick is at its edge)
    (work / "policy.yaml").write_text(POLICY)
    out = work / "report"
    reports = []

    def keep(directory, report):
        reports.append(report)
        return write_report_files(directory, report)

    argv = ["report", "--data", str(work / "azure.csv"), "--config", str(work / "policy.yaml")]
    with mock.patch("predictive_headroom.commands.report.write_report_files", keep):
        assert main([*argv, "--out", str(out)]) == 0
    seen = visit(
        (out / "index.html").as_uri(),
        work / "profile",
        probes={
            "width": PAGE_WIDTH,
            "burst": BURST_CHART,
            "glossary": GLOSSARY_SEEN,
            "headers": HEADERS,
            "figures": FIGURES,
            "cards": CARDS,
        },
    )
    (work / "report.png").write_bytes(seen.png)
    return out, json.loads((out / "report.json").read_text()), seen, reports[0]


SHORT = {
    "says": "asked 95%, last week 82.6%",
    "short": True,
    "reason": "no setting or reserve of 12 kept 95% on the last 14 days at any price",
    "asked": 0.95,
    "kept": 0.826,
    "status": "short",
    "burst_quantile": 0.99,
    "scale_down_stabilization_seconds": 1800.0,
    "reserve": 3,
}


@pytest.fixture(scope="module")
def short_page(page, tmp_path_factory):
    """The same report, its pool a `protection: 95%` pool that kept 82.6% last week, at 1920 px."""
    *_, report = page
    work = tmp_path_factory.mktemp("report-short")
    pools = tuple(dataclasses.replace(r, promise=SHORT) for r in report.pools)
    (work / "index.html").write_text(render_html(dataclasses.replace(report, pools=pools)))
    return visit(
        (work / "index.html").as_uri(),
        work / "profile",
        width=1920,
        probes={
            "width": PAGE_WIDTH,
            "promise": style_of("#promise-web"),
            "figures": FIGURES,
            "cards": CARDS,
        },
    )


def test_the_screenshot_shows_a_page_not_a_blank(page):
    _, _, seen, _ = page
    pixels = np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB"), dtype=float)
    assert pixels.shape == (2400, 1280, 3)
    inked = (pixels.min(axis=2) < 200).mean()  # text, lines, plot bands
    assert inked > 0.03, f"only {inked:.1%} of the screenshot is not near-white"
    assert pixels.std() > 15
    # Colour, not just text: the forecast blue is on screen.
    assert ((pixels[..., 2] > 180) & (pixels[..., 0] < 80)).mean() > 0.0005


def test_the_page_loads_nothing_from_the_network_and_logs_no_errors(page):
    out, _, seen, _ = page
    assert seen.console_errors == []
    assert seen.requests == [(out / "index.html").as_uri()]
    html = (out / "index.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", html, re.I)
    assert "<script" not in html.lower()


def test_the_key_sections_are_on_the_page(page):
    _, _, seen, _ = page
    for heading in (
        "Headroom report",
        "Pool web",
        "Next peaks",
        "Cost of headroom (next 48 h)",
        "Forecast accuracy on held-back recent data",
        "Warnings",
        "Plan changes",
    ):
        assert heading in seen.text, heading
    assert seen.dom.count("<svg") == 3  # demand, plan, and the burst model's last day
    assert 'aria-label="demand and demand plus burst allowance' in seen.dom
    assert 'aria-label="demand and forecast for pool web"' in seen.dom
    assert 'aria-label="planned placeholder pods for pool web"' in seen.dom


def test_report_json_numbers_are_the_ones_on_the_page(page):
    _, data, seen, _ = page
    [pool] = data["pools"]
    text = seen.text
    assert pool["forecast"]["status"] == "ok" and pool["forecast"]["model"] == "prophet"
    assert f"As of {_time(data['generated_at'])}" in text
    assert (
        str(pool["plan"]["now"]["desired_replicas"]) in text
        and f"reason: {pool['plan']['now']['reason']}" in text
    )
    assert pool["peaks"], "a three-week series with a daily pattern has peaks in the next 48 h"
    for n, peak in enumerate(pool["peaks"], 1):
        row = "\t".join(
            [
                str(n),
                _time(peak["at"]),
                fmt_number(peak["demand"]),
                fmt_number(peak["upper"]),
                str(peak["warm_replicas"]),
                _time(peak["warm_from"]),
                fmt_lead(peak["lead_seconds"]),  # the column "warm ahead of peak"
            ]
        )
        assert row in text, row
    acc = pool["accuracy"]
    assert (
        f"{fmt_percent(acc['mape'])}\t{fmt_percent(acc['smape'])}\t{fmt_ratio(acc['mase'])}\t{fmt_share(acc['coverage'])}"
        in text
    )
    cost = pool["cost"]
    for label, value in (
        ("pod-hours", cost["replica_hours"]),
        ("CPU-hours", cost["cpu_hours"]),
        ("GiB-hours", cost["gib_hours"]),
    ):
        assert f"{label}\t{fmt_number(value)}" in text, label
    assert cost["money"] > 0 and f"cost\t{fmt_money(cost['money'], 'USD')}" in text
    assert cost["cpu_hours"] == pytest.approx(2 * cost["replica_hours"])
    assert cost["gib_hours"] == pytest.approx(4 * cost["replica_hours"])
    codes = {w["code"] for w in pool["warnings"]}
    assert "max-replicas" in codes  # demandPerReplica 50000 asks for more than maxReplicas 6
    for warning in pool["warnings"]:
        assert warning["message"] in text
    assert f"Plan changes ({len(pool['plan']['changes'])})" in text


def test_the_burst_section_says_it_reads_the_current_fit(page):
    _, data, seen, _ = page
    fit = data["pools"][0]["burst"]["fit"]
    assert (
        fit["kind"] == "current"
        and fit["history_end"] == data["pools"][0]["forecast"]["history_end"]
    )
    assert "Read from the fit the plan uses now" in seen.text
    assert "The backtest page shows the walk-forward refits instead" in seen.text


def test_the_page_fits_a_1280_px_window(page):
    _, _, seen, _ = page
    assert seen.probes["width"]["viewport"] == 1280
    assert page_fits(seen.probes["width"]) == []


def test_the_burst_chart_keeps_its_last_tick_and_shows_demand_over_the_allowance(page):
    _, _, seen, _ = page
    burst = seen.probes["burst"]
    ticks = [t for t in burst["texts"] if ":" in t["text"]]
    assert ticks and ticks[-1]["text"] == "00:00"  # the day ends on the hour: its last tick
    clipped = [t["text"] for t in burst["texts"] if not inside(t["box"], burst["svg"])]
    assert clipped == []
    assert demand_hidden(burst) <= len(burst["demand_stacks"]) // 50  # a stray pixel at a spike


def test_the_words_are_explained_on_the_page(page):
    _, _, seen, _ = page
    words = seen.probes["glossary"]
    for term in ("q=0.95", "score drop when shuffled", "time of day (sin)/(cos)", "MASE"):
        assert term in words["terms"], term
    titled = {text for text, _ in words["titled"]}
    assert "score drop when shuffled" in titled and any(t.startswith("q=") for t in titled)
    assert {"time of day (sin)", "time of day (cos)"} <= titled  # the burst model's features


def test_no_table_clips_a_column_at_1280_or_1920_px(page, short_page):
    _, _, seen, _ = page
    assert clipped_tables(seen.probes["width"]) == []
    assert short_page.probes["width"]["viewport"] == 1920
    assert page_fits(short_page.probes["width"]) == []
    assert clipped_tables(short_page.probes["width"]) == []


def test_a_protection_shortfall_is_a_warning_saying_what_was_kept_and_held(short_page):
    promise = short_page.probes["promise"]
    assert (
        promise["background"] == "rgb(255, 251, 235)" and promise["border"] == "rgb(245, 158, 11)"
    )
    text = " ".join(promise["text"].split())
    assert text.startswith(
        "Warning, short of the protection asked: Protection asked 95%, kept 82.6% over the last week (short)."
    )
    assert (
        "Holding burst quantile 0.99, scale-down stabilisation 30 min, a reserve of 3 placeholders."
        in text
    )
    assert SHORT["reason"] in text


def test_the_peaks_column_is_not_called_lead_and_says_what_it_is(page):
    _, _, seen, _ = page
    headers = [text for text, _ in seen.probes["headers"]]
    assert "warm ahead of peak" in headers and "lead" not in headers
    title = dict(seen.probes["headers"])["warm ahead of peak"]
    assert "not the pool's lead time" in title


def test_every_chart_fills_its_card_at_1280_and_1920_px(page, short_page):
    _, _, seen, _ = page
    figures = seen.probes["figures"]
    assert any(f["id"].startswith("burst-") for f in figures) and len(figures) >= 3
    assert unfilled_figures(figures) == []
    assert unfilled_figures(short_page.probes["figures"]) == []


def test_every_column_and_card_is_in_the_pages_glossary(page):
    _, _, seen, _ = page
    terms = seen.probes["glossary"]["terms"]
    headers = seen.probes["headers"]
    assert len(headers) > 15
    assert undefined_headers(headers, terms, term_of) == []
    assert {"MAPE", "MASE", "warm ahead of peak", "headroom cost"} <= set(terms)


def test_every_headline_card_says_what_its_number_counts_at_1280_and_1920_px(page, short_page):
    _, _, seen, _ = page
    for shown in (seen, short_page):
        cards = shown.probes["cards"]
        assert len(cards) == 4
        assert bare_cards(cards) == []
        assert overflowing_cards(cards) == []
    values = {c["title"]: c["value"] for c in seen.probes["cards"]}
    assert values["Next peak"].endswith("demand units (the query's)")
    assert values["Placeholder pods now"].endswith("pod(s)")
