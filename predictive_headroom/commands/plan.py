"""`predictive-headroom plan`: the plan at one instant, or a timeline over a horizon."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.app.fit import fit_pools
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
    print_table,
    source_from_args,
)
from predictive_headroom.commands.components import (
    add_component_arguments,
    note_left_out,
    parts_from_args,
)
from predictive_headroom.core.components import REGISTRY, Part
from predictive_headroom.core.engine import (
    HORIZON_STEP_SECONDS,
    PlanInputs,
    horizon_plans,
    plan_over_time,
)
from predictive_headroom.core.planner import Plan, plan_to_dict
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.spend import all_day, pool_spend
from predictive_headroom.core.vocabulary import Component, Kind, PlanReason
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.events import gap_move
from predictive_headroom.protocols import ClusterState, Source, SourceError
from predictive_headroom.sources.csvsource import CsvSource

CAPS = {str(r.name) for r in REGISTRY if r.kind == Kind.CAP}
FLOORS = {str(r.name) for r in REGISTRY if r.kind == Kind.FLOOR}

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
        type=_count,
        action="append",
        metavar="[POOL=]N",
        help="nodes for the proportional rule: N for every pool, POOL=N for one pool's own "
        "(the nodes its nodeSelector matches); repeat for several pools",
    )
    parser.add_argument(
        "--cores", type=_count, action="append", metavar="[POOL=]C", help="CPU cores of those nodes"
    )
    parser.add_argument(
        "--schedulable-nodes",
        type=_count,
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


def _count(text: str) -> tuple[str | None, float]:
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


@dataclass(frozen=True)
class Fitted:
    """What the daemon would plan each forecasting pool with at one instant (empty without
    history): the forecast, the latest observations for the burst model, the settings (re-tuned
    for a `protection:` pool, its reserve included) and what the re-tune says of the promise."""

    forecasts: dict[str, Forecast | NoForecast] = field(default_factory=dict)
    observed: dict[str, History | Unobserved] = field(default_factory=dict)
    settings: dict[str, PlanSettings] = field(default_factory=dict)
    promises: dict[str, dict[str, Any]] = field(default_factory=dict)

    parts: dict[str, dict[str, Part]] = field(default_factory=dict)
    """Each pool's registered components given on the command line
    (`commands.components.parts_from_args`)."""

    def inputs(self, pool: Pool, cluster: ClusterState | None) -> PlanInputs:
        """What `pool` is planned from; without a fit, the settings of its configuration."""
        name = pool.name
        return plan_inputs(
            pool,
            self.settings.get(name),
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
        return Fitted()
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
        {n: f.forecast for n, f in fits.items()},
        {n: f.observed for n, f in fits.items() if f.observed is not None},
        {n: f.settings for n, f in fits.items() if f.settings is not None},
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
    _note_skipped_proportional(policy, clusters)
    fitted = forecasts_from_args(source, policy, at, args)
    parts = parts_from_args(args, policy, fitted.settings)  # with the settings the plan uses
    note_left_out(args, policy, parts)
    _note_moved_events(policy)
    fitted = dataclasses.replace(fitted, parts=parts)
    why = why_minimum(fitted.forecasts)
    if args.horizon is None:
        plans = [
            plan_over_time(p, [at], fitted.inputs(p, clusters.of(p))).plans[0] for p in policy.pools
        ]
        if args.output == "json":
            pools = [_with_why(_with_promise(plan_to_dict(p), fitted.promises), why) for p in plans]
            print_json({"at": iso(at), "pools": pools})
        else:
            _print_plans(plans, policy, fitted.settings)
            _print_capped(plans)
            _print_why(why)
            _print_promises(fitted.promises)
            _print_spend(plans, policy, args)
        return 0
    if args.step <= 0:
        raise CommandError("--step must be positive")
    timeline = plan_timeline(policy, at, args.horizon, args.step, clusters, fitted)
    if args.output == "json":
        pools = [_with_why(_with_promise(p, fitted.promises), why) for p in timeline]
        print_json({"from": iso(at), "step_seconds": args.step, "pools": pools})
    else:
        _print_timeline(timeline)
        _print_why(why)
        _print_promises(fitted.promises)
    return 0


def _print_spend(plans: list[Plan], policy: Policy, args: argparse.Namespace) -> None:
    """What each pool's plan costs a day if held all day, and the most it can cost
    (`core.spend`: maxReplicas all day, the budget that caps it): before `dryRun=false`."""
    by_name = {p.name: p for p in policy.pools}
    for plan in plans:
        pool = by_name[plan.pool]
        price = pool_price_from_args(args, pool, policy.cost)
        held = all_day(plan.desired, price)
        money = price.text(held)
        print(
            f"pool {plan.pool}: {plan.desired} placeholders held all day cost "
            f"{held:,.1f} overhead node-hours a day{f' ({money})' if money else ''}"
        )
        for finding in pool_spend(pool, price, f"pool {plan.pool}"):
            print(f"  {finding}")


def _print_capped(plans: list[Plan]) -> None:
    """One line per plan a registered cap other than maxReplicas holds down (`limits`, ...):
    what it allows, and what the floors and the reserve ask for."""
    for plan in plans:
        if plan.reason not in CAPS or plan.reason == Component.MAX:
            continue
        floors = [v for k, v in plan.components.items() if k in FLOORS and v is not None]
        asked = max(floors, default=0) + int(plan.details.get("reserve", 0))
        by = plan.details.get(f"{plan.reason}_by")
        why = f" ({by} sets it)" if by else ""
        print(
            f"pool {plan.pool}: the {plan.reason} cap holds {plan.desired} placeholders{why}; "
            f"the floors and the reserve ask for {asked}"
        )


def _with_why(pool: dict[str, Any], why: dict[str, str]) -> dict[str, Any]:
    """A pool's JSON with `why` (the pool plans its floors because ...) when it has one."""
    return {**pool, "why": why[pool["name"]]} if pool["name"] in why else pool


