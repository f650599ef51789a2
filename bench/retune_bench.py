"""The daemon's re-tune (`app/tune.py`) on a shared series: seconds a pool per refit
(measured, not asserted; the target is <= 10 s a pool on 1-minute data).

Usage: python bench/retune_bench.py [--data CSV] [--at ISO] [--protection 95%] [--window-days 14]
                                   [--repeat N] [--pools N]

Runs a re-tune at `--at` (default: the end of the series) with the default grid, as the
daemon's refit would, `--repeat` times, and prints what it chose, the reason and how long each
took (the extra fit included; wall and CPU seconds), with the CPU seconds in each stage (the
extra fit, the burst models at the other quantiles, the engine's plans, the simulated cluster,
the ledger).

With `--pools N`, the daemon's refit of N pools instead (`app.fit.fit_pools`: each re-tuned and
fitted in turn, every fit kept, as the daemon holds them), with the peak resident memory of this
process (run it under `process_tree.py` to see the same from outside).
"""

from __future__ import annotations

import argparse
import resource
import time
from datetime import timedelta
from pathlib import Path

from stages import cpu_seconds, line, stage_timers

from predictive_headroom.app.fit import default_forecaster, fit_pools
from predictive_headroom.app.tune import RETUNE_WINDOW, retune
from predictive_headroom.commands import parse_time
from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.policy.config import ForecastSpec, Pool, Target
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.setup import auto_demand_per_replica
from predictive_headroom.sources.csvsource import CsvSource, read_csv_history

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "worldcup98_requests_1min.csv"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--at", help="refit instant (ISO-8601; default: the end of the series)")
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--window-days", type=float, default=RETUNE_WINDOW / DAY_SECONDS)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="re-tunes to run: the first pays the imports, later ones cost what a daemon's refit "
        "pays (it has fitted the pool in the same process just before)",
    )
    parser.add_argument("--pools", type=int, help="the daemon's refit of this many pools")
    args = parser.parse_args(argv)
    if args.pools:
        return refit_pools(args)
    history = read_csv_history(str(args.data))
    at = parse_time(args.at) if args.at else history.end
    step = timedelta(seconds=max(300.0, round(history.step_seconds)))
    spec = ForecastSpec(query="csv", demand_per_replica=auto_demand_per_replica(history), step=step)
    pool = Pool(
        name="bench",
        target=Target(namespace="bench", name="placeholder"),
        max_replicas=100_000,
        forecast=spec,
        protection=args.protection,
    )
    print(f"{args.data.name}: {len(history)} points, step {history.step_seconds:g}s, at {at:.0f}")
    forecaster = default_forecaster()
    for k in range(args.repeat):
        with stage_timers(STAGES) as spent:
            wall, cpu = time.perf_counter(), cpu_seconds()
            tuning = retune(
                pool,
                history,
                at,
                forecaster,
                resolve_settings(pool),
                window_seconds=args.window_days * DAY_SECONDS,
            )
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        if k == 0:
            print(
                f"status {tuning.status}: q {tuning.burst_quantile:g}, window "
                f"{tuning.stabilization_seconds:g}s, reserve {tuning.reserve}"
            )
            print(f"reason: {tuning.reason}")
        run = "first (imports Prophet and scikit-learn)" if k == 0 else f"run {k + 1}"
        print(f"re-tune seconds (extra fit + grid replay), {run}: {wall:.2f} ({cpu:.2f} s CPU)")
        print(f"  {line(spent, cpu)}")
    return 0


def refit_pools(args: argparse.Namespace) -> int:
    """`--pools N`: N pools on the series, re-tuned and fitted as the daemon's refit does."""
    history = read_csv_history(str(args.data))
    at = parse_time(args.at) if args.at else history.end
    step = timedelta(seconds=max(300.0, round(history.step_seconds)))
    spec = ForecastSpec(query="csv", demand_per_replica=auto_demand_per_replica(history), step=step)
    pools = [
        Pool(
            name=f"bench-{k}",
            target=Target(namespace="bench", name=f"placeholder-{k}"),
            max_replicas=100_000,
            forecast=spec,
            protection=args.protection,
        )
        for k in range(args.pools)
    ]
    wall, cpu = time.perf_counter(), cpu_seconds()
    fits = fit_pools(
        pools,
        CsvSource(str(args.data)),
        at,
        default_forecaster(),
        observe=True,
        retune_window=args.window_days * DAY_SECONDS,
    )
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    held = {f.tuning.status if f.tuning else None for f in fits.values()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.data.name}: the refit of {len(fits)} pools (re-tune + fit each, statuses {held}): "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS of this process {peak:.0f} MB"
    )
    return 0


STAGES = {
    "extra fit": ["predictive_headroom.app.tune:_fit_before"],
    "burst models at the other quantiles": ["predictive_headroom.app.tune:at_quantile"],
    "engine (plans at every minute)": ["predictive_headroom.replay.setup:planner_strategy"],
    "simulate": ["predictive_headroom.replay.setup:simulate"],
    "ledger and rule": [
        "predictive_headroom.app.tune:ledger",
        "predictive_headroom.app.tune:choose",
    ],
}
"""Where a re-tune spends its time: each stage is the functions named, timed where called."""


if __name__ == "__main__":
    raise SystemExit(main())
