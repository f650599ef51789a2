"""Forecaster benchmark on the six shared series: speed, memory and hold-out accuracy.

For each series it takes the last `--days` days (default 28, or all there is) at the native
step, times `ProphetForecaster.fit` (fit + predict + burst profile) over `--runs` runs, and
scores a 2-day hold-out with `predictive_headroom.forecast.accuracy.evaluate`. One 2-day hold-out is a
noisy figure (azure's coverage of the 80% band ranges 0.55-0.99 from one window to the next), so
it also scores `--origins` rolling origins (default 8, 16 days of hold-outs) spaced 2 days apart and
ending at the last one: each cuts the series `2 k` days before its end, takes the `--days` days
before that, and holds out its last 2 days. The `roll` columns are their mean MASE and coverage
(the first origin is the single hold-out). Targets (printed, not asserted): median fit under
1.5 s, peak RSS under 400 MiB, MASE under 1 on nab_nyc_taxi_30min and azure_v2_vm_cpu_total_5min,
coverage within 5 points of the interval width.

    .venv/bin/python bench/forecast_bench.py [--runs 5] [--days 28] [--origins 8] [--growth flat|linear]
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from predictive_headroom.core.series import DAY_SECONDS, History  # noqa: E402
from predictive_headroom.forecast.accuracy import evaluate  # noqa: E402
from predictive_headroom.forecast.forecaster import ProphetForecaster  # noqa: E402
from predictive_headroom.policy.config import ForecastSpec  # noqa: E402
from predictive_headroom.sources.csvsource import read_csv_history  # noqa: E402

DATASETS = REPO.parent / "shared" / "datasets"
SERIES = [
    "nab_nyc_taxi_30min",
    "azure_v2_vm_cpu_total_5min",
    "google2019_cluster_cpu_5min",
    "nab_aws_asg_cpu_5min",
    "nab_aws_elb_requests_5min",
    "nab_twitter_fb_5min",
]
TARGET_MASE = {"nab_nyc_taxi_30min", "azure_v2_vm_cpu_total_5min"}


def load(name: str) -> History:
    """Read a shared `timestamp,value` CSV into a History."""
    return read_csv_history(DATASETS / f"{name}.csv")


def origins(full: History, days: float, count: int) -> list[History]:
    """`count` histories of `days` days ending 0, 2, 4, ... days before the end of `full`.

    An origin is skipped when it would leave under 4 days of history.
    """
    out = []
    for k in range(count):
        end = full.end - 2 * k * DAY_SECONDS
        cut = full.until(end)
        part = cut.since(end - days * DAY_SECONDS)
        if len(part) and part.span_seconds >= 4 * DAY_SECONDS:
            out.append(part)
    return out


def peak_rss_mib() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest finished child (cmdstan), MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, child


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--origins", type=int, default=8, help="rolling origins, 2 days apart")
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--growth", choices=["flat", "linear"], default="flat")
    parser.add_argument("--daily-order", type=int, default=12)
    parser.add_argument("--weekly-order", type=int, default=40)
    parser.add_argument("--mode", choices=["additive", "multiplicative"], default="additive")
    parser.add_argument("--changepoint-prior", type=float, default=0.05)
    parser.add_argument("--max-fit-points", type=int, default=3000)
    parser.add_argument("--validation-hours", type=float, default=48.0, help="0 turns validation off")
    parser.add_argument("--level-hours", type=float, default=48.0)
    parser.add_argument("--validation-folds", type=int, default=1)
    parser.add_argument("--interval-width", type=float, default=0.8)
    parser.add_argument("--lead", type=float, default=300.0, help="lead time in seconds")
    parser.add_argument("--hourly", action=argparse.BooleanOptionalAction, default=True, help="the within-hour profile")
    parser.add_argument("--series", nargs="*", default=SERIES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    forecaster = ProphetForecaster(
        growth=args.growth,
        daily_order=args.daily_order,
        weekly_order=args.weekly_order,
        seasonality_mode=args.mode,
        changepoint_prior_scale=args.changepoint_prior,
        max_fit_points=args.max_fit_points,
        validation_seconds=args.validation_hours * 3600,
        level_seconds=args.level_hours * 3600,
        validation_folds=args.validation_folds,
        hourly=args.hourly,
    )
    header = (
        f"{'series':30} {'points':>6} {'step':>5} {'model':>8} {'median s':>8} {'max s':>6} "
        f"{'MASE':>6} {'sMAPE%':>7} {'MAPE%':>7} {'cover':>6} {'roll MASE':>9} {'roll cov':>8} "
        f"{'burst p50/max':>15}"
    )
    print(
        f"growth={args.growth} daily_order={args.daily_order} weekly_order={args.weekly_order} mode={args.mode} "
        f"changepoint_prior={args.changepoint_prior} max_fit_points={args.max_fit_points} "
        f"validation_hours={args.validation_hours:g} validation_folds={args.validation_folds} "
        f"level_hours={args.level_hours:g} hourly={args.hourly} interval_width={args.interval_width} lead={args.lead:g}s runs={args.runs}"
    )
    print(header)
    print("-" * len(header))
    rolled: list[tuple[float, float]] = []
    for name in args.series:
        full = load(name)
        history = full.since(full.end - args.days * DAY_SECONDS)
        native = timedelta(seconds=round(history.step_seconds))
        spec = ForecastSpec(query=name, demand_per_replica=1.0, step=native, interval_width=args.interval_width)
        durations = []
        for _ in range(args.runs):
            started = time.perf_counter()
            forecast = forecaster.fit(history, spec, args.lead, history.end)
            durations.append(time.perf_counter() - started)
        acc = evaluate(history, spec, forecaster, args.lead)
        roll = [acc] + [evaluate(h, spec, forecaster, args.lead) for h in origins(full, args.days, args.origins)[1:]]
        roll_mase = float(np.mean([a.mase for a in roll if a.mase is not None]))
        roll_cov = float(np.mean([a.coverage for a in roll]))
        rolled.append((roll_mase, roll_cov))
        burst = forecast.burst.values if forecast.burst is not None else np.zeros(1)
        mark = "*" if name in TARGET_MASE and (acc.mase is None or acc.mase >= 1) else " "
        mape = f"{acc.mape:7.1f}" if acc.mape is not None else f"{'-':>7}"
        mase = f"{acc.mase:6.3f}" if acc.mase is not None else f"{'-':>6}"
        print(
            f"{name:30} {len(history):6d} {int(native.total_seconds() // 60):4d}m {forecast.model:>8} "
            f"{statistics.median(durations):8.3f} {max(durations):6.2f} {mase}{mark}{acc.smape:7.1f} "
            f"{mape} {acc.coverage:6.3f} {roll_mase:9.3f} {roll_cov:8.3f} "
            f"{np.median(burst):7.3g}/{burst.max():<7.3g}"
        )
    print(
        f"rolling origins ({args.origins}, 2 d apart): mean MASE over series {np.mean([m for m, _ in rolled]):.3f}, "
        f"mean |coverage - width| {np.mean([abs(c - args.interval_width) for _, c in rolled]):.3f}"
    )
    own, child = peak_rss_mib()
    print(f"peak RSS: python {own:.0f} MiB, largest child (cmdstan) {child:.0f} MiB; target < 400 MiB")
    print("* = misses the MASE < 1 target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
