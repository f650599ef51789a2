"""`predictive-headroom tune`: what `protection: P` keeps on a pool's own history, and for what.

Replays the pool's history through the backtest (refits see only the past) and the daemon's
promise rule day by day (`backtest.promise`: each day's forecast setting and reserve chosen on
the days before it), and leads with the protection that kept and its overhead node-hours a day
and a month (in money when the policy has `cost:`), next to a fixed reserve re-chosen daily. The
YAML to paste is `protection: P` (or the proportional rule when it absorbs P for less); the best
fixed setting and static headroom in hindsight come second. Exit 1 when the promise fell short.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from predictive_headroom.app.fit import fetch_history
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.recommend import node_hour_price, recommend
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
from predictive_headroom.policy.config import Policy, Pool

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


def _pool(args: argparse.Namespace) -> tuple[Policy, Pool]:
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
    return policy, pool


def run(args: argparse.Namespace) -> int:
    policy, pool = _pool(args)
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
    out = recommend(
        result,
        pool,
        target,
        price=node_hour_price(policy.cost, settings.cores_per_node),
        currency=policy.cost.currency if policy.cost else "USD",
    )
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.output == "json":
        print_json(out)
    else:
        print_recommendation(out)
    return 1 if out["status"] == "short" else 0


def _nh(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def print_recommendation(out: dict[str, Any]) -> None:
    """The promise first (walk-forward), the YAML to paste, then hindsight and warnings."""
    target = f"{100 * out['protection_target']:g}%"
    _print_promise(out, target)
    _print_paste(out)
    if out["status"] != "proportional-cheaper":
        print(f"it would hold now: {_holding(out['now'])}")
    print(_hindsight_line(out["hindsight"], out["static"], target))
    for warning in out["warnings"]:
        print(f"warning: {warning}")
    sys.stdout.flush()


def _print_promise(out: dict[str, Any], target: str) -> None:
    """Print the history replayed, the target in words and the walk-forward sentence."""
    h = out["history"]
    print(
        f"pool {out['pool']}: history {h['from']} .. {h['to']}, scored from {h['scored_from']} "
        f"({h['refits']} refits, {out['seconds']:g} s)"
    )
    print(
        f"target: absorb at least {target} of the pod-minutes that would otherwise wait for a node"
    )
    cost = out["cost"]
    price = cost["price_per_node_hour"]
    print(
        "walk-forward (each day's setting and reserve chosen on the days before it, as the daemon "
        f"does): {sentence(out['promise'], price, cost['currency'])}."
    )


def _print_paste(out: dict[str, Any]) -> None:
    """Print why the YAML is recommended (by `status`) and the YAML itself, indented."""
    if out["status"] == "proportional-cheaper":
        p = out["proportional"]
        print(
            f"the proportional rule absorbs {100 * p['protection']:.1f}% for "
            f"{_nh(p['overhead_node_hours'])} overhead node-hours, less than the forecast keeps it "
            "for; recommended instead (paste into the pool):"
        )
    elif out["status"] == "short":
        print(
            "paste into the pool (the daemon re-tunes at each refit; while it falls short it "
            "holds the most protective setting and reserve it finds and warns):"
        )
    else:
        print("paste into the pool (the daemon re-tunes at each refit to keep it):")
    for line in out["yaml"]:
        print(f"  {line}")


def _placeholders(n: int) -> str:
    """`n placeholders`, singular for one."""
    return f"{n} placeholder{'s' if n != 1 else ''}"


def _holding(now: dict[str, Any]) -> str:
    """What the daemon would hold next, in words: static headroom of N placeholders when it chose
    no forecast setting, else the setting and its reserve (when there is one)."""
    if now["burst_quantile"] is None:
        return f"static headroom of {_placeholders(now['reserve'])}"
    return (
        f"burstQuantile {now['burst_quantile']:g}, scaleDownStabilization "
        f"{now['scale_down_stabilization_seconds'] / 60:g}m"
        + (f" and a reserve of {_placeholders(now['reserve'])}" if now["reserve"] else "")
    )


def _hindsight_line(hs: dict[str, Any], static: dict[str, Any] | None, target: str) -> str:
    """The best fixed forecast setting in hindsight and what static headroom needs for `target`
    (or that it never gets there), as one line."""
    return (
        "in hindsight (one setting for the whole history, known only afterwards): "
        f"burstQuantile {hs['burst_quantile']:g}, scaleDownStabilization "
        f"{hs['scale_down_stabilization_seconds'] / 60:g}m absorbed {100 * hs['protection']:.1f}% "
        f"for {_nh(hs['overhead_node_hours'])} overhead node-hours"
        + (
            f"; static headroom needs {static['replicas']} placeholders "
            f"({_nh(static['overhead_node_hours'])} overhead node-hours)"
            if static
            else f"; static headroom never absorbs {target}"
        )
    )
