"""Fixed headroom when the forecast does not pay (`protectionFallback: fixed`), walk-forward on
every shared series (measured, not asserted).

Usage: python bench/fallback_bench.py --cache DIR [--protection 90%,95%] [--only NAME ...]

Reads the replays `bench/against_fixed_bench.py --cache DIR --replay-only` kept (`tune`'s: the
daemon's five quantiles x three windows, refitted daily; run that first, one series at a time:
the refits are the slow part), then replays `protection: P` day by day as `backtest --protection`
does (`backtest.promise_measure.promise_walk`), without and with the fallback: on a day whose
ledger (the 14 days before it) says the forecast did not keep P or did not beat a fixed N, the
fewest fixed placeholders that kept P over those days. Per series and protection: what each kept,
its overhead node-hours a day, its position against the fixed-headroom curve (static headroom's
cost at the protection it kept, N chosen in hindsight, over its own: above 1 it is cheaper than
the curve) and the days held fixed.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

from predictive_headroom.backtest.frontier import Point, cost_at, protection
from predictive_headroom.backtest.promise_measure import prepare, promise_walk
from predictive_headroom.commands import print_table
from predictive_headroom.policy.shares import parse_protections
from predictive_headroom.replay.fallback import DEARER_MARGIN
from predictive_headroom.replay.promise import Status, WalkForward
from predictive_headroom.replay.tuning import DAY_MINUTES


def figures(
    wf: WalkForward, reactive_u: float, reactive_nh: float, days: float, static: list[Point]
):
    """(kept, overhead node-hours a day, position against the static curve, days held fixed)."""
    kept = protection(wf.unserved_pod_minutes, reactive_u)
    overhead = wf.node_hours - reactive_nh
    at = cost_at(static, reactive_u, kept).cost
    position = None if at is None or overhead <= 0 else at / overhead
    fixed = sum(1 for c in wf.choices if c is not None and c.status == Status.FIXED)
    return kept, overhead / days, position, fixed


def _pos(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to read")
    parser.add_argument(
        "--margin",
        type=float,
        default=DEARER_MARGIN,
        help="dearer than static headroom above this many times its cost (default: tune's)",
    )
    args = parser.parse_args(argv)
    files = sorted(args.cache.glob("*.pkl"))
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(
            f"no cached replays in {args.cache}: run bench/against_fixed_bench.py", file=sys.stderr
        )
        return 2
    rows = []
    for path in files:
        started = time.process_time()
        with path.open("rb") as fh:
            result = pickle.load(fh)
        r = prepare(result, args.protection)
        reactive = result.strategies["reactive"].metrics
        days = (result.pods.size - result.scored_from) / DAY_MINUTES
        static = [
            Point(m.node_hours - reactive.node_hours, m.unserved_pod_minutes, f"N={n}")
            for n, m in result.static_curve
        ]
        for p in args.protection:
            cells = [path.stem.removesuffix("_5min").removesuffix("_1min"), f"{100 * p:g}%"]
            out = []
            for fallback in (False, True):
                wf = promise_walk(result, r, p, fallback=fallback, margin=args.margin)
                out.append(
                    figures(wf, reactive.unserved_pod_minutes, reactive.node_hours, days, static)
                )
            (k0, c0, s0, _), (k1, c1, s1, f1) = out
            cells += [
                f"{100 * k0:.1f}%",
                f"{100 * k1:.1f}%",
                f"{c0:,.1f}",
                f"{c1:,.1f}",
                _pos(s0),
                _pos(s1),
                "-" if s0 is None or s1 is None else f"{s1 - s0:+.2f}",
                f"{f1} of {len(r.starts)}",
            ]
            rows.append(cells)
        print(f"done {path.stem} in {time.process_time() - started:.1f} s of CPU", file=sys.stderr)
    print_table(
        [
            "series",
            "asked",
            "kept before",
            "kept after",
            "node-h/day before",
            "after",
            "curve position before",
            "after",
            "change",
            "days fixed",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
