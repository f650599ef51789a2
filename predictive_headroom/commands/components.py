"""The command line's `Context` (`CliContext`): each input the registered components read at an
instant (`core.vocabulary.Input`), given by flags on `plan` and `report`: `--at`, the price
flags, `--budget-spent` (what was held), `--requests` (what the pods request), `--quota-room` (the
room the ResourceQuotas leave); the nodes on their way out are not read there. Components read from it are the registry's own (`parts_from_args`),
with the settings the plan uses; a component left out for want of an input is noted on stderr with
the flag that gives it (`note_left_out`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from predictive_headroom.commands import CommandError, parse_time, pool_price_from_args
from predictive_headroom.core.components import BY_CONTEXT, Part, from_context
from predictive_headroom.core.context import Leaving, QuotaRoom, QuotaSeen
from predictive_headroom.core.price import Price
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import Input
from predictive_headroom.policy.config import Cost, Policy, Pool
from predictive_headroom.policy.placeholder import quantity
from predictive_headroom.policy.units import parse_quantity, unit_problem


def add_requests_argument(parser: argparse.ArgumentParser) -> None:
    """`--requests cpu=412,memory=800Gi`: what the pool's pods request (the share component)."""
    parser.add_argument(
        "--requests",
        metavar="R=Q[,R=Q]",
        help="what the pods of each pool with a share: section request, for that component, "
        "e.g. cpu=412,memory=800Gi (Kubernetes quantities); without it the component is left out",
    )


def requests_from_args(text: str | None) -> dict[str, float] | None:
    """`cpu=412,memory=800Gi` as amounts (cores, bytes, units); None without the flag;
    CommandError saying which item is wrong and how to write it."""
    if text is None:
        return None
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, amount = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = float(parse_quantity(quantity(amount.strip())))
        except ValueError:
            raise CommandError(
                f"--requests: {item!r} is not resource=quantity; write it like cpu=412,memory=800Gi"
            ) from None
        problem = unit_problem(name.strip(), amount.strip(), per_pod=False)
        if problem:
            raise CommandError(f"--requests {item.strip()}: {problem}")
    return out


def add_quota_room_argument(parser: argparse.ArgumentParser) -> None:
    """`--quota-room cpu=8,memory=32Gi,pods=10`: the room the namespace's ResourceQuotas leave
    the placeholders (the quota cap), where there is no cluster to read them from."""
    parser.add_argument(
        "--quota-room",
        metavar="R=Q[,R=Q]",
        help="the room the ResourceQuotas of each Deployment pool's namespace leave its "
        "placeholders (hard - used, plus what they use now), e.g. cpu=8,memory=32Gi,pods=10 "
        "(quota keys: pods, cpu or requests.cpu, limits.memory, ...); without it the quota cap "
        "is left out",
    )


def quota_room_from_args(text: str | None) -> QuotaRoom | None:
    """`--quota-room` as one quota named `--quota-room` with nothing used (None without the
    flag); CommandError saying which item is wrong and how to write it."""
    if text is None:
        return None
    hard: dict[str, float] = {}
    for item in text.split(","):
        name, sep, amount = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            hard[name.strip()] = float(parse_quantity(quantity(amount.strip())))
        except ValueError:
            raise CommandError(
                f"--quota-room: {item!r} is not resource=quantity; write it like "
                "cpu=8,memory=32Gi,pods=10"
            ) from None
    return QuotaRoom((QuotaSeen("--quota-room", hard),))


def add_held_argument(parser: argparse.ArgumentParser) -> None:
    """`--budget-spent 12.5`: the overhead node-hours each pool held since midnight (the
    `Context`'s `held`, for every component read from it: the budget)."""
    parser.add_argument(
        "--budget-spent",
        type=float,
        metavar="NODE_HOURS",
        help="the overhead node-hours each pool with a budget: section held since midnight in "
        "its timezone, up to --at (needed with it); without it the budget is left out",
    )


