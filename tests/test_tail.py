"""The tail-aware reserve (`replay/tail.py`): growth over the lead time, a generalized Pareto fit
over a threshold, the N whose expected unabsorbed share is within 1 - P, only the past read."""

from __future__ import annotations

import math

import numpy as np
import pytest

from predictive_headroom.core.series import History
from predictive_headroom.replay.promise import Candidate, Status, choose
from predictive_headroom.replay.simulator import ClusterSpec
from predictive_headroom.replay.tail import (
    fit_tail,
    growth,
    tail_reserve,
    tail_reserve_at,
    tail_reserve_of,
    tail_reserves_at,
)
from predictive_headroom.replay.tuning import Setting
from tests.test_promise import book

DAY = 1440


@pytest.mark.parametrize(
    ("pods", "lead", "expected"),
    [
        ([0, 0, 5, 0, 0], 2, [5, 5, -5]),  # the worst minute of the next two, minus now
        ([3, 4, 5, 6], 1, [1, 1, 1]),
        ([7, 7, 7], 1, [0, 0]),
        ([1, 2], 3, []),  # no minute has its whole lead time ahead
    ],
)
def test_growth_is_the_worst_of_the_next_lead_minutes_minus_now(pods, lead, expected):
    assert growth(np.array(pods), lead).tolist() == expected


def _true_reserve(xi: float, sigma: float, target: float) -> int:
    """The smallest N with E[(G - N)+] / E[G] <= 1 - target for G = 1 + GPD(xi, sigma)."""
    mean = 1.0 + sigma / (1.0 - xi)
    for n in range(1, 100_000):
        x = n - 1.0
        excess = (sigma + xi * x) / (1.0 - xi) * (1.0 + xi * x / sigma) ** (-1.0 / xi)
        if excess / mean <= 1.0 - target:
            return n
    raise AssertionError("no reserve found")


@pytest.mark.parametrize(("xi", "sigma", "target"), [(0.2, 5.0, 0.9), (0.3, 2.0, 0.95)])
def test_a_known_pareto_tail_gives_the_reserve_its_distribution_implies(xi, sigma, target):
    rng = np.random.default_rng(1)
    g = 1.0 + sigma * (rng.uniform(size=60_000) ** -xi - 1.0) / xi  # 1 + GPD(xi, sigma)
    tail = fit_tail(g)
    assert tail is not None
    assert tail.shape == pytest.approx(xi, abs=0.08)
    expected = _true_reserve(xi, sigma, target)
    assert tail_reserve(tail, target, 10_000) == pytest.approx(expected, rel=0.1, abs=1)


def test_the_reserve_grows_with_the_protection_asked_and_stops_at_the_cap():
    rng = np.random.default_rng(2)
    tail = fit_tail(1.0 + 4.0 * (rng.uniform(size=20_000) ** -0.2 - 1.0) / 0.2)
    assert tail is not None
    sizes = [tail_reserve(tail, p, 10_000) for p in (0.5, 0.8, 0.9, 0.95, 0.99)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert tail_reserve(tail, 0.999, 5) == 5


def test_too_few_growths_give_no_tail():
    assert fit_tail(np.array([0.0] * 500 + [3.0] * 10)) is None


def _bursty(days: int, seed: int) -> np.ndarray:
    """App pods at 20 with a burst every hour lasting 10 minutes, of 3 pods plus a Pareto tail."""
    rng = np.random.default_rng(seed)
    pods = np.full(days * DAY, 20, dtype=np.int64)
    for start in range(30, pods.size - 20, 60):
        pods[start : start + 10] += 3 + int(5 * rng.pareto(3.0))
    return pods


def test_the_reserve_reads_only_what_was_known_at_its_instant():
    pods = _bursty(30, 3)
    at, lag = 20 * DAY, 2
    before = tail_reserve_at(pods, at, lag, 3, 0.95)
    changed = pods.copy()
    changed[at - lag :] += 500  # a burst nobody could have seen yet
    assert tail_reserve_at(changed, at, lag, 3, 0.95) == before
    seen = pods.copy()
    seen[at - lag - 200 : at - lag - 190] += 500  # the same burst, known in time
    assert tail_reserve_at(seen, at, lag, 3, 0.95) != before


def test_one_fit_gives_the_reserve_of_every_protection_asked():
    pods = _bursty(30, 5)
    targets = (0.8, 0.9, 0.95, 0.99)
    fitted = fit_tail(growth(pods[: 20 * DAY - 2], 3))
    assert fitted is not None
    expected = [tail_reserve(fitted, t, int(pods[: 20 * DAY - 2].max())) for t in targets]
    assert tail_reserves_at(pods, 20 * DAY, 2, 3, targets) == expected
    assert expected == sorted(expected) and expected[0] < expected[-1]
    assert tail_reserves_at(pods, 100, 2, 3, targets) == [None] * 4  # too little to fit


def test_a_record_burst_neither_vanishes_after_a_week_nor_sets_the_reserve_alone():
    pods = _bursty(30, 4)
    record = 10 * DAY + 600
    with_record = pods.copy()
    with_record[record : record + 10] += 200
    at = record + 10 * DAY  # ten days on: a seven-day window has forgotten it
    plain = tail_reserve_at(pods, at, 2, 3, 0.95)
    after = tail_reserve_at(with_record, at, 2, 3, 0.95)
    assert plain is not None and after is not None
    assert plain < after < 200


def test_the_reserve_from_a_demand_history_matches_the_pods_it_makes():
    pods = _bursty(10, 5)
    times = 1_700_000_040.0 + 60.0 * np.arange(pods.size)
    history = History(times, pods.astype(float) * 2.0, "demand")
    cluster = ClusterSpec(node_slots=4, lag_minutes=3, hpa_hold_minutes=0)
    seen = float(times[-1])
    n = tail_reserve_of(history, seen, 2.0, cluster, 0.9)
    assert n == tail_reserve_at(pods, pods.size, 0, 3, 0.9)
    assert tail_reserve_of(history, float(times[0]) - 60.0, 2.0, cluster, 0.9) is None


def test_when_short_it_holds_the_tail_reserve_if_cheaper_than_the_most_protective():
    # Nothing keeps 90% on these days; without a tail the rule holds the most protective (+2,
    # 10 node-hours a day). The tail-aware reserve (+3 here, a candidate like the others) costs 4.
    b = book([[50] * 15, [30] * 15, [20] * 15, [40] * 15], [1, 2, 10, 4])
    assert choose(b, 0.9).candidate.reserve == 2
    c = choose(b, 0.9, tail=3)
    assert c.status == Status.SHORT and c.candidate == Candidate(Setting(0.5, 300.0), 3)
    assert math.isclose(c.overhead_node_hours, 7 * 4.0)
    # When a strictness kept the target the tail changes nothing.
    ok = book([[10] * 15, [5] * 15, [0] * 15, [0] * 15], [1, 2, 3, 0.5])
    assert choose(ok, 0.9, tail=3) == choose(ok, 0.9)
