"""The demo's words and figures (issue 49 item 5): one figure rounded one way in the terminal and
on the pages, peaks in placeholders explained, one simulated node described consistently, the
glossary without stutters."""

import re
import time
from itertools import pairwise

import pytest
from test_backtest import POOL, series

from predictive_headroom.commands.demo import heartbeat
from predictive_headroom.commands.forecast import burst_line, burst_summary, peak_worth_words
from predictive_headroom.core.forecast_math import BurstAllowance
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.core.vocabulary import BurstSource
from predictive_headroom.pages.format import forecast_sentence
from predictive_headroom.pages.glossary import GLOSSARY
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf, resolve


@pytest.mark.parametrize(
    "allowance, worth",
    [
        (73.008, "0.37"),  # 0.36504: rounded once it is 0.37 (rounded to 0.365 first, 0.36)
        (72.99, "0.36"),
        (81.1312, "0.41"),
        (0.0, "0.00"),
    ],
)
def test_the_burst_allowance_reads_the_same_in_the_terminal_and_on_the_page(allowance, worth):
    pool = POOL.model_copy(
        update={"forecast": POOL.forecast.model_copy(update={"demand_per_replica": 200})}
    )
    settings = resolve_settings(pool)
    burst = burst_summary(BurstAllowance(allowance, BurstSource.MODEL), settings, 0.0, "quantile")
    terminal = burst_line(burst)
    page = forecast_sentence(
        {"forecast_status": "ok", "ramp": 0.0, "burst": allowance}, 1, 200.0, "5 min"
    )
    assert f"({worth} placeholders' worth)" in terminal
    assert f"{worth} placeholders' worth at 200 a placeholder" in page
    shown = re.search(r": ([\d.,]+) demand units", terminal).group(1)
    assert f"burst allowance of {shown} makes" in page


def test_the_peaks_in_placeholders_say_they_are_before_the_cap():
    words = peak_worth_words(200.0, 20)
    assert "demandPerReplica (200)" in words
    assert "before any cap (maxReplicas 20)" in words
    assert "only the rise expected within the lead time" in words


def test_one_simulated_node_is_described_one_way():
    pool = POOL.model_copy(update={"placeholder": POOL.placeholder.model_copy(update={"cpu": "2"})})
    replay = resolve(series(4), pool, WhatIf(warmup_seconds=2 * 86_400.0))
    assert replay.nodes.node_slots == 8
    assert replay.nodes.cores_per_node == 16.0  # 8 slots of 2-CPU placeholders
    given = WhatIf(warmup_seconds=2 * 86_400.0, nodes=SimulatedNodes(cores_per_node=12.0))
    assert resolve(series(4), pool, given).nodes.cores_per_node == 12.0  # --cores-per-node wins


def test_no_glossary_entry_repeats_a_word():
    stutters = {
        term: m.group(0)
        for term, text in GLOSSARY.items()
        if (m := re.search(r"\b(\w+) \1\b", text))
    }
    assert stutters == {}


def test_the_proportional_strategy_says_which_rule_it_replays():
    assert "nodesPerReplica 1" in GLOSSARY["proportional"]
    assert "one placeholder per node" in GLOSSARY["proportional"]


def test_the_terminal_says_which_rule_the_proportional_row_replays(capsys):
    from dataclasses import replace

    from test_backtest_page import make_result

    from predictive_headroom.commands.backtest import print_text

    result = make_result((10, 12.0))
    print_text(result)
    out = capsys.readouterr().out
    assert (
        "proportional: the pool has no proportional rule, so this row replays CPA linear "
        "nodesPerReplica 1 (one placeholder per node, always)"
    ) in out
    print_text(replace(result, settings=replace(result.settings, proportional_rule="config")))
    assert "proportional: the pool has no" not in capsys.readouterr().out


def test_a_silent_demo_step_says_it_is_still_at_work(capsys):
    """`make demo` never goes quiet: a step that prints nothing for a while gets a line."""
    seen = ""
    with heartbeat("backtest", every=0.5):
        deadline = time.monotonic() + 30
        while seen.count("still at it") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            seen += capsys.readouterr().out
    assert seen.count("  ... backtest: still at it (") >= 2, seen


def test_a_step_that_prints_gets_no_heartbeat(capsys):
    """Only silence gets a line: a step printing every 0.25 s for 4 s gets none, but for a pause
    of a second or more on a loaded machine (allowed a line each second of it)."""
    printed = [time.monotonic()]
    with heartbeat("plan", every=1.0):
        while printed[-1] - printed[0] < 4.0:
            print("a row of the plan", flush=True)
            time.sleep(0.25)
            printed.append(time.monotonic())
    pauses = sum(int((b - a) / 0.9) for a, b in pairwise(printed))  # a line a second of pause
    assert capsys.readouterr().out.count("still at it") <= pauses
