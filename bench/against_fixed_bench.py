"""Against fixed headroom, on every series in ../shared/datasets (measured, not asserted).

Usage: python bench/against_fixed_bench.py [--datasets DIR] [--only NAME ...] [--days D]
                                           [--protection 90%,95%] [--cache DIR] [--replay-only]

For each series (its last `--days` days, default all) and protection: what `protection: P` kept
walk-forward and its overhead node-hours a day, static headroom's cost at that protection (the
curve every fixed N of pause pods is a point of) and its ratio to the product, then what `tune`
recommends (`backtest.choice.recommend_choice`: a protection level, or a fixed N sized on
the first part of the scored days) with the protection it kept and its cost on the part it did not
see, and that cost over static headroom's on the unseen part at the protection it kept (the goal:
at most 1.10). The replays are `tune`'s (the daemon's five quantiles x three windows, refitted
daily, the frontier's levels measured); `--cache DIR` keeps each series' replay (pickled) so the
table can be printed again without refitting.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

from predictive_headroom.backtest.against_fixed import replays
from predictive_headroom.backtest.choice import RULE, ChoiceRule, recommend_choice
from predictive_headroom.backtest.results import BacktestResult, BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.commands import print_table
from predictive_headroom.core.series import DAY_SECONDS
from predictive_headroom.policy.shares import parse_protections
from predictive_headroom.replay.promise import PROMISE_QUANTILES
from predictive_headroom.replay.promise_price import FRONTIER_LEVELS
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ORDER = ("elb", "azure", "google", "asg", "twitter", "worldcup", "taxi")
"""Cheapest first, so a short run measures the most series."""


def _rank(path: Path) -> int:
    return next((i for i, key in enumerate(ORDER) if key in path.stem), len(ORDER))


def replay(path: Path, days: float | None, protections: tuple[float, ...]) -> BacktestResult:
    """`tune`'s replay of one series (its last `days` days)."""
    history = read_csv_history(str(path))
    if days:
        history = history.since(history.end - days * DAY_SECONDS)
    settings = BacktestSettings(
        grid_quantiles=PROMISE_QUANTILES,
        protections=tuple(sorted({*FRONTIER_LEVELS, *protections})),
        burst_view=False,
    )
    return run_backtest(history, None, settings, progress=True)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "not reached" if v is None else f"{v:,.1f}"


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def rows_of(
    stem: str, result: BacktestResult, protections: tuple[float, ...], rule: ChoiceRule
) -> list[list[str]]:
    """The table's rows for one series."""
    r = replays(result, protections)
    out = []
    for p in protections:
        rec = recommend_choice(r, p, rule)
        whole, unseen = rec.product_whole, rec.unseen
        assert unseen is not None and rec.product_unseen is not None
        out.append(
            [
                stem,
                f"{100 * p:g}%",
                _pct(whole.kept),
                _num(whole.per_day),
                _num(whole.static_per_day),
                _ratio(whole.static_ratio),
                rec.label(),
                _pct(unseen.kept),
                _num(unseen.per_day),
                _num(unseen.static_per_day),
                _ratio(unseen.over_static),
                _pct(rec.product_unseen.kept),
                _num(rec.product_unseen.per_day),
                _ratio(rec.product_unseen.over_static),
                f"{rec.seen_days:.1f}+{rec.unseen_days:.1f}",
            ]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--days", type=float, help="replay only the last DAYS of each series")
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--cache", type=Path, help="keep (and reuse) each series' replay here")
    parser.add_argument("--replay-only", action="store_true", help="fill the cache, no table")
    parser.add_argument(
        "--margin", type=float, default=RULE.margin, help="the rule's margin over static headroom"
    )
    parser.add_argument(
        "--few-events",
        type=float,
        default=RULE.few_events,
        help="below this many waiting pod-minutes on the seen part the rule keeps the protection",
    )
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
        cached = args.cache / f"{path.stem}.pkl" if args.cache else None
        if cached is not None and cached.exists():
            with cached.open("rb") as fh:
                result = pickle.load(fh)
        else:
            result = replay(path, args.days, args.protection)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                with cached.open("wb") as fh:
                    pickle.dump(result, fh)
        if not args.replay_only:
            rows += rows_of(
                path.stem, result, args.protection, ChoiceRule(args.margin, args.few_events)
            )
        print(f"done {path.stem} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    if args.replay_only:
        return 0
    print_table(
        [
            "series",
            "asked",
            "kept",
            "node-h/day",
            "static at kept",
            "static ÷ product",
            "tune recommends",
            "kept unseen",
            "node-h/day unseen",
            "static unseen",
            "rec ÷ static",
            "asked, unseen: kept",
            "node-h/day",
            "÷ static",
            "days seen+unseen",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
