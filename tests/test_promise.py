"""The promise rule (`replay/promise.py`): the strictness learned from the protection kept on
the days after each choice, a plain `short` when nothing kept it, only the past read."""

from __future__ import annotations

import numpy as np
import pytest

from predictive_headroom.replay.promise import (
    Candidate,
    Ledger,
    Status,
    choose,
    inner_choices,
    reserve_walk_forward,
)
from predictive_headroom.replay.simulator import ClusterSpec, score, simulate
from predictive_headroom.replay.tuning import Setting, Walk

DAYS = 15


def book(unserved: list[list[float]], cost: list[float], reactive: float = 100.0) -> Ledger:
    """A ledger of candidates q=0.5 +0, +1, ... with these daily unserved pod-minutes and daily
    overhead node-hours (reactive: `reactive` pod-minutes waiting and 100 node-hours a day)."""
    n = len(unserved[0])
    cands = tuple(Candidate(Setting(0.5, 300.0), k) for k in range(len(unserved)))
    return Ledger(
        cands,
        np.array(unserved, dtype=float),
        np.array([[100.0 + c] * n for c in cost]),
        np.full(n, reactive),
        np.full(n, 100.0),
    )


def kept(b: Ledger, f: float, first: int) -> float:
    picks = inner_choices(b, 0.9, f, 7)
    ks = np.arange(first, b.periods)
    return 1 - b.unserved[picks[ks], ks].sum() / b.reactive[ks].sum()


def test_a_steady_history_keeps_the_target_as_asked():
    b = book([[10] * DAYS, [5] * DAYS, [0] * DAYS], [1, 2, 3])
    c = choose(b, 0.9)
    assert (c.status, c.strictness, c.candidate.reserve) == (Status.KEPT, 1.0, 0)
    assert c.kept == pytest.approx(0.9) and c.expected == pytest.approx(0.9)
    assert c.overhead_node_hours == pytest.approx(7.0)


def test_a_lucky_week_is_caught_by_the_margin_its_past_choices_needed():
    # The cheap candidate leaves 8% waiting for seven days, then 30% on the eighth: its week
    # always looks fine just before the bad day, so asked as is the rule falls short on it.
    lucky = [8] * 7 + [30] + [8] * 7 + [30]
    b = book([lucky, [8] * 16, [0] * 16], [1, 2, 3])
    assert kept(b, 1.0, 9) == pytest.approx(1 - (6 * 8 + 30) / 700)  # 88.9%: short
    c = choose(b, 0.9)
    assert (c.status, c.strictness) == (Status.KEPT, 0.6)
    assert c.kept == pytest.approx(1.0) and c.candidate.reserve == 2


def test_when_nothing_kept_the_target_it_says_so_and_holds_the_most_protective():
    b = book([[50] * DAYS, [30] * DAYS, [20] * DAYS], [1, 2, 10])
    c = choose(b, 0.9)
    assert c.status == Status.SHORT
    assert c.candidate.reserve == 2 and c.kept == pytest.approx(0.8)


def test_the_choice_reads_only_the_days_before_it():
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 20, (3, DAYS))
    b = book(u.tolist(), [1, 2, 3])
    changed = u.copy()
    changed[:, 10:] = 99.0
    for k in range(1, 11):
        assert choose(b.cut(0, k), 0.9) == choose(book(changed.tolist(), [1, 2, 3]).cut(0, k), 0.9)


def test_the_daily_reserve_takes_the_smallest_n_that_reached_the_target_the_week_before():
    cluster = ClusterSpec(node_slots=1, lag_minutes=3, scale_down_minutes=0)
    day = 1440
    pods = np.zeros(10 * day, dtype=np.int64)
    pods[np.arange(60, pods.size, 240)] = 2  # a 2-pod burst every 4 hours, foreseen by no one
    runs = {n: simulate(pods, np.full(pods.size, n), cluster) for n in range(4)}
    walk = Walk.daily(pods, cluster, 7 * day, known_lag=2, max_replicas=100)
    assert walk.period_starts == tuple(range(7 * day, pods.size, day))
    wf = reserve_walk_forward(runs, runs[0], walk, 0.9)
    # Two spare slots absorb every burst; one absorbs half: the rule holds 2 from the first day.
    assert [c.candidate.reserve for c in wf.choices] == [2, 2, 2]
    assert wf.unserved_pod_minutes == score(runs[2], 7 * day).unserved_pod_minutes == 0


def test_a_reserve_replayed_for_the_promise_is_capped_where_the_planner_caps_it():
    """The backtest's promise adds a reserve as the daemon's planner does: never above
    maxReplicas (it used to add it with no cap, so its protection was one the daemon could not
    hold where maxReplicas binds)."""
    from test_backtest import SeasonalNaiveForecaster, series

    from predictive_headroom.backtest.promise_measure import prepare
    from predictive_headroom.backtest.results import BacktestSettings
    from predictive_headroom.backtest.run import run_backtest
    from predictive_headroom.core.planner import with_reserve
    from predictive_headroom.policy.config import Pool
    from predictive_headroom.replay.promise import placeholders_of
    from predictive_headroom.replay.setup import WhatIf

    pool = Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": "ns", "name": "ph"},
            "maxReplicas": 6,
            "forecast": {"query": "q", "demandPerReplica": 5},
        }
    )
    settings = BacktestSettings(replay=WhatIf(warmup_seconds=3 * 86400.0), protections=(0.95,))
    result = run_backtest(series(6), pool, settings, forecaster=SeasonalNaiveForecaster())
    assert result.settings.max_replicas == 6
    r = prepare(result)
    reserves = {c.reserve for c in r.book.candidates}
    assert max(reserves) > 6  # reserves larger than the cap were tried ...
    for cand in r.book.candidates:
        ph = placeholders_of(cand, r.base, result.pods.size, 6)
        assert ph.max() <= 6  # ... and held within it, by the planner's own rule
        assert np.array_equal(ph, with_reserve(r.base[cand.setting], cand.reserve, 6))


def test_the_calibrated_level_moves_by_the_days_miss_weighted_by_its_waiting():
    """Issue 40's candidate rule (measured in bench/calibration_bench.py, not yet the daemon's):
    a day short of the target raises the working level in proportion to its share of the
    waiting, a day with nothing waiting moves nothing, and the level stays in its range."""
    from predictive_headroom.replay.calibration import DROP, Level

    level = Level.start(0.9)
    assert level.after(None, 0.0, 50.0, 0.1) == level  # nothing waited: nothing learned
    up = level.after(0.8, 100.0, 50.0, 0.1)  # 10 points short on a day twice as busy
    assert up.value == pytest.approx(0.9 + 0.1 * 2 * 0.1)
    down = level.after(1.0, 50.0, 50.0, 0.1)  # 10 points over on a typical day
    assert down.value == pytest.approx(0.89)
    assert level.after(0.0, 1e6, 1.0, 1.0).value == 1.0  # never above everything
    assert level.after(1.0, 1e6, 1.0, 1.0).value == pytest.approx(0.9 - DROP)
