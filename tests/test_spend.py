"""What a policy can cost a day, said before `dryRun=false` (`core.spend`, issue 62): `validate`'s
note per pool, its warning for a budget below the floor, and the budget an adopted Deployment's
live N spends."""

from __future__ import annotations

import pytest

from predictive_headroom.commands.validate import budget_beside_protection
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.spend import adoption_budget, policy_spend
from predictive_headroom.policy.config import Policy

COST = {"nodeCpu": 16, "nodeMemory": "64Gi", "costPerCpuHour": 0.04, "costPerGiBHour": 0.005}


def policy(**pool: object) -> Policy:
    base = {
        "name": "web",
        "target": {"namespace": "ns", "name": "web-placeholder"},
        "maxReplicas": 100,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return Policy.model_validate({"pools": [{**base, **pool}], "cost": COST})


@pytest.mark.parametrize(
    ("pool", "says"),
    [
        ({}, ["up to 150.0 overhead node-hours a day (144.00 USD); no budget: caps it"]),
        (
            {"budget": {"nodeHoursPerDay": 30}},
            ["up to 150.0 overhead node-hours a day", "the budget caps it at 30 overhead"],
        ),
        (
            {"minReplicas": 10, "budget": {"nodeHoursPerDay": 12}},
            [
                "warning: pools[0].budget: 12 overhead node-hours a day is less than minReplicas "
                "10 holds all day (10 placeholders of 16 to a node: 15.0 overhead node-hours a day",
                "up to 150.0",
            ],
        ),
    ],
)
def test_validate_says_what_each_pool_can_cost_a_day(pool, says):
    text = "\n".join(str(f) for f in policy_spend(policy(**pool)))
    for said in says:
        assert said in text
    assert ("warning" in text) == ("minReplicas" in pool)


def test_an_adopted_deployment_without_a_budget_is_told_its_live_spend():
    adopted = policy(placeholder={"existing": True, "requests": {"cpu": "1", "memory": "1Gi"}})
    pool = adopted.pools[0]
    said = adoption_budget(pool, 20, pool_price(pool, adopted.cost))
    assert said is not None
    assert "its live 20 placeholders (16 to a node) spend 30.0 overhead node-hours a day" in said
    assert said.endswith("paste into the pool: budget: {nodeHoursPerDay: 30}")
    price = pool_price(pool, adopted.cost)
    budgeted = policy(
        placeholder={"existing": True, "requests": {"cpu": "1", "memory": "1Gi"}},
        budget={"nodeHoursPerDay": 30},
    )
    assert adoption_budget(budgeted.pools[0], 20, price) is None  # it has one
    assert adoption_budget(policy().pools[0], 20, price) is None  # not adopted


def test_a_budget_beside_protection_says_which_one_wins():
    both = policy(
        protection=0.95,
        budget={"nodeHoursPerDay": 5},
        forecast={"query": "q", "demandPerReplica": 5},
    )
    [note] = budget_beside_protection(both)
    assert str(note).startswith("note: pools[0]: protection: 95% within a budget: where the budget")
    assert budget_beside_protection(policy(budget={"nodeHoursPerDay": 5})) == []
