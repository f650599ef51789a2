"""Choose on the first half or on all the days known (issue 62, item 7: "choose on all of them";
measured, not asserted).

Usage: python bench/choose_on_bench.py [--datasets DIR] [--only NAME ...] [--protection 90%,95%]
                                       --cache DIR [--markdown]

Two ways `tune` can make its choice at an instant (`backtest.choice.decide`, the same rule):

- **half**: on the first half of the scored days known (what `tune` pasted before);
- **all**: on all of them (what the weekly range measures, and what `tune` pastes now).

Each is judged walk-forward, never on the days it chose on, by the two figures of
`bench/choice_bench.py` (kept at least P - 2 points, at most 1.10x static headroom at the
protection kept), three ways per series and P:

- **split**: the last half of the scored days, chosen at its start (half: on the first quarter;
  all: on the first half);
- **weeks**: every unseen week (`backtest.weeks.cuts`), chosen at its start (half: on the first
  half of the days before it; all: on all of them): the weeks meeting each figure, and the worst;
- **daemon**: the daemon walked forward (`backtest.daemon_walk`: each day's choice made on the
  days before it, the promise at P until a week is scored), judged on the last half.

Reads the replays `bench/against_fixed_bench.py --replay-only --cache DIR` made.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from against_fixed_bench import _rank
from choice_bench import DEFAULT_DIR, MARGIN, TOLERANCE, _load, markdown

from predictive_headroom.backtest.against_fixed import Judged, Recommended, Replays, Span, replays
from predictive_headroom.backtest.choice import Decision, decide, seen_unseen
from predictive_headroom.backtest.daemon_walk import cut, daemon_walk
from predictive_headroom.backtest.pasted import MIN_JUDGED_DAYS
from predictive_headroom.backtest.weeks import cuts, day_sums
from predictive_headroom.commands import print_table
from predictive_headroom.policy.shares import parse_protections

WAYS = ("half", "all")


def ok(j: Judged | None, asked: float) -> tuple[bool, bool]:
    """(kept >= P - 2, cost <= 1.10x static at the protection kept)."""
    if j is None:
        return False, False
    static = j.static_per_day
    return (
        j.kept >= asked - TOLERANCE - 1e-9,
        static is None or j.per_day <= MARGIN * static + 1e-9,
    )


def cell(j: Judged | None, asked: float) -> str:
    if j is None:
        return "-"
    kept, cost = ok(j, asked)
    ratio = "-" if j.over_static is None else f"{j.over_static:.2f}x"
    return f"{100 * j.kept:.1f}% {ratio} {'ok' if kept and cost else 'NO'}"


def on(way: str, r: Replays, known: Span) -> Span:
    """The span `way` chooses on, of the scored days `known` (from the first scored minute)."""
    if way == "all":
        return known
    seen, _, _ = seen_unseen(cut(r, known.hi))
    return seen


def split_figure(r: Replays, asked: float, way: str) -> Judged | None:
    _, unseen, split = seen_unseen(r)
    if unseen is None:
        return None
    known = cut(r, split).whole
    return unseen.judge(decide(r, on(way, r, known), asked).run(r))


def weeks_figure(r: Replays, asked: float, way: str) -> tuple[int, int, int, int, float | None]:
    """(weeks judged, meeting kept, meeting cost, meeting both, worst kept)."""
    sums = day_sums(r)
    pairs, _ = cuts(sums)
    judged = kept = cost = both = 0
    worst: float | None = None
    for first, stop in pairs:
        unseen = sums.span(first, stop)
        if unseen.reactive_unserved <= 0:
            continue
        before = sums.span(0, first)
        chosen = before if way == "all" else sums.span(0, max(1, first // 2))
        j = unseen.judge(decide(r, chosen, asked).run(r))
        k, c = ok(j, asked)
        judged, kept, cost, both = judged + 1, kept + k, cost + c, both + (k and c)
        worst = j.kept if worst is None else min(worst, j.kept)
    return judged, kept, cost, both, worst


def daemon_figure(r: Replays, asked: float, way: str) -> Judged | None:
    def choose(c: Replays, p: float, _budget: object) -> Decision:
        if c.whole.days < MIN_JUDGED_DAYS - 1e-9:
            return Decision(Recommended.PROTECTION, p, 0, "too few scored days")
        return decide(c, on(way, c, c.whole), p)

    return daemon_walk(r, asked, choose=choose).unseen  # type: ignore[arg-type]


def rows_of(stem: str, r: Replays, asked: float) -> tuple[list[str], dict[str, tuple]]:
    row = [stem, f"{100 * asked:g}%"]
    flags: dict[str, tuple] = {}
    for way in WAYS:
        s = split_figure(r, asked, way)
        n, k, c, b, worst = weeks_figure(r, asked, way)
        d = daemon_figure(r, asked, way)
        flags[way] = (ok(s, asked), (k, c), ok(d, asked))
        low = "-" if worst is None else f"{100 * worst:.1f}%"
        row += [cell(s, asked), f"{k}/{c}/{b} of {n}, worst {low}", cell(d, asked)]
    return row, flags


HEAD = [
    "series",
    "asked",
    "half: split",
    "half: weeks kept/cost/both",
    "half: daemon",
    "all: split",
    "all: weeks kept/cost/both",
    "all: daemon",
    "all no worse",
]


def no_worse(flags: dict[str, tuple]) -> bool:
    """`all` meets every figure `half` met: on the split and the daemon, each flag; on the weeks,
    at least as many weeks meeting each figure."""
    (hs, hw, hd), (as_, aw, ad) = flags["half"], flags["all"]
    flag_ok = all(a or not h for h, a in zip((*hs, *hd), (*as_, *ad), strict=True))
    return flag_ok and aw[0] >= hw[0] and aw[1] >= hw[1]


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
    rows, totals = [], {way: [0] * 6 for way in WAYS}
    for path in files:
        started = time.perf_counter()
        r = replays(_load(path, args), args.protection)
        for p in args.protection:
            row, flags = rows_of(path.stem, r, p)
            rows.append([*row, "yes" if no_worse(flags) else "NO"])
            for way in WAYS:
                (sk, sc), (wk, wc), (dk, dc) = flags[way]
                totals[way] = [
                    t + v for t, v in zip(totals[way], (sk, sc, wk, wc, dk, dc), strict=True)
                ]
        print(f"done {path.stem} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    if args.markdown:
        print(markdown(HEAD, rows))
    else:
        print_table(HEAD, rows)
    for way in WAYS:
        sk, sc, wk, wc, dk, dc = totals[way]
        print(
            f"{way}: split kept {sk}, cost {sc} of {len(rows)} rows; weeks kept {wk}, cost {wc}; "
            f"daemon kept {dk}, cost {dc} of {len(rows)} rows"
        )
    held = all(row[-1] == "yes" for row in rows)
    summed = all(a >= h for a, h in zip(totals["all"], totals["half"], strict=True))
    print(
        f"\nchoosing on all the days known: {'no worse on every row' if held else 'worse on a row'}"
        f"; summed over the series, {'no worse' if summed else 'WORSE'} on every figure"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
