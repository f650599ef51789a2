"""How sure the promise is (issue 62, item 7): tune's rule re-chosen before every unseen week and
judged on that week alone, the range it kept, and the peak-sized fixed N when the worst week is far
below the protection asked (docs/promise.md, "How sure the promise is")."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series

from predictive_headroom.backtest.against_fixed import Judged, replays, span
from predictive_headroom.backtest.choice import decide, recommend_choice
from predictive_headroom.backtest.frontier import protection
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.backtest.weeks import (
    MIN_SEEN_DAYS,
    WEEK_DAYS,
    DaySums,
    PeakFixed,
    UnseenRange,
    Week,
    cuts,
    day_sums,
)
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.replay.promise import PROMISE_QUANTILES
from predictive_headroom.replay.setup import WhatIf

POLICY = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 200
    leadTime: 4m
    protection: 90%
    forecast: {query: demand, demandPerReplica: 5, history: 9d}
"""


@pytest.fixture(scope="module")
def replayed():
    """Tune's replay of 20 days (17 scored, two whole unseen weeks) with a fast forecaster."""
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=3 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0, 1800.0),
        protections=(0.8, 0.9, 0.95, 0.99),
        burst_view=False,
    )
    pool = parse_policy(POLICY, "t").pools[0]
    result = run_backtest(series(20, seed=3), pool, settings, forecaster=SeasonalNaiveForecaster())
    return replays(result, (0.9,))


def test_the_day_sums_make_the_spans_the_comparisons_make(replayed):
    sums = day_sums(replayed)
    last = len(sums.edges) - 1
    for i, j in ((0, 3), (3, last), (0, last)):
        fast = sums.span(i, j)
        slow = span(replayed.result, replayed.replayed, fast.lo, fast.hi)
        assert (fast.lo, fast.hi, fast.days) == (slow.lo, slow.hi, slow.days)
        assert fast.reactive_unserved == pytest.approx(slow.reactive_unserved)
        assert fast.reactive_node_hours == pytest.approx(slow.reactive_node_hours)
        assert [p.label for p in fast.static] == [p.label for p in slow.static]
        for a, b in zip(fast.static, slow.static, strict=True):
            assert a.overhead == pytest.approx(b.overhead, abs=1e-6)
            assert a.unserved == pytest.approx(b.unserved)


def test_every_unseen_week_is_chosen_on_the_days_before_it(replayed):
    rec = recommend_choice(replayed, 0.9)
    weeks = rec.weeks
    assert weeks is not None and weeks.unit == "week"
    sums = day_sums(replayed)
    pairs, _ = cuts(sums)
    assert len(weeks.weeks) + weeks.quiet == len(pairs) == 2
    judged = iter(weeks.weeks)
    for first, stop in pairs:
        unseen = sums.span(first, stop)
        if unseen.reactive_unserved <= 0:
            continue
        week = next(judged)
        before = span(replayed.result, replayed.replayed, replayed.result.scored_from, unseen.lo)
        made = decide(replayed, before, 0.9)
        assert week.label == made.label()
        assert week.judged.kept == pytest.approx(unseen.judge(made.run(replayed)).kept)
    assert weeks.low <= weeks.median <= weeks.high
    said = rec.says()
    assert f"it kept {100 * weeks.low:.0f}" in said and "each chosen on the days before it" in said
    assert rec.to_dict()["unseen_weeks"]["weeks"][0]["chosen"] == weeks.weeks[0].label


def test_the_peak_sized_fixed_n_kept_the_protection_on_every_week(replayed):
    weeks = recommend_choice(replayed, 0.95).weeks
    assert weeks is not None and weeks.peak is not None and weeks.peak.replicas is not None
    sums = day_sums(replayed)
    pairs = [(a, b) for a, b in cuts(sums)[0] if sums.span(a, b).reactive_unserved > 0]
    ru = sums.reactive[0]

    def worst(n: int) -> float:
        su = sums.static[n][0]
        return min(protection(su[b] - su[a], ru[b] - ru[a]) for a, b in pairs)

    n = weeks.peak.replicas
    assert worst(n) >= 0.95 - 1e-9
    assert all(worst(m) < 0.95 - 1e-9 for m in sums.static if m < n)  # the fewest that did


@pytest.mark.parametrize(
    ("days", "unit", "count"),
    [
        (MIN_SEEN_DAYS - 1, "day", 0),  # too short to choose on anything
        (MIN_SEEN_DAYS + 1, "day", 1),
        (MIN_SEEN_DAYS + WEEK_DAYS - 1, "day", WEEK_DAYS - 1),
        (MIN_SEEN_DAYS + WEEK_DAYS, "week", 1),
        (MIN_SEEN_DAYS + 3 * WEEK_DAYS + 2, "week", 3),
    ],
)
def test_cuts_are_whole_weeks_back_from_the_end_else_days(days, unit, count):
    edges = np.arange(days + 1) * 1440
    sums = DaySums(edges, (np.zeros(edges.size), np.zeros(edges.size)), {})
    pairs, got = cuts(sums)
    assert len(pairs) == count
    if count:
        assert got == unit and pairs[-1][1] == days  # the last ends where the history does
        assert pairs[0][0] >= MIN_SEEN_DAYS
        assert all(a[1] == b[0] for a, b in pairwise(pairs))


def _range(kept: list[float], peak: PeakFixed | None, asked: float = 0.95) -> UnseenRange:
    weeks = tuple(Week(0.0, 7.0, "protection: 95%", Judged(k, 10.0, 10.0)) for k in kept)
    return UnseenRange(asked, weeks, 1, peak)


@pytest.mark.parametrize(
    ("kept", "peak", "words", "reach"),
    [
        ([0.96, 1.0, 0.97], None, "it kept 96-100%, median 97%; 1 week with nothing", False),
        ([0.93, 0.99], None, "it kept 93-99%", False),  # 2 points under: within reach
        (
            [0.66, 1.0, 0.85],
            PeakFixed(250, 3412.0, 0.95),
            "95% is not something this history lets any rule promise: its worst unseen week kept "
            "66.0%; sized on the peak, 250 fixed placeholders kept 95% on every week for 3,412.0",
            True,
        ),
        ([0.5], PeakFixed(None, 90.0, 0.8), "(no fixed N tried kept 95% on every week)", True),
    ],
)
def test_the_range_says_how_sure_the_promise_is(kept, peak, words, reach):
    got = _range(kept, peak)
    assert got.out_of_reach is reach
    assert words in got.says()
    assert got.to_dict()["out_of_reach"] is reach


def test_last_run_and_the_report_say_the_same_range():
    """The re-tune carries the range its choice was judged by (`Tuning.weeks`): `/last-run`
    (`to_dict`), the report's JSON and its page say it in the same words."""
    from predictive_headroom.app.tuning import Tuning
    from predictive_headroom.core.vocabulary import TuningStatus
    from predictive_headroom.report.html import promise_view

    judged = _range([0.66, 1.0, 0.85], PeakFixed(250, 3412.0, 0.95))
    tuning = Tuning("web", TuningStatus.TUNED, 0.9, 300.0, 0.95, "why", 0.0, weeks=judged.to_dict())
    said = judged.says()
    assert tuning.to_dict()["unseen_weeks"]["says"] == said
    assert tuning.report()["unseen_weeks"]["says"] == said
    assert promise_view(tuning.report())["unseen_weeks"] == said
    assert (
        Tuning("web", TuningStatus.TUNED, 0.9, 300.0, 0.95, "why", 0.0).to_dict()["unseen_weeks"]
        is None
    )
