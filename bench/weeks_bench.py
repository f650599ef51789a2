"""How sure the promise is, on every series in ../shared/datasets (issue 62, item 7; measured,
not asserted).

Usage: python bench/weeks_bench.py [--datasets DIR] [--only NAME ...] [--days D]
                                   [--protection 90%,95%] [--cache DIR] [--markdown]

For each series and protection P asked: what `tune` recommends (`backtest.choice.recommend_choice`,
chosen on the first half of the scored days) and what it kept on the last half (the single
figure), beside the range the same rule kept on every unseen week, each chosen on the days before
it (`backtest.weeks`): lowest, median, highest, the weeks judged, whether P is out of reach (the
worst week more than 5 points under it) and the peak-sized fixed N with its overhead node-hours a
day. The replays are `tune`'s, shared with `bench/against_fixed_bench.py` and
`bench/choice_bench.py` through `--cache DIR`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from against_fixed_bench import _rank
from choice_bench import DEFAULT_DIR, _load, markdown

from predictive_headroom.backtest.against_fixed import replays
from predictive_headroom.backtest.choice import recommend_choice
from predictive_headroom.commands import print_table
from predictive_headroom.policy.shares import parse_protections

HEAD = [
    "series",
    "asked",
    "recommended",
    "last unseen days: kept (chosen before them)",
    "unseen weeks: low-high",
    "median",
    "judged (quiet)",
    "P out of reach",
    "peak-sized fixed N, node-h/day",
    "recommended, node-h/day on the last unseen days",
]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def row(stem: str, r, asked: float) -> list[str]:
    """One table row for `stem` at `asked`."""
    rec = recommend_choice(r, asked)
    unseen, weeks = rec.unseen, rec.weeks
    chosen = rec.held_out or rec.label()
    last = "-" if unseen is None else f"{_pct(unseen.kept)} ({rec.unseen_days:.1f} d, {chosen})"
    if weeks is None or not weeks.weeks:
        quiet = "-" if weeks is None else f"0 ({weeks.quiet})"
        return [stem, f"{100 * asked:g}%", rec.label(), last, "-", "-", quiet, "-", "-", "-"]
    peak = weeks.peak
    fixed = (
        "-"
        if peak is None
        else f"N={peak.replicas}: {peak.per_day:,.1f}"
        if peak.replicas is not None
        else f"none kept it (largest: {_pct(peak.kept)})"
    )
    return [
        stem,
        f"{100 * asked:g}%",
        rec.label(),
        last,
        f"{_pct(weeks.low)}-{_pct(weeks.high)}",
        _pct(weeks.median),
        f"{len(weeks.weeks)} {weeks.unit}s ({weeks.quiet})",
        "yes" if weeks.out_of_reach else "no",
        fixed,
        "-" if unseen is None else f"{unseen.per_day:,.1f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--days", type=float, help="replay only the last DAYS of each series")
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--cache", type=Path, help="keep (and reuse) each series' replay here")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    files = sorted(args.datasets.glob("*.csv"), key=_rank)
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no CSV files in {args.datasets}", file=sys.stderr)
        return 2
    rows = []
    for path in files:
        started = time.perf_counter()
        r = replays(_load(path, args), args.protection)
        rows += [row(path.stem, r, p) for p in args.protection]
        print(f"done {path.stem} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    if args.markdown:
        print(markdown(HEAD, rows))
    else:
        print_table(HEAD, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