def _print_why(why: dict[str, str]) -> None:
    """One line per pool planning its floors for want of a forecast, saying why."""
    for name, words in why.items():
        print(f"pool {name} plans its floors only (min:...): {words}")


def _with_promise(pool: dict[str, Any], promises: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One pool's JSON with what its re-tune says of the promise (`protection:` pools only)."""
    promise = promises.get(pool["name"])
    return pool if promise is None else {**pool, "promise": promise}


def _print_promises(promises: dict[str, dict[str, Any]]) -> None:
    """Per `protection:` pool, the promise as the daemon would see it now, and what it holds."""
    for name, p in promises.items():
        lead = "warning: " if p["short"] else ""
        print(f"\n{lead}pool {name}: protection {p['in_full']}; holding {p['holding']}")
        if p.get("against_fixed"):  # the one verdict (`core.verdict`), as the report says it
            print(f"pool {name}: {p['against_fixed']['says']}")


def plan_timeline(
    policy: Policy,
    start: float,
    horizon: float,
    step: float,
    cluster: ClusterState | Clusters | None,
    fitted: Fitted | None = None,
) -> list[dict[str, Any]]:
    """Each pool's plan over `horizon` from `start` (`core.engine.horizon_plans`, the report's grid
    too): at `start`, every multiple of `step`, and every instant where the plan changes.

    The burst model reads the observations known at `start`; later steps, whose observations are
    not known yet, use the refit-time table once those are too old (`burst_fallback`)."""
    fitted = fitted or Fitted()
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


HOLD = PlanReason.HOLD_STABILIZATION


def _components_text(
    components: dict[str, int | None], reserve: int = 0, held: int | None = None
) -> str:
    """Every part of a plan as `name=value`: the components, the reserve held on top of the
    floors (`reserve=+16`: why `desired 16` stands beside `forecast=0`), and what the scale-down
    stabilisation holds (`held=12`) when it holds more than the parts ask for."""
    words = [f"{k}={v}" for k, v in components.items() if v is not None]
    if reserve:
        words.append(f"reserve=+{reserve}")
    if held is not None:
        words.append(f"held={held}")
    return " ".join(words)


def _parts_text(plan: Plan) -> str:
    """`_components_text` of `plan`: its components, its reserve and its stabilisation hold."""
    held = plan.desired if plan.reason == HOLD else None
    return _components_text(plan.components, int(plan.details.get("reserve", 0)), held)


def rounded(value: float) -> str:
    """`value` with as many decimals as its size needs to be read: 1234, 12.3, 0.46."""
    size = abs(value)
    return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}"


