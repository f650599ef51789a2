"""`predictive-headroom tune`: what `protection: P` keeps on a pool's own history, and for what.

Replays the pool's history through the backtest (refits see only the past; the replay flags are
`backtest`'s, `commands.replay_flags`) and the daemon's promise rule day by day
(`replay.promise`: each day's forecast setting and reserve chosen on the days before it). It leads
with the answer to "is it better than my fixed pause pods?" when given `--current N` or
`--current-from NS/NAME` (`backtest.against_fixed`), then the protection kept and its overhead
node-hours a day and a month (in money when priced), next to a fixed reserve re-chosen daily. The
YAML to paste is what the history can keep (`backtest.choice`): a protection level, fixed headroom
where the forecast did not pay, or the proportional rule when it absorbs P for less; a shortfall
names its cause (`core.shortfall`). Exit 1 when the promise fell short.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from predictive_headroom.app.choice import TuneChoice, choice_settings, choose_for_pool
from predictive_headroom.app.fit import default_forecaster, fetch_history
from predictive_headroom.app.review import daemon_now
from predictive_headroom.backtest.against_fixed import Recommended, Replays, current
from predictive_headroom.backtest.budget import at_your_spend
from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.recommend import recommend
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import parts_reader
from predictive_headroom.commands import (
    CommandError,
    add_csv_arguments,
    add_output_argument,
    add_price_arguments,
    csv_options,
    daemon_choice,
    daemon_retune_window,
    load_config,
    parse_time,
    price_from_args,
    print_json,
    source_from_args,
)
from predictive_headroom.commands.budget import add_budget_argument, budget_node_hours
from predictive_headroom.commands.current import add_current_arguments, currents_from_args
from predictive_headroom.commands.replay_flags import add_replay_arguments, settings_from_args
from predictive_headroom.core.budget import daily_budget
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import History, NoForecast
from predictive_headroom.core.settings import Given, SettingSource, asked_protection
from predictive_headroom.core.verdict import why_they_differ
from predictive_headroom.core.vocabulary import TuningStatus
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.durations import parse_windows
from predictive_headroom.policy.shares import parse_protection, parse_quantiles
from predictive_headroom.protocols import Forecaster, SourceError
from predictive_headroom.replay.promise import PROMISE_QUANTILES

HELP = (
    "is the forecast better than your fixed pause pods (--current N), within your spend "
    "(--budget)? the cheapest burst quantile and stabilisation window reaching a protection "
    "target on a pool's history"
)
EXAMPLE = "predictive-headroom tune --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv --protection 95%   # after make demo"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="policy YAML file")
    add_csv_arguments(parser)
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
        "--quantiles",
        metavar="Q[,Q...]",
        help="burst quantiles to replay (default: the five the daemon chooses among, 0.5 ... 0.99)",
    )
    parser.add_argument(
        "--windows", metavar="D[,D...]", help="stabilisation windows to try (default 5m,15m,30m)"
    )
    add_replay_arguments(parser)
    parser.add_argument(
        "--at", help="tune on history up to this ISO-8601 time (default: now / end of --data)"
    )
    add_current_arguments(parser)
    add_budget_argument(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_price_arguments(parser)
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


# Long on purpose: the command's steps in order (parse, read, replay, recommend, the daemon's view,
# print), each a call or two.
def run(args: argparse.Namespace) -> int:
    policy, pool = _pool(args)
    try:
        flag = parse_protection(args.protection) if args.protection else None
        asked = asked_protection(pool, flag)
        quantiles = parse_quantiles(args.quantiles) if args.quantiles else PROMISE_QUANTILES
        windows = parse_windows(args.windows) if args.windows else ()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    target = asked.value
    price = price_from_args(args, pool.placeholder, policy.cost, args.node_slots)[0]
    settings = _settings(args, price, quantiles, windows, target)
    currents = currents_from_args(args)  # before any history is read
    budget, budget_yaml = _budget(args, pool, price)
    source = source_from_args(args.data, args.prometheus_url, csv=csv_options(args))
    if args.at:
        at = parse_time(args.at)
    else:
        full = getattr(source, "full", None)
        at = full().end if full else parse_time("now")
    history = _history(pool, source, at)
    if args.since is not None and len(history):
        history = history.since(history.end - args.since)
    started = time.perf_counter()
    forecaster = default_forecaster()
    try:  # tune's choice, the one call the daemon's refit makes too (`app.choice`)
        pc = choose_for_pool(
            pool,
            history,
            target,
            forecaster,
            settings,
            budget=budget,
            progress=not args.quiet,
            yours=currents,
        )
    except ValueError as exc:
        raise CommandError(f"pool {pool.name}: too little history to tune: {exc}") from None
    result, r = pc.result, pc.replays
    out = recommend(
        result, pool, target, price=price.node_hour, currency=price.currency, priced=price
    )
    out["cost"]["assumed"] = price.assumed
    out["history_read"] = pc.read
    out["current"] = [current(r, n).to_dict(price) for n in currents]
    choice = pc.choice.at_protection
    out["recommendation"] = choice.to_dict()
    out["choice"] = pc.choice.to_dict()
    out["yaml"] = choice.yaml(pool) if out["status"] != "proportional-cheaper" else out["yaml"]
    _within_budget(out, pc.choice, r, pool, currents, price, budget_yaml)
    # What the daemon holds at the end of the history: the same call the daemon makes at a refit
    # (its re-tune on its own window, the promise as asked) and the plan it would write then.
    own = asked.source is SettingSource.CONFIGURED  # the pool's own promise: no what-if
    what_if = Given(protection=None if own else target)
    now = daemon_now(
        pool,
        source,
        at,
        _kept(forecaster, settings),  # its two fits kept across runs as the refits are
        price,
        retune_window=daemon_retune_window(),
        given=what_if,
        choice=daemon_choice(),
        parts=parts_reader(
            result, pool, at, price
        ),  # every registered component, as the replay saw it
    )
    out["daemon_now"] = now.to_dict()
    out["seconds"] = round(time.perf_counter() - started, 1)
    if args.output == "json":
        print_json(out)
    else:
        print_recommendation(out)
    nothing = budget is not None and out["recommendation"] is None
    return 1 if out["status"] == "short" or nothing else 0


def _kept(forecaster: Forecaster, settings: BacktestSettings) -> Forecaster:
    """`forecaster` with its fits kept in the refit cache when the run keeps refits."""
    if settings.refit_cache is None:
        return forecaster
    from predictive_headroom.replay.refit_cache import kept_fits  # lazy: joblib

    return kept_fits(forecaster, settings.refit_cache)


def _budget(
    args: argparse.Namespace, pool: Pool, price: Price
) -> tuple[tuple[float, str] | None, str | None]:
    """The budget tune's choice is made within (`--budget`, else the pool's `budget:`), in
    overhead node-hours a day and words, and the `budget:` line to paste (None: no budget)."""
    if args.budget is not None:
        flag = args.budget
        key = "nodeHoursPerDay" if flag.currency is None else "perDay"
        amount = f"{flag.amount:g}" if flag.currency is None else f"{flag.amount:g} {flag.currency}"
        return budget_node_hours(flag, price), f"budget: {{{key}: {amount}}}"
    if pool.budget is None:
        return None, None
    try:
        b = daily_budget(pool.budget, price)
    except ValueError as exc:
        raise CommandError(f"pool {pool.name}: {exc}") from None
    return (b.node_hours, b.given), None


def _within_budget(
    out: dict[str, Any],
    choice: TuneChoice,
    r: Replays,
    pool: Pool,
    currents: tuple[int, ...],
    price: Price,
    budget_yaml: str | None,
) -> None:
    """What each `--current` N's spend buys (`at_your_spend`), and with a budget the
    recommendation and YAML within it (`backtest.budget`), none when nothing met it; `--budget`
    is pasted as the pool's `budget:` (`budget_yaml`), so the daemon holds it too."""
    out["at_your_spend"] = [at_your_spend(r, n).to_dict(price) for n in currents]
    advice = choice.budget
    if advice is None:
        return
    rec = advice.recommendation
    out["budget"] = advice.to_dict()
    out["at_protection"] = out["recommendation"]  # tune's rule at the protection asked
    out["recommendation"] = None if rec is None else rec.to_dict()
    out["yaml"] = [] if rec is None else rec.yaml(pool)
    if rec is not None and budget_yaml is not None:
        out["yaml"].append(budget_yaml)


