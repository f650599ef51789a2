"""Forecaster benchmark on the six shared series: rolling-origin accuracy, speed and memory.

Accuracy is judged over rolling origins, as Prophet's own `cross_validation` does: `--origins`
cuts (default 8) spaced 2 days apart, the first at the end of the series; each takes the `--days`
days before its cut (default 28, or all there is) and holds out their last 2 days
(`predictive_headroom.forecast.accuracy.evaluate`). Per series it prints, first:

- gMASE: the geometric mean of the per-origin MASE (robust to one anomalous window such as the
  taxi blizzard, which an arithmetic mean lets dominate). Target: under 1 on every series.
- roll cov: the share of held-out actuals inside the forecast's 80% band over all origins (the
  rolling coverage). Target: within 0.70-0.90.

then the spread of the per-origin MASE, the arithmetic mean, the most recent hold-out alone, and
the median fit time over `--runs` fits on the most recent `--days` days. A `*` marks a missed
target.

    .venv/bin/python bench/forecast_bench.py [--runs 3] [--days 28] [--origins 8] [--series NAME ...]
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from predictive_headroom.core.series import DAY_SECONDS, History  # noqa: E402
from predictive_headroom.core.settings import (  # noqa: E402
    PlanSettings,
    model_spec,
    resolve_settings,
)
from predictive_headroom.forecast.accuracy import Accuracy, evaluate  # noqa: E402
from predictive_headroom.forecast.forecaster import ProphetForecaster  # noqa: E402
from predictive_headroom.policy.config import ForecastSpec, Pool  # noqa: E402
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
TARGET_GMASE = 1.0
TARGET_COVERAGE = (0.70, 0.90)


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


def geometric_mean(values: list[float]) -> float:
    """exp(mean(log v)); the typical ratio when one origin is far off."""
    return float(np.exp(np.mean(np.log(values))))


@dataclass(frozen=True)
class Rolling:
    """The rolling-origin view of one series: per-origin MASE and pooled band coverage."""

    mases: list[float]
    coverage: float
    last: Accuracy

    @property
    def gmase(self) -> float:
        return geometric_mean(self.mases)


def fit_settings(spec: ForecastSpec, lead: float) -> PlanSettings:
    """The settings of a pool with this forecast section and lead time (seconds)."""
    target = {"namespace": "bench", "name": "bench"}
    pool = {"name": "bench", "target": target, "maxReplicas": 1000, "leadTime": f"{lead:g}s"}
    return resolve_settings(Pool.model_validate({**pool, "forecast": spec}))


def rolling(
    full: History, spec: ForecastSpec, forecaster: object, days: float, count: int, lead: float
) -> Rolling:
    """Score `forecaster` at `count` origins 2 days apart (see the module docstring)."""
    settings = fit_settings(spec, lead)
    model = model_spec(spec)
    scored = [evaluate(h, model, forecaster, settings) for h in origins(full, days, count)]  # type: ignore[arg-type]
    inside = sum(a.coverage * a.points for a in scored)
    return Rolling(
        [a.mase for a in scored if a.mase is not None],
        inside / sum(a.points for a in scored),
        scored[0],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed fits per series (0: no timing)")
    parser.add_argument("--origins", type=int, default=8, help="rolling origins, 2 days apart")
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--growth", choices=["flat", "linear"], default="flat")
    parser.add_argument("--daily-order", type=int, default=12)
    parser.add_argument("--weekly-order", type=int, default=40)
    parser.add_argument("--mode", choices=["additive", "multiplicative"], default="additive")
    parser.add_argument("--changepoint-prior", type=float, default=0.05)
    parser.add_argument("--max-fit-points", type=int, default=3000)
    parser.add_argument(
        "--validation-hours", type=float, default=48.0, help="0 turns validation off"
    )
    parser.add_argument("--level-hours", type=float, default=48.0)
    parser.add_argument("--validation-folds", type=int, default=1)
    parser.add_argument("--interval-width", type=float, default=0.8)
    parser.add_argument("--lead", type=float, default=300.0, help="lead time in seconds")
    parser.add_argument(
        "--hourly",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the within-hour profile",
    )
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
        f"{'series':30} {'gMASE':>6} {'roll cov':>8}  {'MASE min-max':>12} {'mean':>5} "
        f"{'last MASE':>9} {'last cov':>8} {'points':>6} {'step':>5} {'fit s':>6}"
    )
    print(
        f"growth={args.growth} daily_order={args.daily_order} weekly_order={args.weekly_order} mode={args.mode} "
        f"changepoint_prior={args.changepoint_prior} max_fit_points={args.max_fit_points} "
        f"validation_hours={args.validation_hours:g} validation_folds={args.validation_folds} "
        f"level_hours={args.level_hours:g} hourly={args.hourly} interval_width={args.interval_width} lead={args.lead:g}s "
        f"runs={args.runs} origins={args.origins} (2 d apart) days={args.days:g}"
    )
    print(header)
    print("-" * len(header))
    views: list[Rolling] = []
    for name in args.series:
        full = load(name)
        history = full.since(full.end - args.days * DAY_SECONDS)
        native = timedelta(seconds=round(history.step_seconds))
        spec = ForecastSpec(
            query=name, demand_per_replica=1.0, step=native, interval_width=args.interval_width
        )
        durations = []
        for _ in range(args.runs):
            started = time.perf_counter()
            forecaster.fit(history, model_spec(spec), fit_settings(spec, args.lead), history.end)
            durations.append(time.perf_counter() - started)
        view = rolling(full, spec, forecaster, args.days, args.origins, args.lead)
        views.append(view)
        lo, hi = TARGET_COVERAGE
        g_mark = " " if view.gmase < TARGET_GMASE else "*"
        c_mark = " " if lo <= view.coverage <= hi else "*"
        last = f"{view.last.mase:9.3f}" if view.last.mase is not None else f"{'-':>9}"
        fit = f"{statistics.median(durations):6.2f}" if durations else f"{'-':>6}"
        print(
            f"{name:30} {view.gmase:6.3f}{g_mark}{view.coverage:8.3f}{c_mark} "
            f"{min(view.mases):5.2f}-{max(view.mases):<6.2f} {np.mean(view.mases):5.2f} "
            f"{last} {view.last.coverage:8.3f} {len(history):6d} {int(native.total_seconds() // 60):4d}m {fit}"
        )
    print(
        f"over the series: gMASE max {max(v.gmase for v in views):.3f}, "
        f"rolling coverage {min(v.coverage for v in views):.3f}-{max(v.coverage for v in views):.3f}; "
        f"targets gMASE < {TARGET_GMASE:g}, coverage {TARGET_COVERAGE[0]:.2f}-{TARGET_COVERAGE[1]:.2f} (* = missed)"
    )
    own, child = peak_rss_mib()
    print(
        f"peak RSS: python {own:.0f} MiB, largest child (cmdstan) {child:.0f} MiB; target < 400 MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
