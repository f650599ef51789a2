"""The command line's reader of each registered component a shell reads (`core.components.BY_SHELL`),
in one place: its flags on `plan` and `report`, the part they give each pool, and what to pass
when a pool's component is left out for want of them; and the command line's `Context`
(`CliContext`: `--at`, the price flags, `--budget-spent`) the components read from it take.

`plan` and `report` iterate `CLI_READERS` (`add_arguments`, `parts_from_args`,
`note_left_out`) instead of naming the components; a test checks every component a shell reads
has a reader here, as in the daemon (`daemon.components`) and the replay
(`replay.planner.REPLAY_READERS`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from predictive_headroom.commands import CommandError, parse_time, pool_price_from_args
from predictive_headroom.core.components import BY_CONTEXT, Part, from_context, registration
from predictive_headroom.core.price import Price
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.core.share import share_part
from predictive_headroom.core.vocabulary import Component
from predictive_headroom.policy.config import Cost, Policy, Pool
from predictive_headroom.policy.placeholder import quantity
from predictive_headroom.policy.units import parse_quantity, unit_problem


@dataclass(frozen=True)
class CliReader:
    """One component on the command line: the flags that give it, its part for a pool from the
    parsed arguments (None: left out), and what to pass when it is left out (None: it is never
    given on the command line, and left out without a note)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    part: Callable[[argparse.Namespace, Pool, Cost | None], Part | None]
    """The part from the parsed arguments, the pool and the policy's `cost:` section."""
    to_apply: str | None = None


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


def _share(args: argparse.Namespace, pool: Pool, _cost: Cost | None) -> Part | None:
    """The share component from `--requests` (None without it)."""
    requested = requests_from_args(getattr(args, "requests", None))
    if requested is None or not pool.share.enabled:
        return None
    return share_part(pool.share, requested, pool.placeholder.amounts)


def _no_arguments(_: argparse.ArgumentParser) -> None:
    """A component the command line does not give (the nodes leaving are not read there)."""


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
    price flags over the policy's `cost:`, and what each pool held since the start of its day
    (`--budget-spent`)."""

    at: float
    spent: float
    args: argparse.Namespace
    cost: Cost | None

    def price(self, pool: Pool) -> Price:
        """The node `pool` is priced on, as `tune` and `backtest` price it."""
        return pool_price_from_args(self.args, pool, self.cost)

    def held(self, pool: Pool, since: float) -> float | None:
        """`--budget-spent`: what the pool held since the start of its day, up to `--at` (the one
        `since` asked for by the components read from the context: the budget's midnight)."""
        return self.spent


def cli_context(args: argparse.Namespace, cost: Cost | None) -> CliContext | None:
    """The context from `--budget-spent` at `--at` (None without the spend: the components read
    from it are left out); CommandError for a spend without the instant, or a negative one."""
    spent = getattr(args, "budget_spent", None)
    if spent is None:
        return None
    if not getattr(args, "at", None):
        raise CommandError(
            "--budget-spent needs --at: the instant the node-hours were held until (e.g. --at "
            "2026-11-27T15:00Z)"
        )
    if not spent >= 0:
        raise CommandError(f"--budget-spent must be 0 or more node-hours, got {spent:g}")
    return CliContext(parse_time(args.at), float(spent), args, cost)


CONTEXT_NOTE = (
    "pass --budget-spent 12.5 --at TIME (the overhead node-hours held since midnight) to apply it"
)
"""What to pass when a component read from the context is left out for want of it."""


CLI_READERS: dict[Component, CliReader] = {
    Component.DISRUPTION: CliReader(_no_arguments, lambda _args, _pool, _cost: None),
    Component.SHARE: CliReader(
        add_requests_argument,
        _share,
        "pass --requests cpu=412 (what the pool's pods request) to apply it",
    ),
}
"""What gives each registered component a shell reads on the command line, by name."""


def add_component_arguments(parser: argparse.ArgumentParser) -> None:
    """Every registered component's flags (`plan`, `report`), and the context's."""
    for reader in CLI_READERS.values():
        reader.add_arguments(parser)
    add_held_argument(parser)


def parts_from_args(args: argparse.Namespace, policy: Policy) -> dict[str, dict[str, Part]]:
    """Each pool's registered components the command line gives, by pool then component name (a
    pool given none is left out)."""
    out: dict[str, dict[str, Part]] = {}
    contextual = [p for p in policy.pools if any(r.enabled(p) for r in BY_CONTEXT)]
    context = cli_context(args, policy.cost) if contextual else None
    for pool in policy.pools:
        for name, reader in CLI_READERS.items():
            part = reader.part(args, pool, policy.cost) if _enabled(name, pool) else None
            if part is not None:
                out.setdefault(pool.name, {})[str(name)] = part
        if context is not None and pool in contextual:
            try:
                read = from_context(pool, resolve_settings(pool), context)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            out.setdefault(pool.name, {}).update(read)
    return {name: parts for name, parts in out.items() if parts}


def _enabled(name: Component, pool: Pool) -> bool:
    return registration(name).enabled(pool)


def note_left_out(policy: Policy, parts: Mapping[str, Mapping[str, Part]]) -> None:
    """Say on stderr which pools' components were left out for want of their flags, and what to
    pass to apply them."""
    notes = {name: reader.to_apply for name, reader in CLI_READERS.items()}
    for name, to_apply in {**notes, **{r.name: CONTEXT_NOTE for r in BY_CONTEXT}}.items():
        left_out = [
            p.name
            for p in policy.pools
            if _enabled(name, p) and str(name) not in parts.get(p.name, {})
        ]
        if left_out and to_apply:
            print(
                f"note: the {name} component of pool(s) {', '.join(left_out)} was left out: "
                f"{to_apply}",
                file=sys.stderr,
            )