@dataclass(frozen=True)
class CliContext:
    """The command line's `core.context.Context`: the instant `--at`, the node priced by the
    price flags over the policy's `cost:`, what each pool held since the start of its day
    (`--budget-spent`) and what its pods request (`--requests`); the nodes on their way out are
    not seen."""

    at: float
    spent: float | None
    args: argparse.Namespace
    cost: Cost | None

    def price(self, pool: Pool) -> Price:
        """The node `pool` is priced on, as `tune` and `backtest` price it."""
        return pool_price_from_args(self.args, pool, self.cost)

    def held(self, pool: Pool, since: float) -> float | None:
        """`--budget-spent`: what the pool held since the start of its day, up to `--at` (the one
        `since` asked for by the components read from the context: the budget's midnight)."""
        return self.spent

    def requests(self, pool: Pool) -> Mapping[str, float] | None:
        """`--requests`: what the pool's pods request (None without the flag)."""
        return requests_from_args(getattr(self.args, "requests", None))

    def leaving(self, pool: Pool, settings: PlanSettings) -> Leaving | None:
        """Not seen on the command line."""
        return None

    def quotas(self, pool: Pool) -> QuotaRoom | None:
        """`--quota-room`: the room left for the placeholders (None without the flag)."""
        return quota_room_from_args(getattr(self.args, "quota_room", None))

    def lacks(self, read: Input) -> str | None:
        """What to pass to give `read` when it was not given (None: given, or never given on the
        command line, and a component left out for want of it is not noted)."""
        if read == Input.REQUESTS and getattr(self.args, "requests", None) is None:
            return "pass --requests cpu=412 (what the pool's pods request) to apply it"
        if read == Input.HELD and self.spent is None:
            return CONTEXT_NOTE
        return None


def cli_context(args: argparse.Namespace, cost: Cost | None, held: bool = True) -> CliContext:
    """The context from the flags; `held`: a pool reads what was held (a budget), so a spend is
    checked: CommandError for a spend without the instant, or a negative one."""
    spent = getattr(args, "budget_spent", None)
    if held and spent is not None:
        if not getattr(args, "at", None):
            raise CommandError(
                "--budget-spent needs --at: the instant the node-hours were held until (e.g. --at "
                "2026-11-27T15:00Z)"
            )
        if not spent >= 0:
            raise CommandError(f"--budget-spent must be 0 or more node-hours, got {spent:g}")
    at = parse_time(args.at) if getattr(args, "at", None) else 0.0
    return CliContext(at, float(spent) if spent is not None else None, args, cost)


CONTEXT_NOTE = (
    "pass --budget-spent 12.5 --at TIME (the overhead node-hours held since midnight) to apply it"
)
"""What to pass when a component reading what was held is left out for want of it."""


def add_component_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that give the inputs of the registered components (`plan`, `report`)."""
    add_requests_argument(parser)
    add_held_argument(parser)
    add_quota_room_argument(parser)


def parts_from_args(
    args: argparse.Namespace, policy: Policy, settings: Mapping[str, PlanSettings]
) -> dict[str, dict[str, Part]]:
    """Each pool's registered components read from the command line's context, by pool then
    component name (a pool given none is left out), with the settings the plan uses (`settings`,
    every pool's: `app.fit.settings_of`)."""
    out: dict[str, dict[str, Part]] = {}
    reads = [p for p in policy.pools if any(r.enabled(p) for r in BY_CONTEXT)]
    held = any(Input.HELD in r.inputs and r.enabled(p) for p in reads for r in BY_CONTEXT)
    context = cli_context(args, policy.cost, held)
    for pool in reads:
        chosen = settings[pool.name]
        try:
            read = from_context(pool, chosen, context)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if read:
            out[pool.name] = read
    return out


def note_left_out(
    args: argparse.Namespace, policy: Policy, parts: Mapping[str, Mapping[str, Part]]
) -> None:
    """Say on stderr which pools' components were left out for want of their flags, and what to
    pass to apply them."""
    context = cli_context(args, policy.cost, False)
    for r in BY_CONTEXT:
        to_apply = next((n for n in map(context.lacks, r.inputs) if n), None)
        left_out = [
            p.name
            for p in policy.pools
            if r.enabled(p) and str(r.name) not in parts.get(p.name, {})
        ]
        if left_out and to_apply:
            print(
                f"note: the {r.name} component of pool(s) {', '.join(left_out)} was left out: "
                f"{to_apply}",
                file=sys.stderr,
            )
