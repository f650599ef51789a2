"""Advice within a budget (`tune --budget`, "at your spend"): the most protection a budget bought on
the days the choice saw, judged on the days it did not; nothing when no setting meets it; and the
bad input of `--budget`."""

from __future__ import annotations

import argparse
import json

import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series, write_csv

from predictive_headroom.backtest.against_fixed import MAX_CURRENT, Recommended, replays
from predictive_headroom.backtest.budget import (
    at_your_spend,
    fixed_option,
    largest_fixed,
    within_budget,
)
from predictive_headroom.backtest.choice import seen_unseen
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.cli import main
from predictive_headroom.commands import CommandError
from predictive_headroom.commands.budget import BudgetFlag, budget_arg, budget_node_hours
from predictive_headroom.core.price import Price
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
PRICED = POLICY + "cost: {nodeHourPrice: 2.0, currency: EUR}\n"


@pytest.fixture(scope="module")
def replayed():
    """Tune's replay of 12 days (6 scored) of bursty daily demand, with a fast forecaster."""
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


def _options(r):
    """Every level's (kept, cost a day) on the seen days, and the seen span."""
    seen, _, _ = seen_unseen(r)
    return {p: seen.judge(w.run) for p, w in r.walks.items()}, seen


@pytest.mark.parametrize("share", [0.3, 0.6, 1.0, 1.5, 4.0])
def test_the_budget_buys_the_most_protection_any_setting_within_it_kept(replayed, share):
    levels, seen = _options(replayed)
    budget = share * max(j.per_day for j in levels.values())
    advice = within_budget(replayed, budget, 0.9, f"{budget:g} a day")
    rec = advice.recommendation
    assert rec is not None
    assert rec.seen.per_day <= budget + 1e-9  # within the budget on the days it was chosen on
    fixed = largest_fixed(replayed, seen, budget)
    assert fixed is not None
    rivals = [j.kept for j in levels.values() if j.per_day <= budget + 1e-9] + [fixed.seen.kept]
    assert rec.seen.kept == pytest.approx(max(rivals))  # no setting within it kept more
    assert rec.unseen is not None and rec.unseen_days > 0  # judged on the days it did not see
    assert advice.says().startswith(f"recommended within {budget:g} a day: {rec.label()}")
    if rec.kind == Recommended.FIXED:
        assert rec.replicas == int(fixed.value)


def test_the_largest_fixed_n_within_a_budget_is_the_last_that_fits(replayed):
    seen, _, _ = seen_unseen(replayed)
    assert int(largest_fixed(replayed, seen, 1e12).value) == MAX_CURRENT  # every N fits
    budget = 0.5 * seen.judge(replayed.walks[0.99].run).per_day
    found = largest_fixed(replayed, seen, budget)
    assert found is not None
    n = int(found.value)
    assert fixed_option(replayed, seen, n).seen.per_day <= budget + 1e-9
    assert fixed_option(replayed, seen, n + 1).seen.per_day > budget


def test_a_budget_no_setting_meets_recommends_nothing(replayed):
    seen, _, _ = seen_unseen(replayed)
    one = fixed_option(replayed, seen, 1).seen.per_day
    levels, _ = _options(replayed)
    floor = min([one, *(j.per_day for j in levels.values())])
    advice = within_budget(replayed, 0.5 * floor, 0.9, "almost nothing")
    assert advice.recommendation is None  # not the cheapest miss
    said = advice.says()
    assert "nothing recommended" in said and advice.cheapest.label() in said
    assert advice.to_dict()["recommendation"] is None


@pytest.mark.parametrize("n", [1, 3, 10])
def test_at_your_spend_keeps_your_n_unless_a_level_kept_more_for_no_more(replayed, n):
    spend = at_your_spend(replayed, n)
    theirs = spend.theirs.seen
    levels, _ = _options(replayed)
    richer = [p for p, j in levels.items() if j.per_day <= theirs.per_day + 1e-9]
    richer = [p for p in richer if levels[p].kept > theirs.kept + 1e-9]
    said = spend.says()
    if spend.better is None:
        assert richer == [] and said.startswith(f"at your spend: keep {n} (")
    else:
        assert spend.better.value in richer
        assert spend.better.seen.per_day <= theirs.per_day + 1e-9
        assert said.startswith(f"at your spend: {spend.better.label()} keeps more")
    assert spend.theirs_unseen is not None and "which it did not see" in said


