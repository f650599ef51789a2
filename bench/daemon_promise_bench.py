"""The promise on the daemon (issue 62, item 6): the daemon's `protection: P` walked forward day by
day (`backtest.daemon_walk`: each day's refit makes `tune`'s choice on the days before it and holds
it), judged beside `tune`'s recommendation on the same unseen days, on every shared series.

Usage: python bench/daemon_promise_bench.py [--datasets DIR] [--only NAME ...] [--days D]
                                            [--protection 90%,95%] [--cache DIR] [--out FILE]

Two figures per row, as `bench/choice_bench.py` judges them: kept at least P - 2 points on the
last half of the scored days, chosen on the first half (`Recommendation.held_out` when the rule
chooses what it pastes on all of them, `ChoiceRule.on_all_days`), and at most 1.10 times static headroom at the protection
kept there. Beside them the daemon as it ran before issue 62 (the promise at P alone, the re-tune's
rule walked forward: `Recommendation.product_unseen`). The promise on the daemon holds where, on
every row where `tune`'s recommendation meets both figures, the daemon's walk meets both too.
One replay per series (`tune`'s: the daemon's five quantiles x three windows, refitted daily;
`against_fixed_bench.replay`, kept with `--cache DIR`).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

from against_fixed_bench import _rank, replay
from choice_bench import MARGIN, TOLERANCE, markdown

from predictive_headroom.backtest.against_fixed import Judged, replays
from predictive_headroom.backtest.daemon_walk import daemon_walk
from predictive_headroom.backtest.pasted import tune_choice
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.policy.shares import parse_protections

DEFAULT_DIR = Path("/work/shared/datasets")


def both(j: Judged | None, asked: float) -> tuple[bool, bool]:
    """(kept >= P - 2, cost <= 1.10x static at the protection kept) on the unseen days."""
    if j is None:
        return False, False
    kept = j.kept >= asked - TOLERANCE - 1e-9
    static = j.static_per_day
    cost = static is None or (j.per_day <= MARGIN * static + 1e-9)
    return kept, cost


def cell(j: Judged | None, asked: float) -> str:
    """`95.2% 1.04x ok` (or `-`)."""
    if j is None:
        return "-"
    ratio = "no N kept it" if j.static_per_day is None else f"{j.over_static or 0:.2f}x"
    kept, cost = both(j, asked)
    return f"{100 * j.kept:.1f}% {ratio} {'ok' if kept and cost else 'NO'}"


def _load(path: Path, args: argparse.Namespace) -> BacktestResult:
    cached = args.cache / f"{path.stem}.pkl" if args.cache else None
    if cached is not None and cached.exists():
        with cached.open("rb") as fh:
            return pickle.load(fh)
    result = replay(path, args.days, args.protection)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with cached.open("wb") as fh:
            pickle.dump(result, fh)
    return result


def rows_of(stem: str, result: BacktestResult, protections: tuple[float, ...]) -> list[list[str]]:
    r = replays(result, protections)
    out = []
    for p in protections:
        rec = tune_choice(r, p).at_protection
        walk = daemon_walk(r, p)
        tune_ok = all(both(rec.unseen, p))
        daemon_ok = all(both(walk.unseen, p))
        held = sorted(set(walk.held[1:]))
        out.append(
            [
                stem,
                f"{100 * p:g}%",
                f"{rec.unseen_days:.1f}",
                rec.label(),
                rec.held_out or rec.label(),
                cell(rec.unseen, p),
                cell(walk.unseen, p),
                ", ".join(held) or "-",
                cell(rec.product_unseen, p),
                "yes" if daemon_ok or not tune_ok else "NO",
            ]
        )
    return out


HEAD = [
    "series",
    "asked",
    "unseen days",
    "tune recommends",
    "chosen before the unseen days",
    "it kept there",
    "the daemon walked forward, unseen",
    "the daemon held",
    "before (protection: P alone), unseen",
    "holds where tune's does",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--days", type=float, help="replay only the last DAYS of each series")
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--cache", type=Path, help="keep (and reuse) each series' replay here")
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = parser.parse_args(argv)
    files = sorted(args.datasets.glob("*.csv"), key=_rank)
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no CSV files in {args.datasets}", file=sys.stderr)
        return 2
    rows: list[list[str]] = []
    for path in files:
        started = time.perf_counter()
        rows += rows_of(path.stem, _load(path, args), args.protection)
        print(f"done {path.stem} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        table = markdown(HEAD, rows)
        if args.out:
            args.out.write_text(table + "\n")
    print(markdown(HEAD, rows))
    held = all(row[-1] == "yes" for row in rows)
    print(f"\nthe promise on the daemon: {'holds' if held else 'does NOT hold'} on every row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
