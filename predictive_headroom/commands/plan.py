"""`predictive-headroom plan`: the plan at one instant, or a timeline over a horizon."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.app.fit import fit_pools, settings_of
from predictive_headroom.app.inputs import plan_inputs
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
    pool_price_from_args,
    print_json,
    source_from_args,
)
from predictive_headroom.commands.components import (
    add_component_arguments,
    note_left_out,
    parts_from_args,
)
from predictive_headroom.commands.plan_cluster import (
    Clusters,
    clusters_from_args,
    node_count,
    note_skipped_proportional,
)
from predictive_headroom.commands.plan_text import (
    note_moved_events,
    print_capped,
    print_plans,
    print_promises,
    print_spend,
    print_timeline,
    print_why,
    with_promise,
    with_why,
)
from predictive_headroom.core.components import Part
from predictive_headroom.core.engine import (
    HORIZON_STEP_SECONDS,
    PlanInputs,
    horizon_plans,
    plan_over_time,
)
from predictive_headroom.core.planner import plan_to_dict
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import ClusterState, Source, SourceError
from predictive_headroom.sources.csvsource import CsvSource

HELP = "show the plan at one instant (or a timeline with --horizon): desired placeholder replicas and why"
EXAMPLE = (
    "predictive-headroom plan --config config/minimal.yaml --horizon 7d --step 5m   # when do windows open?\n"
    "predictive-headroom plan --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv --at 2014-12-22T00:00:00Z   # after make demo"
)
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="policy YAML file")
    parser.add_argument(
        "--at",
        help="ISO-8601 time with offset or Z (default: the end of --data, else now)",
    )
    parser.add_argument(
        "--nodes",
        type=node_count,
        action="append",
        metavar="[POOL=]N",
        help="nodes for the proportional rule: N for every pool, POOL=N for one pool's own "
        "(the nodes its nodeSelector matches); repeat for several pools",
    )
    parser.add_argument(
        "--cores",
        type=node_count,
        action="append",
        metavar="[POOL=]C",
        help="CPU cores of those nodes",
    )
    parser.add_argument(
        "--schedulable-nodes",
        type=node_count,
        action="append",
        metavar="[POOL=]N",
        help="schedulable nodes (default: --nodes)",
    )
    add_component_arguments(parser)
    parser.add_argument(
        "--horizon",
        type=duration_arg,
        help="print the plan at every --step over this span, e.g. 24h",
    )
    parser.add_argument(
        "--step",
        type=duration_arg,
        default=HORIZON_STEP_SECONDS,
        help="timeline step (default 15m): rows at multiples of it, plus every instant where the "
        "plan changes (it is planned every minute, as the daemon reconciles), so the rows that "
        "change are the same whatever the step; the report shows the same rows",
    )
    parser.add_argument("--pool", help="only this pool")
    add_csv_arguments(parser)
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--data",
        metavar="CSV",
        help="demand history CSV (timestamp,value) to fill the forecast component",
    )
    source.add_argument(
        "--prometheus-url", metavar="URL", help="Prometheus to read demand history from"
    )
    add_price_arguments(parser)
    add_output_argument(parser)


@dataclass(frozen=True)
class Fitted:
    """What the daemon would plan each pool with at one instant: the settings of every pool
    (re-tuned for a `protection:` pool, its reserve included; its configuration's without a fit,
    `app.fit.settings_of`), and for each forecasting pool with history the forecast, the latest
    observations for the burst model and what the re-tune says of the promise."""

    settings: dict[str, PlanSettings]
    forecasts: dict[str, Forecast | NoForecast] = field(default_factory=dict)
    observed: dict[str, History | Unobserved] = field(default_factory=dict)
    promises: dict[str, dict[str, Any]] = field(default_factory=dict)

    parts: dict[str, dict[str, Part]] = field(default_factory=dict)
    """Each pool's registered components given on the command line
    (`commands.components.parts_from_args`)."""

    def inputs(self, pool: Pool, cluster: ClusterState | None) -> PlanInputs:
        """What `pool` is planned from, with the settings the plan's words name."""
        name = pool.name
        return plan_inputs(
            pool,
            self.settings[name],
            forecast=self.forecasts.get(name),
            observed=self.observed.get(name),
            cluster=cluster,
            parts=self.parts.get(name),
        )


