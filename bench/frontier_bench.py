"""Cost at equal protection on every series in ../shared/datasets (measured, not asserted).

Usage: python bench/frontier_bench.py [--datasets DIR] [--only NAME ...] [--protection 90%,95%]
                                      [--dial Q,...] [--stabilization-dial D,...] [--cache DIR]

For each series and protection: the overhead node-hours (over no headroom) that static headroom
(N chosen in hindsight), the proportional rule, the naive baseline and the forecast need to absorb
that share of the pod-minutes reactive leaves waiting, and the oracle's. Forecast and naive are
tuned walk-forward over the grid of burst quantiles x scale-down stabilisation windows (each day's
setting chosen from the scored days before it); "forecast fixed" is the best single setting in
hindsight, on the same footing as static. Then the ratios and the setting tuning picks now.
A second table measures the promise (`backtest.promise_measure`): what `protection: P` kept
walk-forward with the daemon's rule, its cost, and the cost at the protection it kept of a fixed
reserve re-chosen daily and of static headroom with N chosen in hindsight.
`--cache DIR` keeps each series' replays (pickled) so the table can be printed again without
refitting.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

from predictive_headroom.backtest.frontier import frontier
from predictive_headroom.backtest.promise_measure import measure
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.commands import duration_arg, print_table
from predictive_headroom.policy.durations import parse_windows
from predictive_headroom.policy.shares import parse_protections, parse_quantiles
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def _cost(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--dial", type=parse_quantiles, default=())
    parser.add_argument("--stabilization-dial", type=parse_windows, default=())
    parser.add_argument("--cache", type=Path, help="keep (and reuse) each series' replays here")
    parser.add_argument(
        "--promise-only", action="store_true", help="print the promise table only (no frontier)"
    )
    parser.add_argument(
        "--refit-every", type=duration_arg, default=86400.0, help="refit interval (default 1d)"
    )
    args = parser.parse_args(argv)
    files = sorted(args.datasets.glob("*.csv"))
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no CSV files in {args.datasets}", file=sys.stderr)
        return 2
    settings = BacktestSettings(
        dial=args.dial,
        stabilization_dial=args.stabilization_dial,
        protections=args.protection,
        refit_every_seconds=args.refit_every,
    )
    rows, promise_rows = [], []
    for path in files:
        started = time.perf_counter()
        cached = args.cache / f"{path.stem}.pkl" if args.cache else None
        if cached is not None and cached.exists():
            with cached.open("rb") as fh:
                result = pickle.load(fh)
        else:
            result = run_backtest(read_csv_history(path), None, settings, progress=True)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                with cached.open("wb") as fh:
                    pickle.dump(result, fh)
        table = {"at": []} if args.promise_only else frontier(result, args.protection)
        for entry in measure(result, args.protection):
            promise_rows.append(_promise_row(path.stem, entry.to_dict()))
        wall = time.perf_counter() - started
        for at in table["at"]:
            c, r = at["cost"], at["ratios"]
            rows.append(
                [
                    path.stem,
                    f"{100 * at['protection']:g}%",
                    _cost(c["forecast tuned"]),
                    _cost(c["naive tuned"]),
                    _cost(c["static"]),
                    _cost(c["proportional"]),
                    _cost(c["forecast"]),
                    _cost(c["oracle"]),
                    _ratio(r["static/forecast"]),
                    _ratio(r["naive/forecast"]),
                    _ratio(r["forecast/oracle"]),
                    at["chosen"]["label"] if at["chosen"] else "-",
                ]
            )
        print(f"done {path.stem} in {wall:.1f}s", file=sys.stderr, flush=True)
    if not args.promise_only:
        _frontier_table(rows)
        print()
    print_table(
        [
            "dataset",
            "asked",
            "kept walk-forward",
            "unserved pod-min",
            "overhead node-h",
            "a day",
            "daily reserve",
            "static in hindsight",
            "reserve/promise",
            "static/promise",
            "days short",
        ],
        promise_rows,
    )
    return 0


def _frontier_table(rows: list[list[str]]) -> None:
    print_table(
        [
            "dataset",
            "protection",
            "forecast (tuned)",
            "naive (tuned)",
            "static",
            "proportional",
            "forecast fixed",
            "oracle",
            "static/forecast",
            "naive/forecast",
            "forecast/oracle",
            "tune picks now",
        ],
        rows,
    )


def _promise_row(stem: str, e: dict) -> list[str]:
    """One row of the promise table (`backtest.promise_measure.measure`)."""
    r = e["ratios"]
    return [
        stem,
        f"{100 * e['protection']:g}%",
        f"{100 * e['realized_protection']:.1f}%",
        f"{e['unserved_pod_minutes']:.0f} of {e['reactive_unserved_pod_minutes']:.0f}",
        f"{e['overhead_node_hours']:.1f}",
        f"{e['overhead_node_hours_per_day']:.1f}",
        _cost(e["reserve_walk_forward_overhead_node_hours"]),
        _cost(e["static_hindsight_overhead_node_hours"]),
        _ratio(r["reserve/promise"]),
        _ratio(r["static_hindsight/promise"]),
        f"{e['short_days']} of {len(e['choices'])}",
    ]


if __name__ == "__main__":
    sys.exit(main())
