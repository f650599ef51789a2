"""`plan`'s words: the plans as a table or a timeline, each part named (`forecast=3 reserve=+2
held=5`), the burst allowance in demand units, the caps that bind, why a pool plans only its floors,
the promise its re-tune sees and what the plan costs a day; with the JSON fields they add.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from predictive_headroom.commands import pool_price_from_args, print_table
from predictive_headroom.core.components import REGISTRY
from predictive_headroom.core.planner import Plan
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.spend import all_day, pool_spend
from predictive_headroom.core.vocabulary import Component, Kind, PlanReason
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.events import gap_move

CAPS = {str(r.name) for r in REGISTRY if r.kind == Kind.CAP}


FLOORS = {str(r.name) for r in REGISTRY if r.kind == Kind.FLOOR}


def print_spend(plans: list[Plan], policy: Policy, args: argparse.Namespace) -> None:
    """What each pool's plan costs a day if held all day, and the most it can cost
    (`core.spend`: maxReplicas all day, the budget that caps it): before `dryRun=false`."""
    by_name = {p.name: p for p in policy.pools}
    for plan in plans:
        pool = by_name[plan.pool]
        price = pool_price_from_args(args, pool, policy.cost)
        held = all_day(plan.desired, price)
        money = price.text(held)
        print(
            f"pool {plan.pool}: {plan.desired} placeholders held all day cost "
            f"{held:,.1f} overhead node-hours a day{f' ({money})' if money else ''}"
        )
        for finding in pool_spend(pool, price, f"pool {plan.pool}"):
            print(f"  {finding}")


def print_capped(plans: list[Plan]) -> None:
    """One line per plan a registered cap other than maxReplicas holds down (`limits`, ...):
    what it allows, and what the floors and the reserve ask for."""
    for plan in plans:
        if plan.reason not in CAPS or plan.reason == Component.MAX:
            continue
        floors = [v for k, v in plan.components.items() if k in FLOORS and v is not None]
        asked = max(floors, default=0) + int(plan.details.get("reserve", 0))
        by = plan.details.get(f"{plan.reason}_by")
        why = f" ({by} sets it)" if by else ""
        print(
            f"pool {plan.pool}: the {plan.reason} cap holds {plan.desired} placeholders{why}; "
            f"the floors and the reserve ask for {asked}"
        )


def with_why(pool: dict[str, Any], why: dict[str, str]) -> dict[str, Any]:
    """A pool's JSON with `why` (the pool plans its floors because ...) when it has one."""
    return {**pool, "why": why[pool["name"]]} if pool["name"] in why else pool


def print_why(why: dict[str, str]) -> None:
    """One line per pool planning its floors for want of a forecast, saying why."""
    for name, words in why.items():
        print(f"pool {name} plans its floors only (min:...): {words}")


def with_promise(pool: dict[str, Any], promises: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One pool's JSON with what its re-tune says of the promise (`protection:` pools only)."""
    promise = promises.get(pool["name"])
    return pool if promise is None else {**pool, "promise": promise}


def print_promises(promises: dict[str, dict[str, Any]]) -> None:
    """Per `protection:` pool, the promise as the daemon would see it now, and what it holds."""
    for name, p in promises.items():
        lead = "warning: " if p["short"] else ""
        print(f"\n{lead}pool {name}: protection {p['in_full']}; holding {p['holding']}")
        if p.get("against_fixed"):  # the one verdict (`core.verdict`), as the report says it
            print(f"pool {name}: {p['against_fixed']['says']}")


HOLD = PlanReason.HOLD_STABILIZATION


def _components_text(
    components: dict[str, int | None], reserve: int = 0, held: int | None = None
) -> str:
    """Every part of a plan as `name=value`: the components, the reserve held on top of the
    floors (`reserve=+16`: why `desired 16` stands beside `forecast=0`), and what the scale-down
    stabilisation holds (`held=12`) when it holds more than the parts ask for."""
    words = [f"{k}={v}" for k, v in components.items() if v is not None]
    if reserve:
        words.append(f"reserve=+{reserve}")
    if held is not None:
        words.append(f"held={held}")
    return " ".join(words)


def _parts_text(plan: Plan) -> str:
    """`_components_text` of `plan`: its components, its reserve and its stabilisation hold."""
    held = plan.desired if plan.reason == HOLD else None
    return _components_text(plan.components, int(plan.details.get("reserve", 0)), held)


def rounded(value: float) -> str:
    """`value` with as many decimals as its size needs to be read: 1234, 12.3, 0.46."""
    size = abs(value)
    return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}"


def burst_text(plan: Plan, demand_per_replica: float | None) -> str:
    """The forecast's burst allowance in words: rounded, in demand units and placeholders, where
    it came from (the model, or the table and why), and that a value below 0 adds nothing."""
    source = plan.details.get("burst_source")
    if source is None:
        return "-"
    burst = float(plan.details.get("burst", 0.0))
    fallback = plan.details.get("burst_fallback")
    where = f"{source}: {fallback}" if fallback else str(source)
    if burst <= 0:
        return f"{rounded(burst)} ({where}; no rise beyond the ramp expected, adds nothing)"
    worth = f" = {burst / demand_per_replica:.2f} placeholders" if demand_per_replica else ""
    return f"{rounded(burst)} demand{worth} ({where})"


def print_plans(plans: list[Plan], policy: Policy, settings: Mapping[str, PlanSettings]) -> None:
    """The plans as a table; the demand per replica and the burst quantile named are those each
    pool plans with (`settings`, one per pool: re-tuned for a `protection:` pool)."""
    pools = {p.name: p for p in policy.pools}
    per_replica = {
        name: s.demand_per_replica.value if s.demand_per_replica else None
        for name, s in settings.items()
    }
    print_table(
        ["pool", "desired", "reason", "components", "burst allowance"],
        [
            [
                p.pool,
                p.desired,
                p.reason,
                _parts_text(p),
                burst_text(p, per_replica.get(p.pool)),
            ]
            for p in plans
        ],
    )
    quantiles = sorted(
        {f"{settings[name].quantile:g}" for name, pool in pools.items() if pool.forecast}
    )
    if any(p.details.get("burst_source") for p in plans):
        print(
            "\nburst allowance: room for growth beyond the predictable ramp within the lead time, "
            f"in the query's demand units (the q={'/'.join(quantiles)} quantile of such growth); "
            "model: the burst model on the latest observations, profile: the refit-time table by "
            "time of day."
        )


def print_timeline(timeline: list[dict[str, Any]]) -> None:
    for pool in timeline:
        print(f"pool {pool['name']} (rows where the plan changes)")
        rows, last = [], None
        for step in pool["steps"]:
            key = (step["desired_replicas"], step["reason"])
            if key != last:
                rows.append(
                    [
                        step["at"],
                        step["desired_replicas"],
                        step["reason"],
                        _components_text(
                            step["components"],
                            step.get("reserve", 0),
                            step["desired_replicas"] if step["reason"] == HOLD else None,
                        ),
                    ]
                )
                last = key
        print_table(["from", "desired", "reason", "components"], rows)
        print()


def note_moved_events(policy: Policy) -> None:
    """Say on stderr where a dated event's `from` or `to` in a daylight-saving gap moves."""
    for pool in policy.pools:
        for window in pool.schedules:
            for name, value in (("from", window.from_), ("to", window.to)):
                if moved := gap_move(value, window.timezone):
                    print(
                        f"note: pool {pool.name}, window {window.name!r}, {name}: {moved}",
                        file=sys.stderr,
                    )
