"""`predictive-headroom backtest`: replay demand history (a CSV, or a Prometheus query) through every strategy on a simulated cluster."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from predictive_headroom.backtest.against_fixed import current, replays
from predictive_headroom.backtest.daemon_walk import daemon_walk
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.results import BacktestResult, headline
from predictive_headroom.backtest.run import parts_reader, run_backtest
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
    daemon_choice,
    daemon_retune_window,
    duration_arg,
    iso,
    load_config,
    parse_time,
    price_from_args,
    print_json,
    source_from_args,
)
from predictive_headroom.commands.current import add_current_arguments, currents_from_args
from predictive_headroom.commands.replay_flags import add_replay_arguments, settings_from_args
from predictive_headroom.core.budget import daily_budget
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import History
from predictive_headroom.core.settings import Given, asked_protection
from predictive_headroom.core.verdict import why_they_differ
from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.durations import parse_windows
from predictive_headroom.policy.placeholder import Placeholder
from predictive_headroom.policy.promql import check_promql
from predictive_headroom.policy.shares import parse_protections, parse_quantiles, parse_share
from predictive_headroom.protocols import Source, SourceError
from predictive_headroom.sources.csvsource import CsvSource, write_csv_history

if TYPE_CHECKING:
    from predictive_headroom.replay.refit_cache import CacheSpec

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
    add_replay_arguments(parser)
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
    add_price_arguments(parser)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write backtest.html and backtest.png (cost/protection plot) here",
    )
    add_current_arguments(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_output_argument(parser)


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
    return replace(
        result,
        promise=[
            replace(
                e,
                price_per_node_hour=price.node_hour,
                currency=price.currency,
                price_assumed=price.assumed,
            )
            for e in result.promise or []
        ],
    )


def with_daemon_walk(result: BacktestResult, pool: Pool | None, price: Price) -> BacktestResult:
    """Each promise entry with the daemon walked forward at its protection
    (`backtest.daemon_walk`: each day `tune`'s choice on the days before it, within the pool's
    `budget:` when it has one)."""
    budget = None
    if pool is not None and pool.budget is not None:
        try:
            b = daily_budget(pool.budget, price)
            budget = (b.node_hours, b.given)
        except ValueError as exc:
            raise CommandError(f"pool {pool.name}: {exc}") from None
    r = replays(result, tuple(e.protection for e in result.promise or []))
    entries = [
        replace(e, daemon_walk=daemon_walk(r, e.protection, budget).to_dict())
        for e in result.promise or []
    ]
    return replace(result, promise=entries)


def with_daemon_now(
    result: BacktestResult,
    pool: Pool,
    source: Source,
    at: float,
    price: Price,
    cache: CacheSpec | None = None,
) -> BacktestResult:
    """Each promise entry with what the daemon would hold at the end of the data when asked that
    protection at `at`, the last sample (`app.review.daemon_now`: its re-tune on its own window
    and the plan it would write, with every registered component as the replay saw it), so
    `backtest`, `tune`, `plan` and `report` name the same setting and count; its fits kept in
    the refit cache at `cache` (None: fitted)."""
    from predictive_headroom.app.fit import default_forecaster
    from predictive_headroom.app.review import daemon_now

    forecaster, window = default_forecaster(), daemon_retune_window()
    if cache is not None:
        from predictive_headroom.replay.refit_cache import kept_fits  # lazy: joblib

        forecaster = kept_fits(forecaster, cache)
    parts = parts_reader(result, pool, at, price)
    entries = []
    for entry in result.promise or []:
        what_if = Given(protection=entry.protection)  # through the resolver, as a flag
        now = daemon_now(
            pool,
            source,
            at,
            forecaster,
            price,
            retune_window=window,
            given=what_if,
            parts=parts,
            choice=daemon_choice(),
        )
        entries.append(replace(entry, daemon_now=now.to_dict()))
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
        from predictive_headroom.sources.prometheus import PrometheusSource

        assert isinstance(source, PrometheusSource)  # no --data: --prometheus-url
        query, step, span = _prometheus_read(args, pool)
        return source, source.series(query, step, span, _end(args))
    except SourceError as exc:
        raise CommandError(str(exc)) from None


def _prometheus_read(args: argparse.Namespace, pool: Pool | None) -> tuple[str, float, float]:
    """What to read from Prometheus, as (query, step, span) in seconds: --query (else the pool's
    forecast.query) over --history (else the pool's forecast.history, 28d) at the pool's step
    (5m)."""
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
    if args.history is not None and args.history < 86400:
        raise CommandError(f"--history must be at least 1d, got {args.history:g}s")
    if spec is None:  # --query alone: a forecast section's defaults
        fields = ForecastSpec.model_fields
        query, step, span = args.query, fields["step"].default, fields["history"].default
    else:
        query = spec.query if args.query is None else args.query
        step, span = spec.step, spec.history
    span_seconds = span.total_seconds() if args.history is None else args.history
    return query, step.total_seconds(), span_seconds


def _end(args: argparse.Namespace) -> float:
    return parse_time(args.at) if args.at else parse_time("now")


def run(args: argparse.Namespace) -> int:
    pool = pool_from_args(args)
    cost = load_config(args.config).cost if args.config else None
    placeholder = pool.placeholder if pool is not None else Placeholder()
    price = price_from_args(args, placeholder, cost, args.node_slots)[0]
    settings = settings_from_args(args, price, grid_flags)
    currents = currents_from_args(args)  # before any history is read
    if currents and not settings.protections:  # the user's N is read against the promise
        settings = replace(settings, protections=(asked_protection(pool).value,))
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
    if currents:
        r = replays(result, settings.protections)
        result = replace(result, current=[current(r, n).to_dict(price) for n in currents])
    if result.promise:
        result = priced(result, price)
        result = with_daemon_walk(result, pool, price)
        if pool is not None and pool.forecast is not None:
            read = source
            if args.query is not None:  # the daemon reads the series replayed
                from predictive_headroom.sources.prometheus import OneQuery, PrometheusSource

                assert isinstance(source, PrometheusSource)  # --query reads from Prometheus
                read = OneQuery(source, args.query)
            result = with_daemon_now(
                result, pool, read, float(history.end), price, settings.refit_cache
            )
    s = result.settings
    if not args.quiet:
        print(
            f"backtest: demand per replica {s.demand_per_replica:g} ({s.demand_per_replica_source}); "
            f"median app pods {s.median_app_pods:g}; scored {iso(s.scored_from)} to {iso(s.scored_to)}",
            file=sys.stderr,
        )
    if args.out:
        from predictive_headroom.backtest.page import write_report

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
    if result.settings.proportional_rule != "config":
        print(
            f"proportional: the pool has no proportional rule, so this row replays "
            f"{result.settings.proportional_rule.removeprefix('default: ')}, a common "
            "overprovisioning setting not sized to this traffic; add the pool's own to replay it"
        )
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
        _print_promise(result)
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
    if result.promise:  # the verdict against fixed headroom is the promise's (`core.verdict`)
        said = headline(result)
        print(
            f"without the promise (the pool's own setting, not tuned): {said[:1].lower()}{said[1:]}"
        )
    else:
        print(headline(result))
    for c in result.current or []:
        print(c["says"])


def _print_promise(result: BacktestResult) -> None:
    """The promise section of `print_text`: each level's sentence, then the table."""
    print()
    s = result.settings
    print(
        "the promise (protection: P replayed as the daemon keeps it, each day's setting "
        f"and reserve chosen on the days before it; scored {iso(s.scored_from)} to "
        f"{iso(s.scored_to)}, refit every {s.refit_every_seconds / 3600:g} h, as `tune`):"
    )
    for entry in result.promise:
        print(f"  {sentence(entry)}")
        if entry.daemon_walk:
            print(f"    {entry.daemon_walk['says']}")
        if entry.daemon_now:
            print(f"    {entry.daemon_now['sentence']}")
            daemon = (entry.daemon_now.get("promise") or {}).get("against_fixed")
            for c in result.current or []:
                if note := why_they_differ(c.get("verdict") or {}, daemon):
                    print(f"    note: {note}")
    if result.promise[0].price_assumed:
        print(f"  priced as {result.promise[0].price_assumed}")
    print(
        "overhead node-hours over no headroom; daily reserve: a fixed reserve re-chosen each "
        "day on the week before it; static in hindsight: N chosen knowing the whole history; "
        "÷ promise: their cost over the promise's, at the protection it kept:"
    )
    print(format_promise(result.promise))


def grid_flags(
    args: argparse.Namespace, problems: list[str]
) -> tuple[float | None, tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """`backtest`'s --quantile, --dial, --stabilization-dial and --protection (`tune` has its own), each problem appended to `problems`."""
    quantile = None
    if getattr(args, "quantile", None) is not None:
        try:
            quantile = parse_share(args.quantile, what="a quantile")
        except ValueError as exc:
            problems.append(f"--quantile: {exc}")
        else:
            if not 0 < quantile < 1:
                problems.append(f"--quantile must be between 0 and 1 (exclusive), got {quantile:g}")
    dial: tuple[float, ...] = ()
    if getattr(args, "dial", None):
        try:
            dial = parse_quantiles(args.dial)
        except ValueError as exc:
            problems.append(f"--dial: {exc}")
    windows: tuple[float, ...] = ()
    if getattr(args, "stabilization_dial", None):
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
    return quantile, dial, windows, protections
