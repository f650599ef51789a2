"""The flags that change a replay, shared by `backtest` and `tune` (one set of cluster flags:
node boot, node size, the span replayed, interruptions), and the settings they build."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import replace

from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.commands import CommandError, duration_arg
from predictive_headroom.core.price import Price
from predictive_headroom.core.settings import Given
from predictive_headroom.core.vocabulary import CurveRefit
from predictive_headroom.policy.disruption import parse_rate
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf, priced_nodes
from predictive_headroom.replay.workers import MAX_WORKERS, default_workers

GridFlags = Callable[
    [argparse.Namespace, list[str]],
    tuple[float | None, tuple[float, ...], tuple[float, ...], tuple[float, ...]],
]
"""Reads a command's quantile, dial, window and protection flags, appending each problem."""


# Long on purpose: argparse declarations read best as one flat list.
def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulated cluster, the span replayed, the refits and the interruptions."""
    parser.add_argument(
        "--since",
        type=duration_arg,
        metavar="DURATION",
        help="replay only the last DURATION of --data (e.g. 60d); default: all of it",
    )
    parser.add_argument(
        "--demand-per-replica",
        type=float,
        help="demand one placeholder slot serves (default: the pool's, else median demand / 20)",
    )
    parser.add_argument(
        "--node-slots",
        type=int,
        help="placeholder-sized slots per node (default: as many as fit in the node priced: "
        "--node-cpu and --node-memory, else the policy's cost.nodeCpu and nodeMemory, else 8)",
    )
    parser.add_argument(
        "--lag", type=duration_arg, default=180.0, help="node provisioning lag (default 3m)"
    )
    parser.add_argument(
        "--scale-down-delay",
        type=duration_arg,
        default=600.0,
        help="a node unneeded this long is removed (default 10m)",
    )
    parser.add_argument(
        "--warmup",
        type=duration_arg,
        help="unscored start of the series (default 14d; 7d for series under 28d)",
    )
    parser.add_argument(
        "--refit-every",
        type=duration_arg,
        default=86400.0,
        help="walk-forward refit interval (default 24h)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="refit in this many worker processes at once, the same figures as in one (default: "
        f"the CPUs this process may use, at most {MAX_WORKERS}: {default_workers()} here)",
    )
    parser.add_argument(
        "--curve-refit",
        choices=[c.value for c in CurveRefit],
        default=CurveRefit.DAILY.value,
        help="how the replay refits the forecast's curve between cuts: afresh at each (daily, the "
        "default and the daemon's way), started from the previous cut's fit (warm), or once a "
        "week and reused (weekly); the burst models are refitted at every cut (docs/forecast.md)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="fit every refit, neither reading nor keeping refits in the cache (default: kept in "
        "${XDG_CACHE_HOME:-~/.cache}/predictive-headroom/refits, env PH_CACHE_DIR, bounded by "
        "PH_CACHE_SIZE, default 2G; `predictive-headroom cache clear` empties it)",
    )
    parser.add_argument(
        "--lead-time",
        type=duration_arg,
        help="forecast lead time (default: the pool's leadTime, else lag + 1m)",
    )
    parser.add_argument(
        "--observation-delay",
        type=duration_arg,
        help="how late the newest sample is seen: the burst model at t reads samples at or before t minus this (default: the pool's, 1m)",
    )
    parser.add_argument(
        "--burst-model",
        choices=("quantile", "profile"),
        help="burst allowance: the conditional quantile model on the latest observations, or the time-of-day table (default: the pool's, quantile)",
    )
    parser.add_argument(
        "--cores-per-node",
        type=float,
        help="cores per simulated node for a CPA cores rule (default: the node priced's CPU: "
        "--node-cpu, else the policy's cost.nodeCpu, else its placeholders' CPU)",
    )
    parser.add_argument(
        "--interruptions",
        metavar="RATE",
        help="also replay with nodes interrupted at random at this rate (e.g. 5%%/day: the share of "
        "nodes interrupted per day), and report what each strategy leaves waiting because of them",
    )
    parser.add_argument(
        "--notice",
        type=duration_arg,
        default=120.0,
        help="the interruption notice before a node goes (default 2m, a spot interruption's)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random interruptions (default 0)"
    )


# Long on purpose: one check per flag, so every problem is reported at once, then one mapping.
def settings_from_args(
    args: argparse.Namespace,
    price: Price | None = None,
    grid: GridFlags | None = None,
) -> BacktestSettings:
    """Check the numeric flags (every problem at once) and build the settings; the simulated
    node is the node `price` priced (`price_from_args`: the flags' shape over the policy's,
    `replay.setup.priced_nodes`, as the daemon's re-tune simulates it) unless `--node-slots` /
    `--cores-per-node` say otherwise; `grid` reads the command's own quantile, dial and
    protection flags (`backtest`'s)."""
    problems = []
    if args.demand_per_replica is not None and not args.demand_per_replica > 0:
        problems.append(f"--demand-per-replica must be positive, got {args.demand_per_replica:g}")
    if args.node_slots is not None and args.node_slots < 1:
        problems.append(f"--node-slots must be at least 1, got {args.node_slots}")
    if args.workers < 1:
        problems.append(f"--workers must be at least 1, got {args.workers}")
    if args.refit_every < 60:
        problems.append(f"--refit-every must be at least 1m, got {args.refit_every:g}s")
    quantile, dial, windows, protections = (
        grid(args, problems) if grid is not None else (None, (), (), ())
    )
    if args.observation_delay is not None and args.observation_delay < 0:
        problems.append(f"--observation-delay cannot be negative, got {args.observation_delay:g}s")
    if args.cores_per_node is not None and not args.cores_per_node > 0:
        problems.append(f"--cores-per-node must be positive, got {args.cores_per_node:g}")
    rate = None
    if getattr(args, "interruptions", None):
        try:
            rate = parse_rate(args.interruptions)
        except ValueError as exc:
            problems.append(f"--interruptions: {exc}")
    cache = None
    if not getattr(args, "no_cache", False):
        from predictive_headroom.replay.refit_cache import cache_spec  # lazy: joblib

        try:
            cache = cache_spec(os.environ)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise CommandError("; ".join(problems))
    nodes = SimulatedNodes(lag_seconds=args.lag, scale_down_delay_seconds=args.scale_down_delay)
    if price is not None:
        nodes = priced_nodes(price, nodes)
    if args.node_slots:
        nodes = replace(nodes, node_slots=args.node_slots)
    if args.cores_per_node:
        nodes = replace(nodes, cores_per_node=args.cores_per_node)
    given = Given(
        lead=args.lead_time,
        burst_quantile=quantile,
        observation_delay=args.observation_delay,
        demand_per_replica=args.demand_per_replica,
    )
    return BacktestSettings(
        replay=WhatIf(given, args.burst_model, nodes, args.warmup),
        refit_every_seconds=args.refit_every,
        dial=dial,
        stabilization_dial=windows,
        protections=protections,
        interruption_rate=rate,
        notice_seconds=getattr(args, "notice", 120.0),
        seed=getattr(args, "seed", 0),
        workers=args.workers,
        refit_cache=cache,
        curve_refit=CurveRefit(getattr(args, "curve_refit", CurveRefit.DAILY.value)),
    )
