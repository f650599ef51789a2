"""Backtest every series in ../shared/datasets and print one table (measured, not asserted).

Usage: python bench/backtest_bench.py [--datasets DIR] [--only NAME ...] [--quantile Q] [--lead-time D]
                                     [--stabilization D] [--dial Q,Q,...] [--stabilization-dial D,D,...]

Columns: x of forecast and of the naive baseline (static headroom's unserved pod-minutes at the
same node-hours divided by the strategy's own; "inf" when the strategy leaves none), forecast
overhead node-hours next to the oracle's, forecast unserved as % of reactive, Prophet fit
seconds and wall time. Warm-up: 14 days, 7 days for series shorter than four weeks.
With `--dial 0.8,0.9,0.95,0.99` a second table gives x of forecast and naive at each burst
quantile, replayed from the same refits; `--stabilization-dial 5m,15m,30m` does the same for the
scale-down stabilisation window. Last, the four features that move each dataset's last burst model.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.commands import duration_arg, print_table
from predictive_headroom.core.settings import Given
from predictive_headroom.policy.durations import format_duration, parse_windows
from predictive_headroom.policy.shares import parse_quantiles
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def _x(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"


def dial_against(dial: list, other: object) -> str:
    """Does the forecast's dial curve dominate `other`'s point? Outright (a quantile leaving no more
    unserved at no more node-hours), or along the curve between two quantiles (linear in between)."""
    nh, un = other.metrics.node_hours, other.metrics.unserved_pod_minutes  # type: ignore[attr-defined]
    beats = [
        p.quantile
        for p in dial
        if p.forecast.metrics.unserved_pod_minutes <= un and p.forecast.metrics.node_hours <= nh
    ]
    points = sorted(
        (p.forecast.metrics.node_hours, p.forecast.metrics.unserved_pod_minutes) for p in dial
    )
    if beats:
        return f"dominates proportional outright at q = {', '.join(f'{q:g}' for q in beats)}"
    if points[0][0] > nh:
        return f"does not dominate proportional: the cheapest quantile costs {points[0][0] - nh:+.1f} node-hours more"
    along = float(np.interp(nh, [x for x, _ in points], [y for _, y in points]))
    verdict = "dominates" if along <= un else "does not dominate"
    overhead = other.overhead_node_hours  # type: ignore[attr-defined]
    return f"{verdict} proportional along the curve: {along:.0f} unserved pod-minutes at its cost ({overhead:.1f} overhead node-hours), against its {un:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--quantile", type=float)
    parser.add_argument("--lead-time", type=duration_arg)
    parser.add_argument(
        "--stabilization",
        type=duration_arg,
        help="scale-down stabilisation (default: the pool's 30m)",
    )
    parser.add_argument(
        "--dial",
        type=parse_quantiles,
        default=(),
        help="burst quantiles to sweep, e.g. 0.8,0.9,0.95,0.99",
    )
    parser.add_argument(
        "--burst-model",
        choices=("quantile", "profile"),
        help="burst allowance (default: the pool's, quantile)",
    )
    parser.add_argument(
        "--observation-delay",
        type=duration_arg,
        help="the burst model's observation delay (default 1m)",
    )
    parser.add_argument(
        "--stabilization-dial",
        type=parse_windows,
        default=(),
        help="stabilisation windows to sweep, e.g. 5m,15m,30m",
    )
    args = parser.parse_args(argv)
    files = sorted(args.datasets.glob("*.csv"))
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no CSV files in {args.datasets}", file=sys.stderr)
        return 2
    given = Given(
        lead=args.lead_time,
        window=args.stabilization,
        burst_quantile=args.quantile,
        observation_delay=args.observation_delay,
    )
    settings = BacktestSettings(
        replay=WhatIf(given, args.burst_model),
        dial=args.dial,
        stabilization_dial=args.stabilization_dial,
    )
    rows, dial_rows, window_rows, dominance, movers = [], [], [], [], []
    for path in files:
        started = time.perf_counter()
        result = run_backtest(read_csv_history(path), None, settings, progress=True)
        wall = time.perf_counter() - started
        s, h = result.strategies, result.headline()
        pct = h["forecast_unserved_pct_of_reactive"]
        f, n, pr, o, r = (s[k] for k in ("forecast", "naive", "proportional", "oracle", "reactive"))
        rows.append(
            [
                path.stem,
                f"{result.settings.warmup_seconds / 86400:g}d",
                _x(f.x),
                _x(n.x),
                _x(pr.x),
                f"{f.overhead_node_hours:.1f}",
                f"{n.overhead_node_hours:.1f}",
                f"{pr.overhead_node_hours:.1f}",
                f"{o.overhead_node_hours:.1f}",
                f"{f.metrics.unserved_pod_minutes:.0f}",
                f"{n.metrics.unserved_pod_minutes:.0f}",
                f"{pr.metrics.unserved_pod_minutes:.0f}",
                f"{r.metrics.unserved_pod_minutes:.0f}",
                "-" if pct is None else f"{pct:.1f}%",
                result.settings.refits,
                f"{result.fit_seconds:.1f}",
                f"{wall:.1f}",
            ]
        )
        if result.dial:
            dominance.append(f"{path.stem}: {dial_against(result.dial, pr)}")
        for p in result.dial:
            dial_rows.append(
                [
                    path.stem,
                    f"{p.quantile:g}",
                    _x(p.forecast.x),
                    _x(p.naive.x),
                    f"{p.forecast.overhead_node_hours:.1f}",
                    f"{p.naive.overhead_node_hours:.1f}",
                    f"{p.forecast.metrics.unserved_pod_minutes:.0f}",
                    f"{p.naive.metrics.unserved_pod_minutes:.0f}",
                ]
            )
        for w in result.stabilization_dial:
            window_rows.append(
                [
                    path.stem,
                    format_duration(timedelta(seconds=w.stabilization_seconds)),
                    _x(w.forecast.x),
                    _x(w.naive.x),
                    f"{w.forecast.overhead_node_hours:.1f}",
                    f"{w.naive.overhead_node_hours:.1f}",
                    f"{w.forecast.metrics.unserved_pod_minutes:.0f}",
                    f"{w.naive.metrics.unserved_pod_minutes:.0f}",
                ]
            )
        if result.burst and result.burst["importance"]:
            top = result.burst["importance"][:4]
            movers.append(
                f"{path.stem}: " + ", ".join(f"{m['feature']} {m['drop']:.3g}" for m in top)
            )
        print(f"done {path.stem} in {wall:.1f}s", file=sys.stderr, flush=True)
    print_table(
        [
            "dataset",
            "warmup",
            "x forecast",
            "x naive",
            "x proportional",
            "overhead forecast",
            "overhead naive",
            "overhead proportional",
            "overhead oracle",
            "unserved forecast",
            "unserved naive",
            "unserved proportional",
            "unserved reactive",
            "forecast unserved % of reactive",
            "refits",
            "fit s",
            "wall s",
        ],
        rows,
    )
    if dial_rows:
        print()
        print_table(
            [
                "dataset",
                "quantile",
                "x forecast",
                "x naive",
                "overhead forecast",
                "overhead naive",
                "unserved forecast",
                "unserved naive",
            ],
            dial_rows,
        )
    if dominance:
        print()
        print("\n".join(dominance))
    if movers:
        print()
        print(
            "what moves the burst model (last refit, permutation importance: pinball-loss growth when shuffled):"
        )
        print("\n".join(movers))
    if window_rows:
        print()
        print_table(
            [
                "dataset",
                "window",
                "x forecast",
                "x naive",
                "overhead forecast",
                "overhead naive",
                "unserved forecast",
                "unserved naive",
            ],
            window_rows,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
