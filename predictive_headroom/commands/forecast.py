"""`predictive-headroom forecast`: the fitted forecast, its next peaks and its accuracy."""

from __future__ import annotations

import argparse
from typing import Any

from predictive_headroom.app.fit import default_forecaster, fit_pools
from predictive_headroom.commands import (
    CommandError,
    add_csv_arguments,
    add_output_argument,
    csv_options,
    daemon_choice,
    daemon_retune_window,
    iso,
    load_config,
    parse_time,
    print_json,
    print_table,
    source_from_args,
)
from predictive_headroom.core.forecast_math import (
    PEAK_RADIUS_SECONDS,
    BurstAllowance,
    burst_allowances,
    local_peaks,
)
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.forecast.accuracy import Accuracy
from predictive_headroom.pages.format import (
    accuracy_comment,
    fallback_words,
    fmt_number,
    fmt_worth,
)
from predictive_headroom.policy.config import Pool

HELP = "fit the forecast of each pool and show its next peaks and accuracy on held-back recent days"
EXAMPLE = (
    "predictive-headroom forecast --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv   # after make demo\n"
    "predictive-headroom forecast --config my-policy.yaml --prometheus-url http://prometheus:9090 --pool web"
)
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="policy YAML file")
    add_csv_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="CSV", help="demand history CSV (timestamp,value)")
    source.add_argument("--prometheus-url", metavar="URL", help="Prometheus base URL")
    parser.add_argument("--pool", help="only this pool")
    parser.add_argument(
        "--at",
        help="cut history at this ISO-8601 time (replay); default: the end of --data, or now",
    )
    parser.add_argument("--no-accuracy", action="store_true", help="skip the hold-out accuracy fit")
    add_output_argument(parser)


def run(args: argparse.Namespace) -> int:
    policy = load_config(args.config)
    pools = [
        p
        for p in policy.pools
        if p.forecast is not None and (args.pool is None or p.name == args.pool)
    ]
    if not pools:
        which = f"pool {args.pool!r}" if args.pool else "no pool"
        raise CommandError(
            f"{which} has a 'forecast' section in {args.config}; add one (see config/example.yaml)"
        )
    source = source_from_args(args.data, args.prometheus_url, csv=csv_options(args))
    at = _cut_time(args, source)
    fits = fit_pools(
        pools,
        source,
        at,
        default_forecaster(),
        accuracy=not args.no_accuracy,
        observe=True,
        disabled_too=True,  # a disabled forecast is still fitted and shown: review it first
        retune_window=daemon_retune_window(),  # a `protection:` pool: the setting the daemon holds
        choice=daemon_choice(),
    )
    results = []
    for pool in pools:
        fit = fits[pool.name]
        if fit.history is None:
            detail = fit.forecast.detail if isinstance(fit.forecast, NoForecast) else ""
            raise CommandError(f"pool {pool.name}: {detail}")
        forecast = fit.forecast
        out = summary(pool, fit.history, forecast, fit.accuracy, at)
        if isinstance(forecast, Forecast):
            settings = fit.settings
            assert settings is not None  # every fitted forecast has its settings
            assert settings.demand_per_replica is not None
            allowance = burst_allowances(forecast, [at], settings.lead, fit.observed)[0]
            out["burst"] = burst_summary(allowance, settings, at, pool.forecast.burst_model)
        if fit.tuning is not None:
            out["promise"] = fit.tuning.report(pool_price(pool, policy.cost))
        results.append(out)
    if args.output == "json":
        print_json({"at": iso(at), "pools": results})
    else:
        for result in results:
            _print_summary(result)
    return 0


def _cut_time(args: argparse.Namespace, source: object) -> float:
    if args.at:
        return parse_time(args.at)
    full = getattr(source, "full", None)
    return full().end if full else parse_time("now")


def next_peaks(forecast: Forecast, at: float) -> list[tuple[float, float]]:
    """(time, yhat) of the forecast's true local maxima after `at`: never `at` itself, never the
    horizon's end, never the same peak twice (`core.forecast_math.local_peaks`)."""
    after = forecast.times > at
    times, yhat = forecast.times[after], forecast.yhat[after]
    radius = round(PEAK_RADIUS_SECONDS / forecast.step_seconds) if forecast.step_seconds else 1
    return [(float(times[i]), float(yhat[i])) for i in local_peaks(yhat, radius)]


