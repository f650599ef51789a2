"""The backtest's text tables say what each number is: the promise with its cost ratios, and the
interrupted cluster's change in waiting with its sign explained."""

from __future__ import annotations

from types import SimpleNamespace

from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.results import InterruptionReport, InterruptionRow
from predictive_headroom.backtest.text import format_interruptions, format_promise
from predictive_headroom.pages.format import fmt_signed
from predictive_headroom.replay.simulator import Metrics


def _row(name: str, calm: tuple[float, float], interrupted: tuple[float, float]) -> InterruptionRow:
    return InterruptionRow(name, Metrics(calm[0], calm[1], 3), Metrics(*interrupted, 3), 4, 1.5)


def test_a_negative_change_in_waiting_is_named_as_a_difference_and_explained():
    report = InterruptionReport(
        0.05 / 24,
        120.0,
        0,
        [
            _row("reactive", (50, 100.0), (62, 100.4)),
            _row("forecast", (40, 110.0), (10, 110.0)),  # the component absorbed ordinary bursts
            _row("naive", (20, 105.00001), (20, 105.0)),  # a hair fewer node-hours: not -0.0
        ],
    )
    text = format_interruptions(SimpleNamespace(interruptions=report))
    header = text.splitlines()[0]
    assert "change in waiting" in header and "caused by" not in header
    forecast = next(line for line in text.splitlines() if line.startswith("forecast"))
    assert forecast.split()[1:4] == ["10", "40", "-30"]
    naive = next(line for line in text.splitlines() if line.startswith("naive"))
    assert "-0.0" not in naive and naive.split()[5] == "0.0"
    assert "change in waiting: a change below 0 means the run with interruptions left fewer" in text
    assert report.to_dict()["strategies"][2]["node_hours_change"] == 0.0


def test_signed_numbers_keep_their_sign_and_zero_has_none():
    assert [fmt_signed(v, 1) for v in (0.44, -0.04, -0.0, 12.0, -30.26)] == [
        "+0.4",
        "0.0",
        "0.0",
        "+12.0",
        "-30.3",
    ]


def test_the_promise_table_prints_static_over_promise():
    entry = {
        "protection": 0.9,
        "realized_protection": 0.776,
        "unserved_pod_minutes": 120.0,
        "overhead_node_hours": 50.0,
        "overhead_node_hours_per_day": 3.1,
        "reserve_walk_forward_overhead_node_hours": None,
        "static_hindsight_overhead_node_hours": 16.0,
        "ratios": {"reserve/promise": None, "static_hindsight/promise": 0.32},
        "reactive_unserved_pod_minutes": 536.0,
        "days": 16.0,
        "reserve_walk_forward_best_protection": 0.7,
    }
    lines = format_promise([PromiseEntry.from_dict(entry)]).splitlines()
    assert lines[0].split("  ")[-1].strip() == "static ÷ promise"
    assert lines[2].split() == [
        "90%",
        "77.6%",
        "120",
        "50.0",
        "3.1",
        "not",
        "reached",
        "16.0",
        "-",
        "0.32",
    ]