def _settings(
    args: argparse.Namespace,
    price: Price,
    quantiles: tuple[float, ...],
    windows: tuple[float, ...],
    target: float,
) -> BacktestSettings:
    """The replay `backtest` would run with the same flags (`commands.replay_flags`: the node
    priced, unless --node-slots says otherwise), at tune's grid, measuring the frontier's levels
    and `target` (the promise rule is cheap)."""
    base = settings_from_args(args, price)
    return choice_settings(target, base=base, quantiles=quantiles, windows=windows)


def _history(pool: Pool, source: object, at: float) -> History:
    """The history replayed: all of a CSV up to `at` (as `backtest --data` reads it), else the
    pool's `forecast.history` from Prometheus."""
    full = getattr(source, "full", None)
    if full is not None:
        try:
            return full().until(at)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
    history = fetch_history(pool, source, at)  # type: ignore[arg-type]
    if isinstance(history, NoForecast):
        raise CommandError(f"pool {pool.name}: {history.detail}")
    return history


def _days(seconds: float) -> str:
    """`1d`, `12h`."""
    return f"{seconds / 86400:g}d" if seconds % 86400 == 0 else f"{seconds / 3600:g}h"


def _nh(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def print_recommendation(out: dict[str, Any]) -> None:
    """The promise first (walk-forward), the YAML to paste, then hindsight and warnings."""
    target = f"{100 * out['protection_target']:g}%"
    h = out["history"]
    print(
        f"pool {out['pool']}: history {h['from']} .. {h['to']}, scored from {h['scored_from']} "
        f"({h['refits']} refits, {out['seconds']:g} s)"
    )
    for c in out.get("current") or []:  # the headline: "is it better than my fixed N?"
        print(c["says"])
    _print_promise(out, target)
    cause = ((out.get("daemon_now") or {}).get("promise") or {}).get("cause") or {}
    if cause.get("cause") == "warm-up":  # what holds until the daemon's re-tune starts
        print(f"the daemon now: {cause['says']}")
    if out.get("budget"):
        print(out["budget"]["says"])
    elif out.get("recommendation"):
        print(out["recommendation"]["says"])
    for spend in out.get("at_your_spend") or []:
        print(spend["says"])
    _print_paste(out)
    if out.get("daemon_now"):  # the daemon's own view at the end of the data
        print(out["daemon_now"]["sentence"])
        daemon = (out["daemon_now"].get("promise") or {}).get("against_fixed")
        for c in out.get("current") or []:
            if note := why_they_differ(c.get("verdict") or {}, daemon):
                print(f"note: {note}")
    days = (out.get("promise") or {}).get("days")
    print(_hindsight_line(out["hindsight"], out["static"], target, days))
    _print_frontier(out.get("price_of_promise"))
    for warning in out["warnings"]:
        print(f"warning: {warning}")
    sys.stdout.flush()


def _print_frontier(price: dict[str, Any] | None) -> None:
    """The price of the promise when it cost more than static headroom in hindsight, then the
    frontier: per protection asked, what it kept walk-forward and for how much a day."""
    if not price:
        return
    if price["says"]:
        print(f"the price of the promise: {price['says']}")
    print("asked   kept    node-h/day  money/day  static in hindsight node-h/day")
    for lv in price["frontier"]:
        kept = "–" if lv["kept"] is None else f"{100 * lv['kept']:.1f}%"
        money = "–" if lv["money_per_day"] is None else f"{lv['money_per_day']:,.2f}"
        asked = f"{100 * lv['asked']:g}%"
        print(
            f"{asked:<7} {kept:<7} {lv['overhead_node_hours_per_day']:>10,.1f}  "
            f"{money:>9}  {_nh(lv['static_hindsight_node_hours_per_day'])}"
        )


def _print_promise(out: dict[str, Any], target: str) -> None:
    """Print the target in words and the walk-forward sentence."""
    h = out["history"]
    print(
        f"target: absorb at least {target} of the pod-minutes that would otherwise wait for a node"
    )
    cost = out["cost"]
    price = cost["price_per_node_hour"]
    print(
        f"walk-forward over the whole history (refit every {_days(h['refit_every_seconds'])}, each "
        "day's setting and reserve chosen on the days before it, as the daemon does): "
        f"{sentence(PromiseEntry.from_dict(out['promise']), price, cost['currency'])}."
    )
    if cost.get("assumed"):
        print(f"priced as {cost['assumed']}")


def _print_paste(out: dict[str, Any]) -> None:
    """Print why the YAML is recommended (by `status`) and the YAML itself, indented."""
    if not out["yaml"]:  # --budget that nothing met: its sentence said so
        return
    if out["status"] == "proportional-cheaper" and not out.get("budget"):
        p = out["proportional"]
        print(
            f"the proportional rule absorbs {100 * p['protection']:.1f}% for "
            f"{_nh(p['overhead_node_hours'])} overhead node-hours, less than the forecast keeps it "
            "for; recommended instead (paste into the pool):"
        )
    elif (out.get("recommendation") or {}).get("kind") == Recommended.FIXED:
        print(
            "fixed headroom is recommended on this history (paste into the pool and remove its "
            "protection:):"
        )
    elif (out.get("daemon_now", {}).get("promise") or {}).get("status") == TuningStatus.DEFAULT:
        print(
            "paste into the pool (the daemon re-tunes at each refit once its history is long "
            "enough; until then it holds the setting below):"
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


def _hindsight_line(
    hs: dict[str, Any], static: dict[str, Any] | None, target: str, days: float | None
) -> str:
    """The best fixed forecast setting in hindsight and what static headroom needs for `target`
    (or that it never gets there), as one line; their overhead node-hours a day over the `days`
    scored, as every figure beside it is (the totals when `days` is unknown, said so)."""

    def cost(node_hours: float) -> str:
        if days:
            return f"{_nh(node_hours / days)} overhead node-hours a day"
        return f"{_nh(node_hours)} overhead node-hours in all"

    return (
        "in hindsight (one setting for the whole history, known only afterwards): "
        f"burstQuantile {hs['burst_quantile']:g}, scaleDownStabilization "
        f"{hs['scale_down_stabilization_seconds'] / 60:g}m absorbed {100 * hs['protection']:.1f}% "
        f"for {cost(hs['overhead_node_hours'])}"
        + (
            f"; static headroom at {target}: {cost(static['overhead_node_hours'])}, read along "
            f"its curve (the fewest reaching it: {static['replicas']} placeholders)"
            if static
            else f"; static headroom never absorbs {target}"
        )
    )
