"""The `budget:` cap replayed on a shared series: a forecast pool (seasonal-naive refits, the
backtest's simulated cluster) without a budget and at each budget asked, in overhead node-hours a
day. Prints, per budget, the protection kept on the scored days (the share of reactive's unserved
pod-minutes removed), the placeholders' node-hours a day there (mean, and the most on any whole
day: what the budget bounds), the overhead over reactive a day as the backtest counts it, and the
seconds the replay took. Measured, not asserted (`tests/test_budget_replay.py` asserts the bound).

Usage: python bench/budget_bench.py [--data CSV] [--days 28] [--demand-per-replica 2]
                                    [--budget 30 --budget 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_backtest import SeasonalNaiveForecaster

from predictive_headroom.backtest.frontier import protection
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.budget import day_of
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.sources.csvsource import read_csv_history

DAY = 86400.0
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(SHARED / "nab_twitter_fb_5min.csv"))
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--demand-per-replica", type=float, default=2.0)
    parser.add_argument("--budget", type=float, action="append", default=[])
    args = parser.parse_args()
    full = read_csv_history(Path(args.data))
    history = full.until(full.start + args.days * DAY - 1)
    pool = {
        "name": "web",
        "target": {"namespace": "ns", "name": "ph"},
        "maxReplicas": 200,
        "forecast": {"query": "q", "demandPerReplica": args.demand_per_replica},
    }
    settings = BacktestSettings(replay=WhatIf(warmup_seconds=7 * DAY), refit_every_seconds=DAY)
    for budget in (None, *(args.budget or [30.0, 20.0])):
        spec = pool | ({"budget": {"nodeHoursPerDay": budget}} if budget else {})
        began = time.perf_counter()
        r = run_backtest(
            history, Pool.model_validate(spec), settings, forecaster=SeasonalNaiveForecaster()
        )
        seconds = time.perf_counter() - began
        forecast, reactive = r.strategies["forecast"], r.strategies["reactive"]
        times, held = r.times[r.scored_from :], forecast.run.placeholders[r.scored_from :]
        days: dict[float, float] = {}
        for at, n in zip(times.tolist(), held.tolist(), strict=True):
            start = day_of(at, "UTC").start
            days[start] = days.get(start, 0.0) + n / 60.0 / r.cluster.node_slots
        whole = [v for d, v in days.items() if d >= times[0] and d + DAY <= times[-1] + 60]
        scored = (times[-1] - times[0] + 60.0) / DAY
        kept = protection(
            forecast.metrics.unserved_pod_minutes, reactive.metrics.unserved_pod_minutes
        )
        print(
            f"budget {budget or 'none'}: kept {100 * kept:.1f}% over {scored:.1f} scored days; "
            f"placeholder node-hours a whole day: mean {sum(whole) / len(whole):.1f}, most "
            f"{max(whole):.1f} ({len(whole)} days); overhead over reactive "
            f"{forecast.overhead_node_hours / scored:.1f} a day; {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