# -- the flag --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("30", 30.0, None),
        ("30nh", 30.0, None),
        ("30 node-hours", 30.0, None),
        ("40USD", 40.0, "USD"),
        ("40 usd", 40.0, "USD"),
        ("12.5 EUR", 12.5, "EUR"),
    ],
)
def test_a_budget_is_node_hours_or_money_with_its_currency(text, amount, currency):
    flag = budget_arg(text)
    assert (flag.amount, flag.currency) == (amount, currency)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0", "more than 0"),
        ("-5", "more than 0"),
        ("0USD", "more than 0"),
        ("$40", "currency code, not '$'"),
        ("40€", "currency code, not '€'"),
        ("40 dollars", "neither node-hours nor a currency code"),
        ("thirty", "not an amount"),
        ("nan", "not an amount"),
    ],
)
def test_a_bad_budget_is_refused_with_the_forms_it_takes(text, says):
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        budget_arg(text)
    assert says in str(exc.value) and "--budget 30" in str(exc.value)


def test_money_is_priced_the_one_way_money_is_priced():
    price = Price(1.6, 16, "USD", "a node-hour at 1.6 USD")
    assert budget_node_hours(BudgetFlag(40.0, "USD", "40USD"), price)[0] == pytest.approx(25.0)
    assert budget_node_hours(BudgetFlag(30.0, None, "30"), price)[0] == 30.0
    with pytest.raises(CommandError, match="--budget 40EUR: the policy prices headroom in USD"):
        budget_node_hours(BudgetFlag(40.0, "EUR", "40EUR"), price)
    with pytest.raises(CommandError, match="--budget 40USD: money needs a price"):
        budget_node_hours(BudgetFlag(40.0, "USD", "40USD"), Price(None, 8, "USD", "no prices"))


@pytest.mark.parametrize("value", ["0", "-3", "$40", "40 dollars"])
def test_a_bad_budget_exits_2_naming_the_flag(tmp_path, capsys, value):
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    csv = write_csv(tmp_path / "d.csv", series(2))
    with pytest.raises(SystemExit) as exc:
        main(["tune", "-c", str(policy), "--data", str(csv), f"--budget={value}", "-q"])
    assert exc.value.code == 2
    assert "--budget" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("policy", "value", "says"),
    [
        (POLICY, "40USD", "money needs a price"),  # no cost: section, no price
        (PRICED, "40USD", "the policy prices headroom in EUR"),
    ],
)
def test_money_without_a_price_exits_2_before_reading_the_history(
    tmp_path, capsys, policy, value, says
):
    path = tmp_path / "p.yaml"
    path.write_text(policy)
    missing = tmp_path / "not-there.csv"  # never read: the flag is refused first
    code = main(["tune", "-c", str(path), "--data", str(missing), "--budget", value, "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"--budget {value}" in err and says in err


@pytest.mark.slow
def test_tune_prints_the_budget_advice_and_the_line_at_your_spend(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        "predictive_headroom.commands.tune.default_forecaster", SeasonalNaiveForecaster
    )
    policy = tmp_path / "p.yaml"
    policy.write_text(PRICED)
    csv = write_csv(tmp_path / "d.csv", series(12, seed=3))
    common = ["tune", "-c", str(policy), "--data", str(csv), "--current", "3", "-q"]
    grid = ["--windows", "5m,30m", "--warmup", "6d"]
    assert main([*common, *grid, "--budget", "30EUR", "-o", "json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    rec = out["recommendation"]
    assert out["budget"]["overhead_node_hours_per_day"] == pytest.approx(15.0)  # 30 EUR at 2 EUR
    assert rec is not None and rec["seen"]["overhead_node_hours_per_day"] <= 15.0 + 1e-3
    assert out["yaml"][0] in (f"minReplicas: {rec['replicas']}", f"protection: {rec['label'][12:]}")
    assert [s["replicas"] for s in out["at_your_spend"]] == [3]
    assert out["at_protection"]["asked"] == 0.9  # tune's rule at the protection asked, kept aside
    main([*common, *grid, "--budget", "30EUR"])
    text = capsys.readouterr().out
    assert out["budget"]["says"] in text and out["at_your_spend"][0]["says"] in text
    assert "at your spend: " in text
    code = main([*common, *grid, "--budget", "0.001"])  # less than any setting costs
    text = capsys.readouterr().out
    assert code == 1 and "nothing recommended" in text and "paste into the pool" not in text
