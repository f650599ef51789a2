"""The `budget:` cap: a pool's overhead node-hours a day, spent since midnight in its time zone plus
the plan ahead, stay within its budget; when they would not, the plan holds what is left spread
over the rest of the day. The rule (`core.budget`), its days (23 and 25 hours where the clocks
change) and the section's bad input."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from predictive_headroom.cli import main
from predictive_headroom.core.budget import (
    DailyBudget,
    affords,
    budget_cap,
    budget_part,
    daily_budget,
    day_of,
    held_node_hours,
)
from predictive_headroom.core.components import registration
from predictive_headroom.core.context import Held
from predictive_headroom.core.price import Price
from predictive_headroom.core.stabilise import hold_all
from predictive_headroom.policy.budget import Budget, parse_amount
from predictive_headroom.policy.load import ConfigError, parse_policy

H = 3600.0


def at(text: str) -> float:
    """POSIX seconds of an ISO time with its offset."""
    return datetime.fromisoformat(text).timestamp()


@pytest.mark.parametrize(
    "zone, instant, hours, starts",
    [
        ("UTC", "2026-06-01T13:00+00:00", 24, "2026-06-01T00:00+00:00"),
        ("Europe/Berlin", "2026-03-29T12:00+00:00", 23, "2026-03-29T00:00+01:00"),
        ("Europe/Berlin", "2026-10-25T12:00+00:00", 25, "2026-10-25T00:00+02:00"),
        ("Europe/Berlin", "2026-03-28T23:30+00:00", 23, "2026-03-29T00:00+01:00"),
        # Santiago's clocks change at midnight: the day starts when they jump, 01:00 local
        ("America/Santiago", "2026-09-06T12:00+00:00", 23, "2026-09-06T01:00-03:00"),
        ("America/Santiago", "2026-04-04T12:00+00:00", 25, "2026-04-04T00:00-03:00"),
        ("Asia/Kathmandu", "2026-01-01T00:00+00:00", 24, "2026-01-01T00:00+05:45"),
    ],
)
def test_a_day_runs_midnight_to_midnight_in_its_zone(zone, instant, hours, starts) -> None:
    day = day_of(at(instant), zone)
    assert day.hours == hours
    assert day.start == at(starts)
    assert day.start <= at(instant) < day.end


BUDGET = DailyBudget(node_hours=24.0, slots=8, zone="UTC", given="24 overhead node-hours a day")
NOON = at("2026-06-01T12:00+00:00")


@pytest.mark.parametrize(
    "spent, ahead, cap",
    [
        (0.0, [(NOON, 8)], None),  # 0 + 8 x 12 h / 8 = 12 node-hours: within
        (12.0, [(NOON, 8)], None),  # 12 + 12 = 24: exactly the budget
        (12.0, [(NOON, 9)], 8),  # 12 + 13.5 > 24: the 12 left over 12 hours afford 8
        (20.0, [(NOON, 9)], 2),  # 4 left over 12 hours: 2.67 placeholders, 2 held
        (30.0, [(NOON, 1)], 0),  # over already: nothing more
        # low now and high later: over the budget, so the cap binds now (at 8, above 2)
        (12.0, [(NOON, 2), (NOON + 6 * H, 20)], 8),
        # high now and nothing later: within, no cap though 20 is more than the even spread
        (12.0, [(NOON, 20), (NOON + 3 * H, 0)], None),
    ],
)
def test_the_cap_spreads_what_is_left_over_the_rest_of_the_day(spent, ahead, cap) -> None:
    found = budget_cap(BUDGET, NOON, spent, ahead)
    assert found.cap == cap
    assert found.limits(9) == (cap is not None and cap < 9)


def test_a_longer_day_spreads_the_same_budget_over_more_hours() -> None:
    budget = DailyBudget(46.0, 1, "Europe/Berlin", "46 node-hours")
    short = budget_cap(
        budget, at("2026-03-29T00:00+01:00"), 0.0, [(at("2026-03-29T00:00+01:00"), 3)]
    )
    usual = budget_cap(
        budget, at("2026-03-30T00:00+02:00"), 0.0, [(at("2026-03-30T00:00+02:00"), 3)]
    )
    long = budget_cap(
        budget, at("2026-10-25T00:00+02:00"), 0.0, [(at("2026-10-25T00:00+02:00"), 3)]
    )
    assert (short.day.hours, short.cap) == (23, 2)  # 46 / 23 = 2 an hour
    assert (usual.day.hours, usual.cap) == (24, 1)  # 46 / 24 = 1.9
    assert (long.day.hours, long.cap) == (25, 1)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_the_planners_cap_is_the_rule_with_the_plan_held_to_the_end_of_the_day(zone) -> None:
    rng = np.random.default_rng(3)
    budget = DailyBudget(30.0, 8, zone, "30 node-hours")
    for _ in range(300):
        now = at("2026-10-25T00:00+00:00") + float(rng.uniform(0, 86400))
        spent, would = float(rng.uniform(0, 40)), int(rng.integers(0, 60))
        rule = budget_cap(budget, now, spent, [(now, would)])
        part = budget_part(budget, now, spent)
        assert min(would, part.replicas) == (would if rule.cap is None else rule.cap)
        assert rule.limits(would) == (part.replicas < would)


def spent(held: Held, budget: DailyBudget, now: float) -> float:
    """The node-hours `held` counts from the start of `now`'s day until `now`."""
    return held.seconds(day_of(now, budget.zone).start, now) / H / budget.slots


