"""`predictive-headroom tune`: the cheapest settings reaching a protection target on a pool's own history.

Replays the pool's history through the backtest (refits see only the past), over a grid of burst
quantiles and scale-down stabilisation windows, and recommends the cheapest setting that absorbs
at least the target share of the pod-minutes that would otherwise wait for a node. The
walk-forward check (each day's setting chosen on the days before it) says whether choosing on
the past held on the future. When static headroom or the proportional rule reaches the target
for less on this history, it says so and recommends that instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from predictive_headroom.app.fit import fetch_history
from predictive_headroom.backtest.recommend import recommend
from predictive_headroom.backtest.run import BacktestSettings, run_backtest
from predictive_headroom.commands import (
    CommandError,
    add_output_argument,
    duration_arg,
    load_config,
    parse_time,
    print_json,
    source_from_args,
)
from predictive_headroom.commands.backtest import parse_protection, parse_quantiles, parse_windows
from predictive_headroom.core.series import NoForecast
from predictive_headroom.policy.config import Pool

HELP = "find the cheapest burst quantile and stabilisation window reaching a protection target on a pool's history"
DEFAULT_PROTECTION = 0.95
EXAMPLE = "predictive-headroom tune --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv --protection 95%   # after make demo"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="policy YAML file")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="CSV", help="demand history CSV (timestamp,value)")
    source.add_argument("--prometheus-url", metavar="URL", help="Prometheus base URL")
    parser.add_argument("--pool", help="pool to tune (default: the first with a forecast)")
    parser.add_argument(
        "--protection",
        help="absorb at least this share of the pod-minutes that would otherwise wait for a node "
        "(e.g. 95%%; default: the pool's protection, else 95%%)",
    )
    parser.add_argument(
        "--quantiles", metavar="Q[,Q...]", help="burst quantiles to try (default 0.3 ... 0.99)"
    )
    parser.add_argument(
        "--windows", metavar="D[,D...]", help="stabilisation windows to try (default 5m,15m,30m)"
    )
    parser.add_argument(
        "--refit-every",
        type=duration_arg,
        default=2 * 86400.0,
        help="refit interval of the replay (default 2d: half the fits of the backtest's daily "
        "refits, for speed)",
    )
    parser.add_argument(
        "--warmup",
        type=duration_arg,
        help="unscored start of the history (default 14d; 7d for histories under 28d)",
    )
    parser.add_argument(
        "--at", help="tune on history up to this ISO-8601 time (default: now / end of --data)"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_output_argument(parser)


def _pool(args: argparse.Namespace) -> Pool:
    policy = load_config(args.config)
    if args.pool:
        try:
            pool = policy.pool(args.pool)
        except KeyError as exc:
            raise CommandError(f"{args.config}: {exc.args[0]}") from None
    else:
        pool = next((p for p in policy.pools if p.forecast is not None), policy.pools[0])
    if pool.forecast is None:
        raise CommandError(
            f"pool {pool.name} has no forecast section in {args.config}: tune needs its demand query"
        )
    return pool


def run(args: argparse.Namespace) -> int:
    pool = _pool(args)
    try:
        target = (
            parse_protection(args.protection)
            if args.protection
            else (pool.protection or DEFAULT_PROTECTION)
        )
        quantiles = parse_quantiles(args.quantiles) if args.quantiles else ()
        windows = parse_windows(args.windows) if args.windows else ()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    source = source_from_args(args.data, args.prometheus_url)
    if args.at:
        at = parse_time(args.at)
    else:
        full = getattr(source, "full", None)
        at = full().end if full else parse_time("now")
    history = fetch_history(pool, source, at)
    if isinstance(history, NoForecast):
        raise CommandError(f"pool {pool.name}: {history.detail}")
    if args.refit_every < 60:
        raise CommandError(f"--refit-every must be at least 1m, got {args.refit_every:g}s")
    settings = BacktestSettings(
        dial=quantiles,
        stabilization_dial=windows,
        protections=(target,),
        burst_view=False,
        refit_every_seconds=args.refit_every,
        warmup_seconds=args.warmup,
    )
    started = time.perf_counter()
    try:
        result = run_backtest(history, pool, settings, progress=not args.quiet)
    except ValueError as exc:
        raise CommandError(f"pool {pool.name}: too little history to tune: {exc}") from None
    out = recommend(result, pool, target)
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.output == "json":
        print_json(out)
    else:
        print_recommendation(out)
    if out["status"] == "unreachable":
        return 1
    return 0


def _cost(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f}"


def print_recommendation(out: dict[str, Any]) -> None:
    """The recommendation in words, the YAML to paste first."""
    target = f"{100 * out['protection_target']:g}%"
    chosen = out["chosen"]
    window = f"{chosen['scale_down_stabilization_seconds'] / 60:g}m"
    h = out["history"]
    print(
        f"pool {out['pool']}: history {h['from']} .. {h['to']}, scored from {h['scored_from']} "
        f"({h['refits']} refits, {out['seconds']:g} s)"
    )
    print(
        f"target: absorb at least {target} of the pod-minutes that would otherwise wait for a node"
    )
    if out["status"] == "unreachable":
        static = out["static"]
        print(
            f"no setting reaches {target} on this history: the best, burstQuantile "
            f"{chosen['burst_quantile']:g} with scaleDownStabilization {window}, reached "
            f"{100 * chosen['protection']:.1f}% for {chosen['overhead_node_hours']:.1f} overhead node-hours"
            + (
                f"; static headroom reaches it with {static['replicas']} placeholders"
                if static
                else ""
            )
        )
        return
    if out["status"] == "forecast":
        print("recommended (paste into the pool):")
    else:
        which = out["status"].removesuffix("-cheaper")
        words = "static headroom" if which == "static" else "the proportional rule"
        why = (
            "is cheaper than the forecast"
            if chosen["protection"] >= out["protection_target"]
            else f"reaches {target} where no forecast setting does"
        )
        print(f"{words} {why} on this history; recommended instead (paste into the pool):")
    for line in out["yaml"]:
        print(f"  {line}")
    print(
        f"the forecast at burstQuantile {chosen['burst_quantile']:g}, scaleDownStabilization {window} "
        f"absorbed {100 * chosen['protection']:.1f}% for {chosen['overhead_node_hours']:.1f} overhead node-hours"
    )
    wf = out["walk_forward"]
    print(
        f"chosen walk-forward (each day's setting from the days before it) it costs "
        f"{_cost(wf['cost_at_target'])} node-hours at {target} (best reached {100 * wf['reached']:.1f}%)"
    )
    cost = out["cost_at_target"]
    print(
        f"cost at {target} (overhead node-hours over no headroom): forecast {_cost(cost['forecast tuned'])}, "
        f"static {_cost(cost['static'])}, naive {_cost(cost['naive tuned'])}, "
        f"proportional {_cost(cost['proportional'])} "
        f"(it absorbs {100 * out['proportional']['protection']:.1f}%), oracle {_cost(cost['oracle'])}"
    )
    if out["runner_ups"]:
        print("runner-ups:")
        for r in out["runner_ups"]:
            print(
                f"  burstQuantile {r['burst_quantile']:g}, scaleDownStabilization "
                f"{r['scale_down_stabilization_seconds'] / 60:g}m: {100 * r['protection']:.1f}% "
                f"for {r['overhead_node_hours']:.1f} node-hours"
            )
    sys.stdout.flush()