def burst_text(plan: Plan, demand_per_replica: float | None) -> str:
    """The forecast's burst allowance in words: rounded, in demand units and placeholders, where
    it came from (the model, or the table and why), and that a value below 0 adds nothing."""
    source = plan.details.get("burst_source")
    if source is None:
        return "-"
    burst = float(plan.details.get("burst", 0.0))
    fallback = plan.details.get("burst_fallback")
    where = f"{source}: {fallback}" if fallback else str(source)
    if burst <= 0:
        return f"{rounded(burst)} ({where}; no rise beyond the ramp expected, adds nothing)"
    worth = f" = {burst / demand_per_replica:.2f} placeholders" if demand_per_replica else ""
    return f"{rounded(burst)} demand{worth} ({where})"


def _print_plans(
    plans: list[Plan], policy: Policy, settings: dict[str, PlanSettings] | None = None
) -> None:
    """The plans as a table; the burst quantile named is the one each pool plans with (`settings`:
    re-tuned for a `protection:` pool), else its configured one."""
    settings = settings or {}
    pools = {p.name: p for p in policy.pools}
    per_replica = {
        name: pool.forecast.demand_per_replica if pool.forecast else None
        for name, pool in pools.items()
    }
    print_table(
        ["pool", "desired", "reason", "components", "burst allowance"],
        [
            [
                p.pool,
                p.desired,
                p.reason,
                _parts_text(p),
                burst_text(p, per_replica.get(p.pool)),
            ]
            for p in plans
        ],
    )
    quantiles = sorted(
        {
            f"{settings[name].quantile if name in settings else pool.forecast.burst_quantile:g}"
            for name, pool in pools.items()
            if pool.forecast
        }
    )
    if any(p.details.get("burst_source") for p in plans):
        print(
            "\nburst allowance: room for growth beyond the predictable ramp within the lead time, "
            f"in the query's demand units (the q={'/'.join(quantiles)} quantile of such growth); "
            "model: the burst model on the latest observations, profile: the refit-time table by "
            "time of day."
        )


def _print_timeline(timeline: list[dict[str, Any]]) -> None:
    for pool in timeline:
        print(f"pool {pool['name']} (rows where the plan changes)")
        rows, last = [], None
        for step in pool["steps"]:
            key = (step["desired_replicas"], step["reason"])
            if key != last:
                rows.append(
                    [
                        step["at"],
                        step["desired_replicas"],
                        step["reason"],
                        _components_text(
                            step["components"],
                            step.get("reserve", 0),
                            step["desired_replicas"] if step["reason"] == HOLD else None,
                        ),
                    ]
                )
                last = key
        print_table(["from", "desired", "reason", "components"], rows)
        print()


def _note_moved_events(policy: Policy) -> None:
    """Say on stderr where a dated event's `from` or `to` in a daylight-saving gap moves."""
    for pool in policy.pools:
        for window in pool.schedules:
            for name, value in (("from", window.from_), ("to", window.to)):
                if moved := gap_move(value, window.timezone):
                    print(
                        f"note: pool {pool.name}, window {window.name!r}, {name}: {moved}",
                        file=sys.stderr,
                    )


def _note_skipped_proportional(policy: Policy, clusters: Clusters) -> None:
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