def test_what_was_held_is_counted_since_midnight() -> None:
    budget = DailyBudget(30.0, 8, "Europe/Berlin", "30 node-hours")
    midnight = at("2026-06-02T00:00+02:00")
    held = Held()
    held.record(midnight - 2 * H, 16)  # held across midnight: counted from midnight
    held.record(midnight + H, 8)
    held.record(midnight + H, 80)  # the same instant again: ignored
    assert spent(held, budget, midnight + 3 * H) == pytest.approx(2 + 2)
    assert spent(held, budget, midnight + 3 * H) == pytest.approx(4)  # reading twice is the same
    assert spent(held, budget, midnight + 24 * H + H) == pytest.approx(1)  # the next day
    assert spent(Held(), budget, midnight + H) == 0.0  # nothing known: a restart
    held.forget_before(midnight + 2 * H)  # from then on alike; before it nothing is known
    assert spent(held, budget, midnight + 3 * H) == pytest.approx(4 - 2)
    assert held.seconds(midnight + 2 * H, midnight + 3 * H) == pytest.approx(8 * H)
    assert affords(budget, midnight + 12 * H, 4.0) == 17  # 26 left over 12 hours: 17.3


def test_node_hours_held_count_each_count_until_the_next() -> None:
    held = [(0.0, 8), (H, 16), (3 * H, 0)]
    assert held_node_hours(held, 0.0, 4 * H, 8) == pytest.approx(1 + 4)
    assert held_node_hours(held, 0.5 * H, 2 * H, 8) == pytest.approx(0.5 + 2)
    assert held_node_hours(held, -H, 0.0, 8) == 0.0


def test_money_turns_into_node_hours_at_the_price_of_a_node_hour() -> None:
    price = Price(2.0, 8, "USD", "2 USD a node-hour")
    money = daily_budget(Budget(per_day="40 USD", timezone="Europe/Berlin"), price)
    assert (money.node_hours, money.slots, money.zone) == (20.0, 8, "Europe/Berlin")
    assert "40.00 USD a day (20.0 overhead node-hours" in money.given
    hours = daily_budget(Budget(node_hours_per_day=50), Price(None, 4, "USD", "no prices"))
    assert (hours.node_hours, hours.slots) == (50.0, 4)
    with pytest.raises(ValueError, match="priced in EUR"):
        daily_budget(Budget(per_day="40 USD"), Price(2.0, 8, "EUR", ""))
    with pytest.raises(ValueError, match="no price for a node-hour"):
        daily_budget(Budget(per_day="40 USD"), Price(None, 8, "USD", ""))


def hold_within(times, wanted, budget, steps=1):
    """The rule on a held series, walking forward, written out plainly (the reference the
    engine's replay is checked against): at each instant the count the plan would hold (the
    largest capped count of the last `steps` instants, this one's uncapped), at most what the
    node-hours left afford; each count held until the next instant."""
    n = times.size
    held, raw, capped = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    ledger = Held()
    for i in range(n):
        at = float(times[i])
        would = max(int(wanted[i]), int(raw[max(0, i - steps + 1) : i].max(initial=0)))
        cap = affords(budget, at, spent(ledger, budget, at))
        raw[i], held[i] = min(int(wanted[i]), cap), min(would, cap)
        capped[i] = held[i] < would
        ledger.record(at, int(held[i]))
    return held, capped


