"""`plan`'s cluster from the flags: `--nodes`, `--cores` and `--schedulable-nodes`, each `N` for every
pool or `POOL=N` for one pool's own (`Clusters`), what the proportional rule counts where there is
no cluster to read; with the notes on stderr when a rule was skipped or ran on the totals.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from predictive_headroom.commands import CommandError
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import ClusterState


def cluster_from_args(args: argparse.Namespace, policy: Policy) -> ClusterState | None:
    """The cluster state given on the command line (`--nodes N --cores C`, one for every pool),
    or None when --nodes is absent."""
    return cluster_state(args.nodes, args.cores, args.schedulable_nodes, policy.pools, "")


def cluster_state(
    nodes: int | None,
    cores: float | None,
    schedulable: int | None,
    pools: list[Pool],
    pool_flag: str,
) -> ClusterState | None:
    """The ClusterState of `nodes` (None: none given), `cores` and `schedulable` nodes, for
    `pools`; CommandError when they do not add up or a pool counting cores has none
    (`pool_flag`: `gpu=` when the counts are one pool's, for the message)."""
    if nodes is None:
        if cores is not None or schedulable is not None:
            raise CommandError(
                f"--cores {pool_flag}and --schedulable-nodes need --nodes {pool_flag}N"
            )
        return None
    if nodes < 0 or (cores is not None and cores < 0):
        raise CommandError("--nodes and --cores cannot be negative")
    schedulable = nodes if schedulable is None else schedulable
    if not 0 <= schedulable <= nodes:
        raise CommandError(
            f"--schedulable-nodes {pool_flag}{schedulable} must be between 0 and --nodes "
            f"{pool_flag}{nodes}"
        )
    if cores is None:
        for pool in pools:
            rule = pool.proportional
            if rule and (
                (rule.linear and rule.linear.cores_per_replica)
                or (rule.ladder and rule.ladder.cores_to_replicas)
            ):
                raise CommandError(
                    f"pool {pool.name!r} counts cores in its proportional rule; pass --cores "
                    f"{pool_flag or ''}C"
                )
    cores = cores or 0.0
    share = schedulable / nodes if nodes else 0.0
    return ClusterState(int(nodes), cores, int(schedulable), cores * share)


def node_count(text: str) -> tuple[str | None, float]:
    """`14` (for every pool) or `gpu=3` (pool gpu's own) as (pool or None, number)."""
    pool, _, number = text.rpartition("=")
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a number, or POOL=number for one pool (e.g. 14 or gpu=3)"
        ) from None
    return (pool.strip() or None), value


@dataclass(frozen=True)
class Clusters:
    """The cluster each pool's proportional rule runs on: its own counts (`--nodes gpu=3`) or the
    totals (`--nodes 14`), and which pools with a `nodeSelector` ran on the totals."""

    states: dict[str, ClusterState | None]
    on_totals: tuple[str, ...] = ()

    def of(self, pool: Pool) -> ClusterState | None:
        return self.states.get(pool.name)


def clusters_from_args(args: argparse.Namespace, policy: Policy) -> Clusters:
    """Each pool's cluster from `--nodes`, `--cores`, `--schedulable-nodes` (each `N` for every
    pool or `POOL=N` for one); CommandError naming the flag when one is repeated or names no pool."""
    given = {
        flag: _by_pool(getattr(args, attr) or [], flag, policy)
        for flag, attr in (
            ("--nodes", "nodes"),
            ("--cores", "cores"),
            ("--schedulable-nodes", "schedulable_nodes"),
        )
    }
    nodes, cores, schedulable = given.values()
    for flag, counts in (("--cores", cores), ("--schedulable-nodes", schedulable)):
        for name in counts.keys() - nodes.keys() - {None}:
            raise CommandError(f"{flag} {name}= needs --nodes {name}=N, that pool's own nodes")
    states, on_totals = {}, []
    for pool in policy.pools:
        own = pool.name in nodes
        key = pool.name if own else None
        states[pool.name] = cluster_state(
            _int(nodes.get(key)),
            cores.get(pool.name, cores.get(None) if not own else None),
            _int(schedulable.get(pool.name, schedulable.get(None) if not own else None)),
            [pool],
            f"{pool.name}=" if own else "",
        )
        rule = pool.proportional
        if not own and states[pool.name] is not None and rule and rule.node_selector:
            on_totals.append(pool.name)
    return Clusters(states, tuple(on_totals))


def _int(value: float | None) -> int | None:
    if value is not None and value != int(value):
        raise CommandError(f"a node count is a whole number, got {value:g}")
    return None if value is None else int(value)


def _by_pool(
    counts: list[tuple[str | None, float]], flag: str, policy: Policy
) -> dict[str | None, float]:
    """`counts` keyed by pool (None: for every pool); CommandError for an unknown pool or a repeat."""
    names = [p.name for p in policy.pools]
    out: dict[str | None, float] = {}
    for pool, value in counts:
        if pool is not None and pool not in names:
            raise CommandError(f"{flag} {pool}=: no pool named {pool!r}; pools: {', '.join(names)}")
        if pool in out:
            raise CommandError(f"{flag} given twice for {pool or 'every pool'}")
        out[pool] = value
    return out


def note_skipped_proportional(policy: Policy, clusters: Clusters) -> None:
    """Say on stderr, per pool, when its cluster-size rule did not count (no --nodes), or counted
    the totals given where it counts only the nodes of its nodeSelector."""
    skipped = [p.name for p in policy.pools if p.proportional and clusters.of(p) is None]
    if skipped:
        print(
            f"note: the proportional rule of pool(s) {', '.join(skipped)} was skipped: "
            "pass --nodes N (and --cores C) to apply it",
            file=sys.stderr,
        )
    for name in clusters.on_totals:
        pool, state = policy.pool(name), clusters.states[name]
        assert pool.proportional is not None and state is not None
        print(
            f"note: pool {name}'s proportional rule counts the nodes labelled "
            f"{pool.proportional.label_selector}, but ran on the totals given ({state.nodes} "
            f"nodes, {state.cores:g} cores); pass --nodes {name}=N (and --cores {name}=C) "
            "for that pool's own",
            file=sys.stderr,
        )
