"""The price of a promise (`replay/promise_price.py`): where keeping P cost more than static
headroom in hindsight, both figures and the highest protection the history kept, with its price."""

from __future__ import annotations

import numpy as np
import pytest

from predictive_headroom.core.price import Price
from predictive_headroom.replay.promise import Candidate, Ledger
from predictive_headroom.replay.promise_price import Level, price_of_promise, static_in_hindsight
from predictive_headroom.report.html import promise_view

PRICE = Price(0.5, 8, "EUR", "a node-hour at 0.5 EUR")
NEWS = [  # twitter-like: the promise is dearer than static in hindsight and falls short above 80%
    Level(0.8, 0.81, 40.0, 30.0),
    Level(0.9, 0.776, 379.8, 123.0),
    Level(0.95, 0.846, 596.8, 231.5),
    Level(0.99, 0.90, 900.0, None),
]


def test_a_promise_dearer_than_static_in_hindsight_says_both_figures_and_what_was_kept():
    out = price_of_promise(NEWS, 0.95, PRICE)
    assert out["dearer_than_static"] is True
    assert out["says"] == (
        "keeping 95% cost 596.8 overhead node-hours a day (298.40 EUR) walk-forward; static "
        "headroom chosen in hindsight would have absorbed the same 84.6% for 231.5 overhead "
        "node-hours a day (115.75 EUR); the history kept 80% (kept 81.0%) for 40.0 overhead "
        "node-hours a day (20.00 EUR)"
    )
    assert out["offer"]["asked"] == 0.8 and out["offer"]["money_per_day"] == 20.0
    assert [lv["asked"] for lv in out["frontier"]] == [0.8, 0.9, 0.95, 0.99]
    row = out["frontier"][2]
    assert row == {
        "asked": 0.95,
        "kept": 0.846,
        "held": False,
        "overhead_node_hours_per_day": 596.8,
        "money_per_day": 298.4,
        "static_hindsight_node_hours_per_day": 231.5,
        "static_hindsight_money_per_day": 115.75,
    }
    assert out["frontier"][3]["static_hindsight_money_per_day"] is None


def test_a_promise_cheaper_than_static_says_nothing_and_without_prices_shows_no_money():
    shaped = [Level(0.9, 0.977, 17.0, 45.0), Level(0.95, 0.977, 17.0, 45.0)]
    out = price_of_promise(shaped, 0.95)
    assert out["dearer_than_static"] is False and out["says"] == ""
    assert out["offer"]["asked"] == 0.95 and out["offer"]["money_per_day"] is None


def test_when_no_level_was_kept_it_says_so():
    out = price_of_promise([Level(0.9, 0.5, 20.0, 5.0), Level(0.95, 0.6, 30.0, 10.0)], 0.9)
    assert out["offer"] is None
    assert out["says"].endswith("; the history kept none of 90%, 95%")


def test_static_in_hindsight_is_the_static_curve_read_at_the_same_protection_on_those_days():
    static = Ledger(
        tuple(Candidate(None, n) for n in (0, 2, 5)),
        np.array([[100.0, 100.0, 100.0], [40.0, 30.0, 20.0], [0.0, 10.0, 0.0]]),
        np.array([[10.0] * 3, [12.0] * 3, [15.0] * 3]),
        np.full(3, 100.0),
        np.full(3, 10.0),
    )
    # on days 1-2 no headroom (0 a day) leaves 200, N=2 50 (75% for 4), N=5 10 (95% for 10):
    # read along that curve, from no headroom, as `core.curve` reads every curve
    assert static_in_hindsight(static, 0.7, 1, 3) == pytest.approx(4 * 0.7 / 0.75)
    assert static_in_hindsight(static, 0.75, 1, 3) == pytest.approx(4.0)  # N=2 exactly
    assert static_in_hindsight(static, 0.9, 1, 3) == pytest.approx(4 + 6 * 0.15 / 0.2)
    assert static_in_hindsight(static, 1.0, 0, 3) is None
    assert static_in_hindsight(static, None, 0, 3) == 0.0


def test_the_report_page_says_the_price_of_the_promise():
    promise = {"asked": 0.95, "kept": 0.846, "price": price_of_promise(NEWS, 0.95, PRICE)}
    view = promise_view(promise)
    assert view is not None and view["price"].startswith("keeping 95% cost 596.8 overhead")
    assert promise_view({"asked": 0.95, "kept": 0.99})["price"] == ""


def test_tune_prints_the_price_and_the_frontier(capsys):
    from predictive_headroom.commands.tune import _print_frontier

    _print_frontier(price_of_promise(NEWS, 0.95, PRICE))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("the price of the promise: keeping 95% cost 596.8")
    assert lines[3].split() == ["90%", "77.6%", "379.8", "189.90", "123.0"]
    assert lines[5].split() == ["99%", "90.0%", "900.0", "450.00", "–"]
