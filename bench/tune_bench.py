"""`tune` on the last days of a shared series: seconds for the whole command (measured, not
asserted; the target is <= 90 s on 28 days of 1-minute data).

Usage: python bench/tune_bench.py [--data CSV] [--days 28] [--protection 95%] [--step 1m]
                                  [--demand-per-replica X]

Writes the last `--days` of the series and a one-pool policy (`protection:` as asked, the
series' own demand per replica: median about 20 pods, `forecast.history` as long as the slice)
to a temporary directory, runs `predictive-headroom tune -c POLICY --data CSV -q` in this
process, as a user would, and prints its output, then the wall and CPU seconds it took (Stan's
optimiser, a child process, included) and the CPU seconds in each stage (`STAGES`). The refits
run in worker processes (`--workers`, the CPUs it may use): their CPU is not in these figures;
run the bench under `process_tree.py` for the whole tree's.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from stages import cpu_seconds, line, stage_timers

from predictive_headroom.cli import main as cli_main
from predictive_headroom.core.series import DAY_SECONDS, iso_utc
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.setup import auto_demand_per_replica
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "worldcup98_requests_1min.csv"
)
POLICY = """pools:
  - name: web
    target: {{namespace: headroom, name: web-placeholder}}
    maxReplicas: 100000
    leadTime: 5m
    protection: {protection:g}%
    forecast:
      query: demand
      demandPerReplica: {dpr:g}
      history: {days:g}d
"""


def write_slice(data: Path, days: float, into: Path) -> tuple[Path, float]:
    """The last `days` of `data` as a CSV in `into`, and its demand per replica."""
    history = read_csv_history(str(data))
    keep = history.since(history.end - days * DAY_SECONDS + 1.0)
    out = into / f"{data.stem}-last-{days:g}d.csv"
    rows = (
        f"{iso_utc(float(t))},{float(v)!r}" for t, v in zip(keep.times, keep.values, strict=True)
    )
    out.write_text("\n".join(["timestamp,value", *rows]) + "\n")
    return out, auto_demand_per_replica(keep)


STAGES = {
    "Prophet fits": ["predictive_headroom.forecast.forecaster:fitted_model"],
    "Prophet predictions": [
        "predictive_headroom.forecast.forecaster:predict",
        "predictive_headroom.forecast.prophet_model:predict",
    ],
    "burst models (every quantile)": [
        "predictive_headroom.forecast.burst_model:BurstTrainer.model"
    ],
    "engine (plans at every minute, burst-model predictions included)": [
        "predictive_headroom.replay.setup:planner_strategy"
    ],
    "simulate (the proportional strategy's plans included)": [
        "predictive_headroom.replay.setup:simulate",
        "predictive_headroom.replay.promise:simulate",
        "predictive_headroom.replay.tuning:simulate",
        "predictive_headroom.backtest.run:simulate",
        "predictive_headroom.backtest.promise_measure:simulate",
    ],
}
"""Where `tune` spends its time: each stage is the functions named, timed where called."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--demand-per-replica", type=float)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        csv, dpr = write_slice(args.data, args.days, Path(tmp))
        policy = Path(tmp) / "policy.yaml"
        text = POLICY.format(
            protection=100 * args.protection,
            dpr=args.demand_per_replica or dpr,
            days=math.ceil(args.days),
        )
        policy.write_text(text)
        with stage_timers(STAGES) as spent:
            wall, cpu = time.perf_counter(), cpu_seconds()
            code = cli_main(["tune", "-c", str(policy), "--data", str(csv), "-q"])
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    print(
        f"tune on the last {args.days:g} days of {args.data.name}: {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU (exit {code})"
    )
    print(f"  {line(spent, cpu)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
