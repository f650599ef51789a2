"""Tune's decision rule and its knobs (`backtest.choice.ChoiceRule`), each read on the same replay:
the tolerance for a level missed on the seen days, the level asked only, and fixed headroom when
too few pod-minutes waited to judge the forecast (docs/promise.md, "Tune's rule judged on what was
asked")."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series

from predictive_headroom.backtest.against_fixed import Recommended, replays
from predictive_headroom.backtest.choice import (
    RULE,
    ChoiceRule,
    decide,
    recommend_choice,
    seen_unseen,
)
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
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
NEVER = 1e12
"""A margin or an event count no replay reaches."""


@pytest.fixture(scope="module")
def replayed():
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=6 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0, 1800.0),
        protections=(0.8, 0.9, 0.95, 0.99),
        burst_view=False,
    )
    pool = parse_policy(POLICY, "t").pools[0]
    result = run_backtest(series(12, seed=3), pool, settings, forecaster=SeasonalNaiveForecaster())
    return replays(result, (0.9,))


def _seen_kept(r, p):
    seen, _, _ = seen_unseen(r)
    return seen.judge(r.walks[p].run).kept


def test_pasted_on_the_seen_part_and_judged_on_the_unseen(replayed):
    rec = recommend_choice(replayed, 0.9)
    seen, unseen, _ = seen_unseen(replayed)
    made = decide(replayed, seen, 0.9)
    assert rec.label() == made.label() and rec.held_out is None
    assert unseen is not None and rec.unseen is not None
    assert rec.unseen.kept == pytest.approx(unseen.judge(made.run(replayed)).kept)


def test_on_all_days_pastes_the_decision_on_every_day_judged_by_the_one_before(replayed):
    """Issue 62, item 7's variant (measured, not adopted): the choice pasted is made on every
    scored day, as the weekly range measures the rule; the single figure judges the rule chosen
    on the seen part, on the days it did not see (walk-forward)."""
    rec = recommend_choice(replayed, 0.9, replace(RULE, on_all_days=True))
    seen, unseen, _ = seen_unseen(replayed)
    rule = replace(RULE, on_all_days=True)
    pasted, before = decide(replayed, replayed.whole, 0.9, rule), decide(replayed, seen, 0.9, rule)
    assert rec.label() == pasted.label() and rec.why == pasted.why
    assert rec.held_out == before.label() == rec.to_dict()["unseen_chosen"]
    assert unseen is not None and rec.unseen is not None
    assert rec.unseen.kept == pytest.approx(unseen.judge(before.run(replayed)).kept)
    assert rec.seen.kept == pytest.approx(replayed.whole.judge(pasted.run(replayed)).kept)
    assert f"kept {100 * rec.unseen.kept:.1f}%" in rec.says()


@pytest.mark.parametrize("asked", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("tolerance", [0.0, 0.02, 0.1, 1.0])
def test_a_level_missed_by_at_most_the_tolerance_counts_as_kept(replayed, asked, tolerance):
    rec = recommend_choice(replayed, asked, ChoiceRule(margin=NEVER, tolerance=tolerance))
    held = [p for p in replayed.walks if p <= asked and _seen_kept(replayed, p) >= p - tolerance]
    if held:
        assert rec.kind == Recommended.PROTECTION and rec.level == max(held)
    else:
        assert rec.kind == Recommended.FIXED


@pytest.mark.parametrize("asked", [0.9, 0.95, 0.99])
def test_the_level_asked_or_fixed_headroom(replayed, asked):
    rule = ChoiceRule(margin=NEVER, tolerance=1.0, lower_levels=False)
    rec = recommend_choice(replayed, asked, rule)
    assert rec.kind == Recommended.PROTECTION and rec.level == asked  # kept within 100 points
    strict = recommend_choice(replayed, asked, ChoiceRule(margin=NEVER, lower_levels=False))
    assert strict.level in (asked, None)
    assert (strict.level == asked) == (_seen_kept(replayed, asked) >= asked - 1e-9)


@pytest.mark.parametrize(("fixed", "kind"), [(False, "protection"), (True, "fixed")])
def test_too_few_events_to_judge(replayed, fixed, kind):
    rec = recommend_choice(replayed, 0.9, ChoiceRule(few_events=NEVER, few_events_fixed=fixed))
    assert rec.kind == kind and "too few to judge" in rec.why
    if fixed:  # sized as a user sizes a fixed Deployment: the fewest that reached 90% seen
        pool = parse_policy(POLICY, "t").pools[0]
        assert rec.yaml(pool)[0] == f"minReplicas: {rec.replicas}"
    else:
        assert rec.level == 0.9


def test_the_rule_tune_uses_is_the_one_adopted():
    """docs/promise.md, "Tune's rule judged on what was asked": measured by
    bench/choice_bench.py on every shared series."""
    assert ChoiceRule(margin=1.10, few_events_fixed=True, tolerance=0.02) == RULE
    assert ChoiceRule(few_events_fixed=False, tolerance=0.0) == ChoiceRule()  # issue 44's
