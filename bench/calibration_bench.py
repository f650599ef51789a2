"""Today's promise rule (strictness learned from the last week) against a calibrated working
level (adaptive conformal inference, `replay.calibration`), walk-forward on every shared series.

Usage: python bench/calibration_bench.py --cache DIR [--protection 90%,95%] [--gamma 0.02,0.05]

Reads the replays `bench/frontier_bench.py --cache DIR` kept (run that first: the refits are the
slow part), replays both rules day by day on them and prints, per series and protection, what
each kept walk-forward, its overhead node-hours a day, and static headroom's cost (N chosen in
hindsight) at the protection each kept, as a ratio (static ÷ rule; above 1: the rule is cheaper).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

from predictive_headroom.backtest.frontier import Point, cost_at, protection
from predictive_headroom.backtest.promise_measure import measure, prepare
from predictive_headroom.backtest.results import FEW_EVENTS
from predictive_headroom.commands import print_table
from predictive_headroom.policy.shares import parse_protections
from predictive_headroom.replay.calibration import GAMMA, calibrated_walk_forward
from predictive_headroom.replay.tuning import DAY_MINUTES


def _ratio(a: float | None, b: float) -> str:
    if a is None:
        return "never"
    return "-" if b <= 0 else f"{a / b:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--gamma", default=f"{GAMMA:g}", help="steps to try, comma-separated")
    args = parser.parse_args(argv)
    gammas = [float(g) for g in args.gamma.split(",")]
    files = sorted(args.cache.glob("*.pkl"))
    if not files:
        print(
            f"no cached replays in {args.cache}: run bench/frontier_bench.py --cache",
            file=sys.stderr,
        )
        return 2
    rows = []
    for path in files:
        with path.open("rb") as fh:
            result = pickle.load(fh)
        r = prepare(result)
        reactive = result.strategies["reactive"].metrics
        days = (result.pods.size - result.scored_from) / DAY_MINUTES
        static = [
            Point(m.node_hours - reactive.node_hours, m.unserved_pod_minutes, f"N={n}")
            for n, m in result.static_curve
        ]
        for entry in (e.to_dict() for e in measure(result, args.protection, r)):
            p = entry["protection"]
            cells = [
                path.stem,
                f"{100 * p:g}%",
                f"{reactive.unserved_pod_minutes:,.0f}",
                f"{100 * entry['realized_protection']:.1f}%",
                f"{entry['overhead_node_hours_per_day']:.1f}",
                _ratio(entry["static_hindsight_overhead_node_hours"], entry["overhead_node_hours"]),
            ]
            for g in gammas:
                walk, _ = calibrated_walk_forward(r.book, r.base, r.walk, p, r.default, g)
                kept = protection(walk.unserved_pod_minutes, reactive.unserved_pod_minutes)
                overhead = walk.node_hours - reactive.node_hours
                at = cost_at(static, reactive.unserved_pod_minutes, kept).cost
                cells += [f"{100 * kept:.1f}%", f"{overhead / days:.1f}", _ratio(at, overhead)]
            rows.append(cells)
        print(f"done {path.stem}", file=sys.stderr, flush=True)
    head = ["series", "asked", "waited", "today kept", "node-h/day", "static÷"]
    for g in gammas:
        head += [f"γ={g:g} kept", "node-h/day", "static÷"]
    print_table(head, rows)
    print(
        f"\n(waited: pod-minutes without headroom; under {FEW_EVENTS:g} the figures rest on a few bursts)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
