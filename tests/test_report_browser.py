"""The report made by the real CLI from a real series, opened in real headless Chromium."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from browser_cdp import chromium_available, visit
from page_layout import BURST_CHART, GLOSSARY_SEEN, PAGE_WIDTH, demand_hidden, inside, page_fits
from PIL import Image

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

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not chromium_available(),
        reason="needs Debian chromium at /usr/bin/chromium (`make test` installs it)",
    ),
]

AZURE = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "azure_v2_vm_cpu_total_5min.csv"
)
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
    assert (
        main(
            [
                "report",
                "--data",
                str(work / "azure.csv"),
                "--config",
                str(work / "policy.yaml"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    seen = visit(
        (out / "index.html").as_uri(),
        work / "profile",
        probes={"width": PAGE_WIDTH, "burst": BURST_CHART, "glossary": GLOSSARY_SEEN},
    )
    (work / "report.png").write_bytes(seen.png)
    return out, json.loads((out / "report.json").read_text()), seen


def test_the_screenshot_shows_a_page_not_a_blank(page):
    _, _, seen = page
    pixels = np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB"), dtype=float)
    assert pixels.shape == (2400, 1280, 3)
    inked = (pixels.min(axis=2) < 200).mean()  # text, lines, plot bands
    assert inked > 0.03, f"only {inked:.1%} of the screenshot is not near-white"
    assert pixels.std() > 15
    # Colour, not just text: the forecast blue is on screen.
    assert ((pixels[..., 2] > 180) & (pixels[..., 0] < 80)).mean() > 0.0005


def test_the_page_loads_nothing_from_the_network_and_logs_no_errors(page):
    out, _, seen = page
    assert seen.console_errors == []
    assert seen.requests == [(out / "index.html").as_uri()]
    html = (out / "index.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", html, re.I)
    assert "<script" not in html.lower()


def test_the_key_sections_are_on_the_page(page):
    _, _, seen = page
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
    _, data, seen = page
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
                fmt_lead(peak["lead_seconds"]),
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
    _, data, seen = page
    fit = data["pools"][0]["burst"]["fit"]
    assert (
        fit["kind"] == "current"
        and fit["history_end"] == data["pools"][0]["forecast"]["history_end"]
    )
    assert "Read from the fit the plan uses now" in seen.text
    assert "The backtest page shows the walk-forward refits instead" in seen.text


def test_the_page_fits_a_1280_px_window(page):
    _, _, seen = page
    assert seen.probes["width"]["viewport"] == 1280
    assert page_fits(seen.probes["width"]) == []


def test_the_burst_chart_keeps_its_last_tick_and_shows_demand_over_the_allowance(page):
    _, _, seen = page
    burst = seen.probes["burst"]
    ticks = [t for t in burst["texts"] if ":" in t["text"]]
    assert ticks and ticks[-1]["text"] == "00:00"  # the day ends on the hour: its last tick
    clipped = [t["text"] for t in burst["texts"] if not inside(t["box"], burst["svg"])]
    assert clipped == []
    assert demand_hidden(burst) <= len(burst["demand_stacks"]) // 50  # a stray pixel at a spike


def test_the_words_are_explained_on_the_page(page):
    _, _, seen = page
    words = seen.probes["glossary"]
    for term in ("q=0.95", "score drop when shuffled", "time of day (sin)/(cos)", "MASE"):
        assert term in words["terms"], term
    titled = {text for text, _ in words["titled"]}
    assert "score drop when shuffled" in titled and any(t.startswith("q=") for t in titled)
    assert {"time of day (sin)", "time of day (cos)"} <= titled  # the burst model's features