def _days_spent(times, held, budget) -> dict[float, float]:
    spent: dict[float, float] = {}
    step = float(times[1] - times[0])
    for t, n in zip(times, held, strict=True):
        day = day_of(float(t), budget.zone).start
        spent[day] = spent.get(day, 0.0) + budget.node_hours_of(float(n), step)
    return spent


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Asia/Kathmandu"])
def test_a_held_series_stays_within_the_budget_every_day(zone) -> None:
    rng = np.random.default_rng(7)
    times = at("2026-10-20T00:00+00:00") + 300.0 * np.arange(12 * 288)  # 12 days, a DST change
    wanted = rng.integers(0, 30, times.size)
    budget = DailyBudget(30.0, 8, zone, "30 node-hours")
    held, capped = hold_within(times, wanted, budget, steps=6)
    spent = _days_spent(times, held, budget)
    assert max(spent.values()) <= 30.0 + 1e-6
    assert capped.any() and (held[capped] < hold_all(wanted, 6, 10**9)[capped]).all()
    free, none = hold_within(times, wanted, DailyBudget(10**6, 8, zone, "a lot"), steps=6)
    assert np.array_equal(free, hold_all(wanted, 6, 10**9)) and not none.any()


def test_a_budget_that_binds_late_in_the_day_leaves_the_morning_alone() -> None:
    times = at("2026-06-01T00:00+00:00") + 900.0 * np.arange(96)
    wanted = np.where(np.arange(96) < 48, 2, 16)  # 2 until noon, then 16 (8 to a node)
    budget = DailyBudget(18.0, 8, "UTC", "18 node-hours")
    held, capped = hold_within(times, wanted, budget, steps=1)
    # the morning spends 3 node-hours; 16 from noon would spend 24 more: the 15 left over the
    # 12 hours left afford 10 placeholders, held to midnight
    assert (held[:48] == 2).all() and not capped[:48].any()
    assert (held[48:] == 10).all() and capped[48:].all()
    assert _days_spent(times, held, budget) == {times[0]: pytest.approx(18.0)}
    flat, _ = hold_within(times, np.full(96, 8), budget, steps=1)
    assert (flat == 6).all()  # 8 all day would spend 24: 18 over 24 hours from the start


# --- the `budget:` section ------------------------------------------------------------------

