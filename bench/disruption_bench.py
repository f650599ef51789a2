"""What the disruption component is worth on a series: the backtest with nodes interrupted at random,
over several seeds (measured, not asserted). The README's and docs/disruption.md's table.

Usage: python bench/disruption_bench.py [--data CSV] [--interruptions 5%/day] [--notice 2m]
                                        [--seeds 0,1,2]

Per seed, the pod-minutes left waiting because of the interruptions (interrupted run minus the same
strategy's run without them) with and without the disruption component, and the node-hours the
component adds; the last line sums the seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.commands import duration_arg, print_table
from predictive_headroom.policy.disruption import parse_rate
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "azure_v2_vm_cpu_total_5min.csv"
)
PAIRS = (
    ("no headroom / the component alone", "reactive", "disruption only"),
    ("proportional", "proportional without disruption", "proportional"),
    ("forecast", "forecast without disruption", "forecast"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--interruptions", default="5%/day")
    parser.add_argument("--notice", type=duration_arg, default=120.0)
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"no series at {args.data}", file=sys.stderr)
        return 1
    history = read_csv_history(str(args.data))
    rate = parse_rate(args.interruptions)
    seeds = [int(s) for s in args.seeds.split(",")]
    by_seed = []
    for seed in seeds:
        settings = BacktestSettings(
            interruption_rate=rate, notice_seconds=args.notice, seed=seed, burst_view=False
        )
        result = run_backtest(history, None, settings, progress=False)
        assert result.interruptions is not None
        by_seed.append({row.name: row for row in result.interruptions.rows})
        print(
            f"seed {seed}: {by_seed[-1]['reactive'].interruptions} interruptions scored",
            file=sys.stderr,
        )
    rows = []
    for label, without, with_ in PAIRS:
        before = [r[without].change for r in by_seed]
        after = [r[with_].change for r in by_seed]
        added = [
            r[with_].interrupted.node_hours - r[without].interrupted.node_hours for r in by_seed
        ]
        rows.append(
            [
                label,
                " / ".join(f"{v:.0f}" for v in before) + f" = {sum(before):.0f}",
                " / ".join(f"{v:.0f}" for v in after) + f" = {sum(after):.0f}",
                " / ".join(f"{v:+.1f}" for v in added),
            ]
        )
    print(
        f"{args.data.stem}, {args.interruptions}, notice {args.notice:g} s, seeds {args.seeds}: "
        "change in waiting with interruptions (pod-minutes)"
    )
    print_table(["strategy", "without the component", "with it", "node-hours it adds"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
