"""The command line's reader of each registered component a shell reads (`core.components.READ`),
in one place: its flags on `plan` and `report`, the part they give each pool, and what to pass
when a pool's component is left out for want of them.

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

from kubernetes.utils import parse_quantity

from predictive_headroom.commands import CommandError
from predictive_headroom.core.components import Part, registration
from predictive_headroom.core.share import share_part
from predictive_headroom.core.vocabulary import Component
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.placeholder import quantity


@dataclass(frozen=True)
class CliReader:
    """One component on the command line: the flags that give it, its part for a pool from the
    parsed arguments (None: left out), and what to pass when it is left out (None: it is never
    given on the command line, and left out without a note)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    part: Callable[[argparse.Namespace, Pool], Part | None]
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
    return out


def _share(args: argparse.Namespace, pool: Pool) -> Part | None:
    """The share component from `--requests` (None without it)."""
    requested = requests_from_args(getattr(args, "requests", None))
    if requested is None or not pool.share.enabled:
        return None
    return share_part(pool.share, requested, pool.placeholder.amounts)


def _no_arguments(_: argparse.ArgumentParser) -> None:
    """A component the command line does not give (the nodes leaving are not read there)."""


CLI_READERS: dict[Component, CliReader] = {
    Component.DISRUPTION: CliReader(_no_arguments, lambda _args, _pool: None),
    Component.SHARE: CliReader(
        add_requests_argument,
        _share,
        "pass --requests cpu=412 (what the pool's pods request) to apply it",
    ),
}
"""What gives each registered component a shell reads on the command line, by name."""


def add_component_arguments(parser: argparse.ArgumentParser) -> None:
    """Every registered component's flags (`plan`, `report`)."""
    for reader in CLI_READERS.values():
        reader.add_arguments(parser)


def parts_from_args(args: argparse.Namespace, policy: Policy) -> dict[str, dict[str, Part]]:
    """Each pool's registered components the command line gives, by pool then component name (a
    pool given none is left out)."""
    out: dict[str, dict[str, Part]] = {}
    for pool in policy.pools:
        for name, reader in CLI_READERS.items():
            part = reader.part(args, pool) if _enabled(name, pool) else None
            if part is not None:
                out.setdefault(pool.name, {})[str(name)] = part
    return out


def _enabled(name: Component, pool: Pool) -> bool:
    return registration(name).enabled(pool)


def note_left_out(policy: Policy, parts: Mapping[str, Mapping[str, Part]]) -> None:
    """Say on stderr which pools' components were left out for want of their flags, and what to
    pass to apply them."""
    for name, reader in CLI_READERS.items():
        left_out = [
            p.name
            for p in policy.pools
            if _enabled(name, p) and str(name) not in parts.get(p.name, {})
        ]
        if left_out and reader.to_apply:
            print(
                f"note: the {name} component of pool(s) {', '.join(left_out)} was left out: "
                f"{reader.to_apply}",
                file=sys.stderr,
            )