def forecasts_from_args(
    source: Source | None, policy: Policy, at: float, args: argparse.Namespace | None = None
) -> Fitted:
    """Fit each forecasting pool on the history of `source` (--data or --prometheus-url) up to
    `at` as the daemon does at a refit (a `protection:` pool re-tuned first, on the same window),
    and read its latest observations at `at` for the burst model, as it does at reconcile (empty
    without a source); CommandError when no pool could read any history."""
    if source is None:
        return Fitted(settings_of(policy, {}))
    fits = fit_pools(
        policy,
        source,
        at,
        observe=True,
        retune_window=daemon_retune_window(),
        choice=daemon_choice(),
        price_of=lambda pool: pool_price_from_args(args, pool, policy.cost),  # the node simulated
    )
    failures = [w for f in fits.values() if f.history is None for w in f.warnings]
    if fits and failures and all(f.history is None for f in fits.values()):
        raise CommandError("cannot read demand history:\n  " + "\n  ".join(failures))
    pools = {p.name: p for p in policy.pools}
    return Fitted(
        settings_of(policy, fits),
        {n: f.forecast for n, f in fits.items()},
        {n: f.observed for n, f in fits.items() if f.observed is not None},
        {
            n: f.tuning.report(pool_price_from_args(args, pools[n], policy.cost))
            for n, f in fits.items()
            if f.tuning is not None
        },
    )


def plan_time(args: argparse.Namespace, source: Source | None) -> float:
    """--at, else the end of --data (as `forecast` and `report` do), else now."""
    if args.at:
        return parse_time(args.at)
    if isinstance(source, CsvSource):
        try:
            return source.full().end
        except SourceError as exc:
            raise CommandError(str(exc)) from None
    return parse_time("now")


def why_minimum(forecasts: dict[str, Forecast | NoForecast]) -> dict[str, str]:
    """Why each pool without a usable forecast plans only its floors (`min:<status>`), in words:
    the status and what went wrong (the file's span, the fit's error, ...)."""
    return {
        name: f"no forecast ({f.why}){': ' + f.detail if f.detail else ''}"
        for name, f in forecasts.items()
        if isinstance(f, NoForecast) and f.why != "disabled"
    }


def run(args: argparse.Namespace) -> int:
    policy = load_config(args.config)
    if args.pool:
        try:
            policy = policy.model_copy(update={"pools": [policy.pool(args.pool)]})
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
    source = (
        source_from_args(args.data, args.prometheus_url, csv=csv_options(args))
        if args.data or args.prometheus_url
        else None
    )
    at = plan_time(args, source)
    clusters = clusters_from_args(args, policy)
    note_skipped_proportional(policy, clusters)
    fitted = forecasts_from_args(source, policy, at, args)
    parts = parts_from_args(args, policy, fitted.settings)  # with the settings the plan uses
    note_left_out(args, policy, parts)
    note_moved_events(policy)
    fitted = dataclasses.replace(fitted, parts=parts)
    why = why_minimum(fitted.forecasts)
    if args.horizon is None:
        plans = [
            plan_over_time(p, [at], fitted.inputs(p, clusters.of(p))).plans[0] for p in policy.pools
        ]
        if args.output == "json":
            pools = [with_why(with_promise(plan_to_dict(p), fitted.promises), why) for p in plans]
            print_json({"at": iso(at), "pools": pools})
        else:
            print_plans(plans, policy, fitted.settings)
            print_capped(plans)
            print_why(why)
            print_promises(fitted.promises)
            print_spend(plans, policy, args)
        return 0
    if args.step <= 0:
        raise CommandError("--step must be positive")
    timeline = plan_timeline(policy, at, args.horizon, args.step, clusters, fitted)
    if args.output == "json":
        pools = [with_why(with_promise(p, fitted.promises), why) for p in timeline]
        print_json({"from": iso(at), "step_seconds": args.step, "pools": pools})
    else:
        print_timeline(timeline)
        print_why(why)
        print_promises(fitted.promises)
    return 0


def plan_timeline(
    policy: Policy,
    start: float,
    horizon: float,
    step: float,
    cluster: ClusterState | Clusters | None,
    fitted: Fitted,
) -> list[dict[str, Any]]:
    """Each pool's plan over `horizon` from `start` (`core.engine.horizon_plans`, the report's grid
    too): at `start`, every multiple of `step`, and every instant where the plan changes.

    The burst model reads the observations known at `start`; later steps, whose observations are
    not known yet, use the refit-time table once those are too old (`burst_fallback`)."""
    out = []
    for pool in policy.pools:
        inputs = fitted.inputs(pool, cluster.of(pool) if isinstance(cluster, Clusters) else cluster)
        steps = [
            {
                "at": iso(plan.at),
                "desired_replicas": plan.desired,
                "reason": plan.reason,
                "components": plan.components,
                **({"reserve": plan.details["reserve"]} if plan.details.get("reserve") else {}),
            }
            for plan in horizon_plans(pool, start, start + horizon, step, inputs)
        ]
        out.append({"name": pool.name, "steps": steps})
    return out