POOL = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 10
"""
PRICED = "cost: {nodeHourPrice: 2, currency: USD}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_policy(text, "test.yaml")
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    "section, cost, expected",
    [
        ("budget: 40", PRICED, "pools[0].budget: budget: 40 has no unit: write budget: {perDay: 40 USD}"),
        ("budget: {perDay: 40}", PRICED, "pools[0].budget.perDay: 40 has no currency: write perDay: 40 USD"),
        ("budget: {perDay: $40}", PRICED, "money needs its currency code, not '$'"),
        ("budget: {perDay: 40 dollars}", PRICED, "'dollars' is neither node-hours nor a currency code"),
        ("budget: {perDay: 40 EUR}", PRICED, "pools[0].budget.perDay: perDay 40 EUR is in EUR, and cost: prices in USD"),
        ("budget: {perDay: 40 USD}", "", "pools[0].budget.perDay: perDay 40 USD needs the price of a node-hour"),
        ("budget: {perDay: 40 USD}", "cost: {currency: USD}\n", "needs the price of a node-hour"),
        ("budget: {perDay: 0 USD}", PRICED, "a budget must be more than 0 a day"),
        ("budget: {nodeHoursPerDay: 0}", PRICED, "pools[0].budget.nodeHoursPerDay: '0': a budget must be more than 0"),
        ("budget: {nodeHoursPerDay: -5}", "", "a budget must be more than 0 a day"),
        ("budget: {nodeHoursPerDay: 40 USD}", PRICED, "is money: write it as perDay: 40 USD"),
        ("budget: {}", PRICED, "budget gives neither of perDay and nodeHoursPerDay"),
        ("budget: {perDay: 40 USD, nodeHoursPerDay: 5}", PRICED, "budget gives both"),
        ("budget: {nodeHoursPerDay: 5, timezone: Europe/Berln}", "", "did you mean 'Europe/Berlin'?"),
    ],
)  # fmt: skip
def test_bad_budgets_say_what_is_missing(section, cost, expected) -> None:
    found = problems(f"{POOL}    {section}\n{cost}")
    assert any(expected in p for p in found), found


@pytest.mark.parametrize(
    "section, cost",
    [
        ("budget: {perDay: 40 USD}", PRICED),
        ("budget: {perDay: 40usd, timezone: Europe/Berlin}", "cost: {costPerCpuHour: 0.04}\n"),
        ("budget: {nodeHoursPerDay: 50}", ""),
        ("budget: {nodeHoursPerDay: 12.5}", "cost: {currency: EUR}\n"),
    ],
)
def test_good_budgets_load(section, cost) -> None:
    pool = parse_policy(f"{POOL}    {section}\n{cost}", "test.yaml").pools[0]
    assert pool.budget is not None and (pool.budget.money or pool.budget.node_hours_per_day)


def test_validate_exits_2_naming_the_missing_price(tmp_path, capsys) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text(POOL + "    budget: {perDay: 40 USD}\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "pools[0].budget.perDay" in err and "cost.nodeHourPrice" in err


@pytest.mark.parametrize(
    "text, amount, currency",
    [("40USD", 40.0, "USD"), ("40 usd", 40.0, "USD"), ("30", 30.0, None), ("2.5nh", 2.5, None)],
)
def test_one_reading_of_an_amount_a_day(text, amount, currency) -> None:
    assert parse_amount(text) == (amount, currency)


def test_the_three_contexts_read_the_same_budget_from_the_same_holding() -> None:
    """The budget's one `read` (no reader per shell): the daemon's context from its own plans,
    the replay's from the counts it held and `plan --budget-spent` at `--at` give the same part."""
    import argparse

    from predictive_headroom.commands.components import cli_context
    from predictive_headroom.core.settings import resolve_settings
    from predictive_headroom.daemon.components import DaemonContext
    from predictive_headroom.replay.planner import World, replay_context

    policy = parse_policy(f"{POOL}    budget: {{perDay: 40 USD}}\n{PRICED}", "test.yaml")
    pool = policy.pools[0]
    settings = resolve_settings(pool)
    midnight = at("2026-06-02T00:00+00:00")
    times = midnight - H + 600.0 * np.arange(13)  # 23:00 to 01:00, every 10 minutes
    counts = np.array([4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 0])
    daemon = DaemonContext(lambda: policy.cost)
    for t, n in zip(times[:-1], counts[:-1], strict=True):
        daemon.planned(pool, float(t), int(n))
    now = float(times[-1])
    price = daemon.price(pool)
    world = World(times=times, price=price, node_slots=price.slots, held=counts[:-1])
    replay = replay_context(world)
    assert replay is not None
    replay.at = now
    spent = 16 * H / H / price.slots  # 16 placeholders held since midnight, an hour
    args = argparse.Namespace(at="2026-06-02T01:00Z", budget_spent=spent)
    cli = cli_context(args, policy.cost)
    assert cli is not None
    read = registration("budget").read
    assert read is not None
    parts = [read(pool, settings, c) for c in (daemon.instant(now), replay, cli)]
    assert parts[0] == parts[1] == parts[2]
    assert parts[0] is not None and parts[0].spent == pytest.approx(spent)
    assert parts[0].to_status()["budget"].startswith("40.00 USD a day")


def test_a_count_held_on_is_one_record_and_counts_the_same() -> None:
    every, changes = Held(), Held()
    counts = [4, 4, 4, 8, 8, 0, 0, 4]
    for k, n in enumerate(counts):
        every.record(600.0 * k, n)
        if k == 0 or n != counts[k - 1]:
            changes.record(600.0 * k, n)
    assert len(every._at) == len(changes._at) == 4
    for since in (0.0, 900.0, 2400.0):
        assert every.seconds(since, 6000.0) == changes.seconds(since, 6000.0)
    assert every.seconds(0.0, 6000.0) == (4 * 1800 + 8 * 1200 + 4 * 1800) * 1.0
