"""The daemon's re-tune (`app/tune.py`) on a shared series: seconds a pool per refit
(measured, not asserted; the target is <= 10 s a pool on 1-minute data).

Usage: python bench/retune_bench.py [--data CSV] [--at ISO] [--protection 95%] [--window-days 14]

Runs one re-tune at `--at` (default: the end of the series) with the default grid, as the
daemon's refit would, and prints what it chose, the reason and how long it took (the extra fit
included).
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path

from predictive_headroom.app.fit import default_forecaster
from predictive_headroom.app.tune import RETUNE_WINDOW, retune
from predictive_headroom.commands import parse_time
from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.policy.config import ForecastSpec, Pool, Target
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.setup import auto_demand_per_replica
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "worldcup98_requests_1min.csv"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--at", help="refit instant (ISO-8601; default: the end of the series)")
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--window-days", type=float, default=RETUNE_WINDOW / DAY_SECONDS)
    args = parser.parse_args(argv)
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
    started = time.perf_counter()
    tuning = retune(
        pool,
        history,
        at,
        default_forecaster(),
        resolve_settings(pool),
        window_seconds=args.window_days * DAY_SECONDS,
    )
    seconds = time.perf_counter() - started
    print(f"{args.data.name}: {len(history)} points, step {history.step_seconds:g}s, at {at:.0f}")
    print(
        f"status {tuning.status}: q {tuning.burst_quantile:g}, window {tuning.stabilization_seconds:g}s"
    )
    print(f"reason: {tuning.reason}")
    print(f"re-tune seconds (extra fit + grid replay): {seconds:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
