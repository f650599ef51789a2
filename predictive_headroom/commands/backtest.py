"""`predictive-headroom backtest`: replay demand history (a CSV, or a Prometheus query) through every strategy on a simulated cluster."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import timedelta

from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.results import BacktestResult, BacktestSettings, headline
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.backtest.text import (
    format_dial,
    format_frontier,
    format_interruptions,
    format_promise,
    format_stabilization_dial,
    format_table,
)
from predictive_headroom.commands import (
    CommandError,
    add_csv_arguments,
    add_output_argument,
    add_price_arguments,
    csv_options,
    daemon_retune_window,
    duration_arg,
    iso,
    load_config,
    parse_time,
    price_from_args,
    print_json,
    source_from_args,
)
from predictive_headroom.core.price import NodeShape, Price
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import Given
from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.disruption import parse_rate
from predictive_headroom.policy.durations import parse_duration, parse_windows
from predictive_headroom.policy.placeholder import Placeholder
from predictive_headroom.policy.promql import check_promql
from predictive_headroom.policy.shares import parse_protections, parse_quantiles, parse_share
from predictive_headroom.protocols import Source, SourceError
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf
from predictive_headroom.sources.csvsource import CsvSource, write_csv_history

HELP = "backtest strategies (reactive, static, proportional, schedule, forecast, naive, oracle) on demand history (a CSV or Prometheus)"
EXAMPLE = (
    "predictive-headroom backtest --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv --dial 0.8,0.9,0.95,0.99 --out bt   # after make demo\n"
    "predictive-headroom backtest --data demo-out/taxi-demand.csv --demand-per-replica 200 --protection 90%,95%\n"
    "predictive-headroom backtest --prometheus-url http://prometheus:9090 --config my-policy.yaml --pool web --history 35d --save-csv web.csv"
)
"""Shown at the end of `--help`."""


# Long on purpose: argparse declarations read best as one flat list.
def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_csv_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="CSV", help="demand history CSV (timestamp,value)")
    source.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="read the history from this Prometheus (auth from the PH_PROMETHEUS_* settings), "
        "the query from --query or the pool's forecast.query (--config, --pool)",
    )
    parser.add_argument(
        "--query", metavar="PROMQL", help="with --prometheus-url: the demand series to replay"
    )
    parser.add_argument(
        "--history",
        type=duration_arg,
        help="with --prometheus-url: how much history to read up to --at (default: the pool's "
        "forecast.history, else 28d; the backtest needs at least the warm-up and a day)",
    )
    parser.add_argument(
        "--at",
        help="with --prometheus-url: the end of the history read, ISO-8601 (default: now)",
    )
    parser.add_argument(
        "--save-csv",
        metavar="FILE",
        help="write the history replayed as timestamp,value CSV (e.g. to replay it again with --data)",
    )
    parser.add_argument(
        "--config",
        "-c",
        help="policy YAML: the pool's windows, CPA rule, forecast spec and lead time are replayed",
    )
    parser.add_argument(
        "--pool", help="pool to replay (default: the first pool with a forecast, else the first)"
    )
    parser.add_argument(
        "--since",
        type=_duration_arg,
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
        help="placeholder-sized slots per node (default: as many as fit in --node-cpu and "
        "--node-memory, else 8)",
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
        "--quantile",
        help="burst quantile, the protection/cost dial (default: the pool's, 0.95)",
    )
    parser.add_argument(
        "--dial",
        metavar="Q[,Q...]",
        help="also replay forecast and naive at each of these burst quantiles (e.g. 0.8,0.9,0.95,0.99): the dial's price, no extra fits",
    )
    parser.add_argument(
        "--stabilization-dial",
        metavar="D[,D...]",
        help="also replay forecast and naive with each of these scale-down stabilisation windows (e.g. 5m,15m,30m), no extra fits",
    )
    parser.add_argument(
        "--protection",
        metavar="P[,P...]",
        help="read each family's cost at these protections (e.g. 90%%,95%%: the share of the "
        "pod-minutes that would wait for a node without headroom that it absorbs); replays "
        "forecast and naive over the grid of --dial quantiles and --stabilization-dial windows "
        "(defaults 0.3-0.99 and 5m,15m,30m) and tunes them walk-forward",
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
        help="cores per simulated node for a CPA cores rule (default: --node-cpu, else 8)",
    )
    add_price_arguments(parser)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write backtest.html and backtest.png (cost/protection plot) here",
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
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_output_argument(parser)


def _duration_arg(text: str) -> float:
    """Seconds of a duration argument (`60d`); argparse says what is wrong with a bad one."""
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Long on purpose: one check per flag, so every problem is reported at once, then one mapping.
def settings_from_args(
    args: argparse.Namespace, shape: NodeShape | None = None, slots: int | None = None
) -> BacktestSettings:
    """Check the numeric flags (every problem at once) and build the settings; `shape` is the
    node the flags gave (`price_from_args`), which sizes the simulated node unless
    `--node-slots` / `--cores-per-node` say otherwise (`slots`: the placeholders it holds)."""
    problems = []
    if args.demand_per_replica is not None and not args.demand_per_replica > 0:
        problems.append(f"--demand-per-replica must be positive, got {args.demand_per_replica:g}")
    if args.node_slots is not None and args.node_slots < 1:
        problems.append(f"--node-slots must be at least 1, got {args.node_slots}")
    if args.refit_every < 60:
        problems.append(f"--refit-every must be at least 1m, got {args.refit_every:g}s")
    quantile = None
    if args.quantile is not None:
        try:
            quantile = parse_share(args.quantile, what="a quantile")
        except ValueError as exc:
            problems.append(f"--quantile: {exc}")
        else:
            if not 0 < quantile < 1:
                problems.append(f"--quantile must be between 0 and 1 (exclusive), got {quantile:g}")
    dial: tuple[float, ...] = ()
    if args.dial:
        try:
            dial = parse_quantiles(args.dial)
        except ValueError as exc:
            problems.append(f"--dial: {exc}")
    windows: tuple[float, ...] = ()
    if args.stabilization_dial:
        try:
            windows = parse_windows(args.stabilization_dial)
        except ValueError as exc:
            problems.append(f"--stabilization-dial: {exc}")
    protections: tuple[float, ...] = ()
    if getattr(args, "protection", None):
        try:
            protections = parse_protections(args.protection)
        except ValueError as exc:
            problems.append(f"--protection: {exc}")
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
    if problems:
        raise CommandError("; ".join(problems))
    nodes = SimulatedNodes()
    nodes = SimulatedNodes(
        node_slots=args.node_slots or (slots if shape is not None and slots else nodes.node_slots),
        lag_seconds=args.lag,
        scale_down_delay_seconds=args.scale_down_delay,
        cores_per_node=args.cores_per_node
        or (shape.cpu if shape is not None else nodes.cores_per_node),
    )
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
    )


def pool_from_args(args: argparse.Namespace) -> Pool | None:
    """The pool named by --pool (or the first forecasting pool) of --config; None without --config."""
    if not args.config:
        if args.pool:
            raise CommandError("--pool needs --config")
        return None
    policy = load_config(args.config)
    if args.pool:
        try:
            return policy.pool(args.pool)
        except KeyError as exc:
            raise CommandError(f"{args.config}: {exc.args[0]}") from None
    return next((p for p in policy.pools if p.forecast is not None), policy.pools[0])


def priced(result: BacktestResult, price: Price) -> BacktestResult:
    """`result` with each promise entry priced per node-hour (`core.price`: one price for every
    command and page) and the assumption in words."""
    extra = {
        "price_per_node_hour": price.node_hour,
        "currency": price.currency,
        "price_assumed": price.assumed,
    }
    return replace(result, promise=[{**e, **extra} for e in result.promise or []])


def with_daemon_now(
    result: BacktestResult, pool: Pool, source: Source, at: float, price: Price
) -> BacktestResult:
    """Each promise entry with what the daemon would hold at the end of the data when asked that
    protection at `at`, the last sample (`app.review.daemon_now`: its re-tune on its own window
    and the plan it would write), so `backtest`, `tune`, `plan` and `report` name the same setting and count."""
    from predictive_headroom.app.fit import default_forecaster
    from predictive_headroom.app.review import daemon_now

    forecaster, window = default_forecaster(), daemon_retune_window()
    entries = []
    for entry in result.promise or []:
        asked = pool.model_copy(update={"protection": entry["protection"]})
        now = daemon_now(asked, source, at, forecaster, price, retune_window=window)
        entries.append({**entry, "daemon_now": now.to_dict()})
    return replace(result, promise=entries)


def history_from_args(args: argparse.Namespace, pool: Pool | None) -> tuple[Source, History]:
    """The source and the demand history to replay: the whole --data file, or --query (else the
    pool's forecast.query) over --history up to --at from --prometheus-url, read through the
    source the other commands use (in pieces below Prometheus's per-request point limit)."""
    if args.data:
        for flag in ("query", "history", "at"):
            if getattr(args, flag) is not None:
                raise CommandError(f"--{flag} reads from Prometheus: use it with --prometheus-url")
    source = source_from_args(args.data, args.prometheus_url, csv=csv_options(args))
    try:
        if isinstance(source, CsvSource):
            return source, source.full()
        return source, source.history(prometheus_spec(args, pool), _end(args))
    except SourceError as exc:
        raise CommandError(str(exc)) from None


def prometheus_spec(args: argparse.Namespace, pool: Pool | None) -> ForecastSpec:
    """What to read from Prometheus: --query (else the pool's forecast.query) over --history
    (else the pool's forecast.history, 28d) at the pool's step (5m)."""
    spec = pool.forecast if pool is not None else None
    if args.query is None and spec is None:
        raise CommandError(
            "--prometheus-url needs the series to replay: pass --query PROMQL, or --config F "
            "(--pool NAME) for a pool with a forecast.query"
        )
    if args.query is not None:
        try:
            check_promql(args.query)
        except ValueError as exc:
            raise CommandError(f"--query: {exc}") from None
    base = spec or ForecastSpec(query=args.query, demand_per_replica=1.0)
    update: dict[str, object] = {}
    if args.query is not None:
        update["query"] = args.query
    if args.history is not None:
        if args.history < 86400:
            raise CommandError(f"--history must be at least 1d, got {args.history:g}s")
        update["history"] = timedelta(seconds=args.history)
    return base.model_copy(update=update)


def _end(args: argparse.Namespace) -> float:
    return parse_time(args.at) if args.at else parse_time("now")


def run(args: argparse.Namespace) -> int:
    pool = pool_from_args(args)
    cost = load_config(args.config).cost if args.config else None
    placeholder = pool.placeholder if pool is not None else Placeholder()
    price, shape = price_from_args(args, placeholder, cost, args.node_slots)
    settings = settings_from_args(args, shape, price.slots)
    source, history = history_from_args(args, pool)
    if args.since is not None and len(history):
        history = history.since(history.end - args.since)
    if args.save_csv:
        try:
            write_csv_history(history, args.save_csv)
        except OSError as exc:
            raise CommandError(f"--save-csv {args.save_csv}: {exc.strerror or exc}") from None
        if not args.quiet:
            print(f"backtest: wrote the history replayed to {args.save_csv}", file=sys.stderr)
    try:
        result = run_backtest(history, pool, settings, progress=not args.quiet)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if result.promise:
        result = priced(result, price)
        if pool is not None and pool.forecast is not None:
            replayed = pool
            if args.query is not None:  # the daemon reads the series replayed
                replayed = pool.model_copy(
                    update={"forecast": pool.forecast.model_copy(update={"query": args.query})}
                )
            result = with_daemon_now(result, replayed, source, float(history.end), price)
    s = result.settings
    if not args.quiet:
        print(
            f"backtest: demand per replica {s.demand_per_replica:g} ({s.demand_per_replica_source}); "
            f"median app pods {s.median_app_pods:g}; scored {iso(s.scored_from)} to {iso(s.scored_to)}",
            file=sys.stderr,
        )
    if args.out:
        from predictive_headroom.backtest.plot import write_report

        page, png = write_report(result, args.out)
        print(f"backtest: wrote {page} and {png}", file=sys.stderr)
    if args.output == "json":
        print_json(result.to_dict())
    else:
        print_text(result)
    return 0


def print_text(result: BacktestResult) -> None:
    """The backtest as text on stdout: the strategy table, then each section the run has (dials,
    cost at equal protection, the promise, interruptions), then the headline."""
    for note in result.notes:
        print(f"note: {note}\n")
    print(format_table(result))
    if result.dial:
        print()
        print(
            "burst quantile dial (forecast and naive replayed at each; x vs static at equal node-hours):"
        )
        print(format_dial(result))
    if result.stabilization_dial:
        print()
        print(
            "scale-down stabilisation dial (forecast and naive replayed with each window; x vs static at equal node-hours):"
        )
        print(format_stabilization_dial(result))
    if result.frontier is not None:
        print()
        print(
            "cost at equal protection (overhead node-hours over no headroom; forecast and naive "
            "tuned walk-forward, static's N chosen in hindsight):"
        )
        print(format_frontier(result.frontier))
    if result.promise:
        print()
        s = result.settings
        print(
            "the promise (protection: P replayed as the daemon keeps it, each day's setting "
            f"and reserve chosen on the days before it; scored {iso(s.scored_from)} to "
            f"{iso(s.scored_to)}, refit every {s.refit_every_seconds / 3600:g} h, as `tune`):"
        )
        for entry in result.promise:
            print(f"  {sentence(entry)}")
            if entry.get("daemon_now"):
                print(f"    {entry['daemon_now']['sentence']}")
        if result.promise[0].get("price_assumed"):
            print(f"  priced as {result.promise[0]['price_assumed']}")
        print(
            "overhead node-hours over no headroom; daily reserve: a fixed reserve re-chosen each "
            "day on the week before it; static in hindsight: N chosen knowing the whole history; "
            "÷ promise: their cost over the promise's, at the protection it kept:"
        )
        print(format_promise(result.promise))
    if result.interruptions is not None:
        report = result.interruptions
        print()
        print(
            f"with nodes interrupted at {100 * 24 * report.rate_per_node_hour:g}%/day, "
            f"{report.notice_seconds:g} s notice (seed {report.seed}); planner strategies "
            "with the disruption component:"
        )
        print(format_interruptions(result))
    print()
    print(headline(result))
