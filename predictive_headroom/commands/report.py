"""`predictive-headroom report`: a forecast report for review, DIR/index.html plus DIR/report.json.

Without --config the report uses one built-in pool, `default`, sized from the series itself:
target Deployment default/headroom-placeholder, 0 to 20 placeholder pods of 1 CPU / 1Gi,
lead time 5m, scale-down stabilisation 30m, and a forecast with demandPerReplica = one tenth
of the series' 95th percentile (ten placeholder pods' worth of demand covers a typical peak).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from predictive_headroom.app.fit import default_forecaster, fit_pools, settings_of
from predictive_headroom.app.inputs import with_plan_inputs
from predictive_headroom.commands import (
    CommandError,
    add_csv_arguments,
    add_price_arguments,
    csv_options,
    daemon_choice,
    daemon_retune_window,
    load_config,
    parse_time,
    pool_price_from_args,
    source_from_args,
)
from predictive_headroom.commands.components import add_component_arguments, parts_from_args
from predictive_headroom.commands.plan_cluster import cluster_from_args
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import History
from predictive_headroom.policy.config import ForecastSpec, Policy, Pool, Target
from predictive_headroom.protocols import SourceError
from predictive_headroom.report.build import Report, ReportInputs, build_report
from predictive_headroom.report.store import write_report_files

logger = logging.getLogger(__name__)

HELP = (
    "write a forecast report for review: DIR/index.html (self-contained page) and DIR/report.json"
)
REPORT_FILES = {"index.html", "report.json"}
DEFAULT_MAX_REPLICAS = 20
DEFAULT_SHARE_OF_P95 = 10
EXAMPLE = "predictive-headroom report --config demo-out/demo-policy.yaml --data demo-out/taxi-demand.csv --out my-report   # after make demo"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_csv_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="CSV", help="demand history CSV (timestamp,value)")
    source.add_argument(
        "--prometheus-url", metavar="URL", help="Prometheus base URL (needs --config for the query)"
    )
    parser.add_argument(
        "--config",
        "-c",
        help="policy YAML file (default: one built-in pool sized from --data, see the docs)",
    )
    parser.add_argument(
        "--at", help="report as of this ISO-8601 time; default: the end of --data, or now"
    )
    parser.add_argument("--pool", help="only this pool")
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="directory to write index.html and report.json into (replaced as a whole)",
    )
    parser.add_argument(
        "--nodes", type=int, help="nodes in the cluster (for the proportional rule)"
    )
    parser.add_argument("--cores", type=float, help="CPU cores of those nodes")
    parser.add_argument(
        "--schedulable-nodes", type=int, help="schedulable nodes (default: --nodes)"
    )
    add_component_arguments(parser)
    add_price_arguments(parser)


def default_policy(history: History) -> Policy:
    """The built-in single-pool policy used without --config (see the module docstring)."""
    p95 = float(np.quantile(history.values, 0.95)) if len(history) else 0.0
    per_replica = float(f"{p95 / DEFAULT_SHARE_OF_P95:.3g}") if p95 > 0 else 1.0
    pool = Pool(
        name="default",
        target=Target(namespace="default", name="headroom-placeholder"),
        max_replicas=DEFAULT_MAX_REPLICAS,
        forecast=ForecastSpec(query=history.source or "csv", demand_per_replica=per_replica),
    )
    return Policy(pools=[pool])


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    made = _missing_parents(out)
    staging = None
    try:
        staging = _staging_dir(out)  # first, so an unwritable --out fails before the slow fit
        report = make_report(args)
        write_report_files(staging, report)
        _move_into_place(staging, out)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for directory in made:  # deepest first; only the ones this run created, and only if empty
            try:
                directory.rmdir()
            except OSError:
                break
        raise
    print(out / "index.html")
    return 0


def _prices(args: argparse.Namespace, policy: Policy) -> dict[str, Price]:
    """Each pool's price when the flags give one (none: the policy's `cost:` prices the page)."""
    if args.node_hour_price is None and args.node_cpu is None:
        return {}
    return {p.name: pool_price_from_args(args, p, policy.cost) for p in policy.pools}


def make_report(args: argparse.Namespace) -> Report:
    """Read history, fit and score each pool's forecast, and build the report the arguments ask for."""
    if args.config is None and args.prometheus_url:
        raise CommandError(
            "--prometheus-url needs --config: the pool's forecast.query names the series to read"
        )
    source = source_from_args(args.data, args.prometheus_url, csv=csv_options(args))
    try:
        at = (
            parse_time(args.at)
            if args.at
            else (source.full().end if args.data else parse_time("now"))
        )  # type: ignore[attr-defined]
        policy = (
            load_config(args.config) if args.config else default_policy(source.full().until(at))
        )  # type: ignore[attr-defined]
    except SourceError as exc:
        raise CommandError(str(exc)) from None
    if args.pool:
        try:
            policy = policy.model_copy(update={"pools": [policy.pool(args.pool)]})
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from None
    fits = fit_pools(
        policy,
        source,
        at,
        default_forecaster(),
        accuracy=True,
        observe=True,
        retune_window=daemon_retune_window(),  # a `protection:` pool: what the daemon would hold
        choice=daemon_choice(),
        price_of=lambda pool: pool_price_from_args(args, pool, policy.cost),  # the node simulated
    )
    read = {n: f for n, f in fits.items() if f.history is not None}
    failures = [w for f in fits.values() if f.history is None for w in f.warnings]
    if failures and not read:  # no pool could read any history: an error for the user
        raise CommandError("cannot read demand history:\n  " + "\n  ".join(failures))
    cluster = cluster_from_args(args, policy)
    where = args.data or args.prometheus_url
    settings = settings_of(policy, fits)
    inputs = ReportInputs(
        settings,
        histories={n: f.history for n, f in read.items()},
        forecasts={n: f.forecast for n, f in fits.items()},
        accuracies={n: f.accuracy for n, f in fits.items() if f.accuracy is not None},
        observed={n: f.observed for n, f in fits.items()},
        promises={
            n: f.tuning.report(pool_price_from_args(args, policy.pool(n), policy.cost))
            for n, f in fits.items()
            if f.tuning is not None
        },
        parts=parts_from_args(args, policy, settings),
        prices=_prices(args, policy),
    )
    return build_report(
        policy, with_plan_inputs(policy, inputs, at, cluster), at, source=str(where)
    )


def _missing_parents(out: Path) -> list[Path]:
    """The parent directories of `out` that do not exist yet, deepest first."""
    return [p for p in out.absolute().parents if not p.exists()]


def _staging_dir(out: Path) -> Path:
    """A fresh directory beside `out` to render into; fails early when `out` cannot be written."""
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out}: exists and is not a directory")
    if out.is_dir():
        extra = sorted(p.name for p in out.iterdir() if p.name not in REPORT_FILES)
        if extra:
            raise CommandError(
                f"--out {out}: holds other files ({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); "
                "the report replaces the whole directory, so choose a new or empty one"
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.writing-", dir=out.parent))
    except OSError as exc:
        raise CommandError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
    staging.chmod(0o755)
    return staging


def _move_into_place(staging: Path, out: Path) -> None:
    """Replace `out` with the complete `staging` directory (the old report is removed only after)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    try:
        staging.rename(out)
    except OSError:
        if old is not None:
            old.rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