def summary(
    pool: Pool,
    history: History,
    forecast: Forecast | NoForecast,
    accuracy: Accuracy | None,
    at: float | None = None,
) -> dict[str, Any]:
    """The JSON facts about one pool's forecast (`at`: the instant the peaks are counted from,
    default the end of the history)."""
    at = history.end if at is None else at
    out: dict[str, Any] = {
        "name": pool.name,
        "history_points": len(history),
        "history_start": iso(history.start),
        "history_end": iso(history.end),
    }
    if isinstance(forecast, NoForecast):
        out.update(model=None, status=forecast.why, detail=forecast.detail)
        return out
    assert pool.forecast is not None
    dpr = pool.forecast.demand_per_replica
    out.update(
        status="ok",
        model=forecast.model,
        fit_seconds=round(forecast.fit_seconds, 3),
        warnings=list(forecast.warnings),
        demand_per_replica=dpr,
        max_replicas=pool.max_replicas,
        next_peaks=[
            {"at": iso(t), "yhat": round(v, 3), "replicas_of_demand": round(v / dpr, 2)}
            for t, v in next_peaks(forecast, at)
        ],
        accuracy=accuracy.to_dict() if accuracy else None,
        points=[
            {"at": iso(t), "yhat": round(y, 4), "lower": round(lo, 4), "upper": round(hi, 4)}
            for t, y, lo, hi in zip(
                forecast.times, forecast.yhat, forecast.lower, forecast.upper, strict=False
            )
        ],
    )
    return out


def peak_worth_words(demand_per_replica: float, max_replicas: int) -> str:
    """What the peaks' "placeholders' worth" is, and what it is not (what the plan holds)."""
    return (
        f"placeholders' worth: the peak's demand / demandPerReplica ({fmt_number(demand_per_replica)}), "
        f"its size in placeholders before any cap (maxReplicas {max_replicas}); the plan holds "
        "only the rise expected within the lead time, so far fewer"
    )


def _fmt(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def burst_summary(
    allowance: BurstAllowance, settings: PlanSettings, at: float, model: str
) -> dict[str, Any]:
    """The burst allowance at `at` for the JSON and the terminal: in demand units and, unrounded,
    in placeholders (the terminal rounds it once, as the pages do)."""
    assert settings.demand_per_replica is not None  # every fitted forecast has it
    return {
        "at": iso(at),
        "allowance": allowance.value,
        "allowance_placeholders": allowance.value / settings.demand_per_replica.value,
        "demand_per_replica": settings.demand_per_replica.value,
        "source": str(allowance.source),
        "fallback": allowance.why or None,
        "quantile": settings.quantile,
        "model": model,
    }


def burst_line(burst: dict[str, Any]) -> str:
    """The burst allowance in words, with the pages' rounding (`fmt_number`, `fmt_worth`)."""
    worth = fmt_worth(burst["allowance"], burst["demand_per_replica"])
    return (
        f"burst allowance at {burst['at']}: {fmt_number(burst['allowance'])} demand units "
        f"({worth}), q={burst['quantile']:g}"
    )


def _print_summary(result: dict[str, Any]) -> None:
    print(
        f"pool {result['name']}: {result['history_points']} points of history, {result['history_start']} .. {result['history_end']}"
    )
    if result["status"] != "ok":
        print(f"  no forecast: {result['status']} {result.get('detail', '')}")
        return
    print(
        f"  model {result['model']}, fitted in {result['fit_seconds']:.2f} s, {len(result['points'])} points ahead"
    )
    for warning in result["warnings"]:
        print(f"  warning: {warning}")
    promise = result.get("promise")
    if promise:
        lead = "warning: " if promise["short"] else ""
        print(f"  {lead}protection {promise['in_full']}; holding {promise['holding']}")
    burst = result.get("burst")
    if burst:
        where = (
            "the burst model on the latest observations"
            if burst["source"] == "model"
            else "the refit-time table"
        )
        why = f" ({fallback_words(burst['fallback'])})" if burst["fallback"] else ""
        print(f"  {burst_line(burst)}, from {where}{why}")
        print(
            "  placeholders cover the rise in demand expected within the lead time "
            "(the predictable ramp plus this allowance), not the peak level"
        )
    acc = result["accuracy"]
    if acc:
        print(
            f"  accuracy on {acc['points']} held-back points ({acc['holdout_start']} .. {acc['holdout_end']}): "
            f"MAPE {_fmt(acc['mape'], '{:.1f}%')}, sMAPE {acc['smape']:.1f}%, MASE {_fmt(acc['mase'], '{:.2f}')} "
            f"(below 1 beats repeating the last season), coverage {acc['coverage']:.0%} of a {acc['interval_width']:.0%} band"
        )
        comment = accuracy_comment(acc.get("mape"), acc.get("mase"))
        if comment:
            print(f"  {comment}")
    print_table(
        ["next peak at", "demand", "placeholders' worth"],
        [
            [p["at"], fmt_number(p["yhat"]), f"{p['replicas_of_demand']:.2f}"]
            for p in result["next_peaks"]
        ],
    )
    if result["next_peaks"]:
        print(peak_worth_words(result["demand_per_replica"], result["max_replicas"]))
    print()
