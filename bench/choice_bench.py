"""Tune's decision rule and its variants, judged on what the user asked (issue 54, item 5).

Usage: python bench/choice_bench.py [--datasets DIR] [--only NAME ...] [--days D]
                                    [--protection 90%,95%] [--cache DIR]

For each shared series and protection P asked, `tune`'s rule (`backtest.choice.recommend_choice`)
and each variant below choose on the first part of the scored days (seen) and are judged on the
second (unseen) by two figures:

- **kept**: the recommendation kept at least P - 2 points there (the promise's own tolerance);
- **cost**: it cost at most 1.10 times static headroom at the protection it kept there (no fixed N
  reaching that protection counts as met).

The variants are choices over the same replayed figures (one replay per series, `tune`'s: the
daemon's five quantiles x three windows, refitted daily; `against_fixed_bench.replay`, kept with
`--cache DIR` and shared with `bench/against_fixed_bench.py --cache DIR`), never a refit each.
A variant is adopted when it meets both figures on more rows than the current rule and breaks
neither figure on any row where the current rule meets it.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from against_fixed_bench import _rank, replay

from predictive_headroom.backtest.against_fixed import Judged, Replays, replays, span
from predictive_headroom.backtest.choice import RULE, ChoiceRule, recommend_choice
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.commands import print_table
from predictive_headroom.policy.shares import parse_protections

DEFAULT_DIR = Path("/work/shared/datasets")
TOLERANCE = 0.02
"""The first figure's tolerance: kept at least P - 2 points."""
MARGIN = 1.10
"""The second figure's bound: at most 1.10 times static headroom at the protection kept."""


@dataclass(frozen=True)
class Outcome:
    """One variant's recommendation for one series and P, judged on the unseen days."""

    label: str
    unseen: Judged

    def kept_ok(self, asked: float) -> bool:
        """Kept at least `asked` - 2 points on the unseen days."""
        return self.unseen.kept >= asked - TOLERANCE - 1e-9

    def cost_ok(self) -> bool:
        """At most 1.10 times static headroom at the protection kept (met when no fixed N kept
        it; at a static cost of 0, met only at no cost)."""
        static = self.unseen.static_per_day
        if static is None:
            return True
        if static <= 0:
            return self.unseen.per_day <= 1e-9
        return self.unseen.per_day <= MARGIN * static + 1e-9


def _rule(rule: ChoiceRule) -> Callable[[Replays, float], Outcome]:
    def pick(r: Replays, asked: float) -> Outcome:
        rec = recommend_choice(r, asked, rule)
        assert rec.unseen is not None
        return Outcome(rec.label(), rec.unseen)

    pick.rule = rule  # type: ignore[attr-defined]
    return pick


def _as_asked(r: Replays, asked: float) -> Outcome:
    """`protection: P` as asked, whatever the seen days said."""
    rec = recommend_choice(r, asked)
    assert rec.product_unseen is not None
    return Outcome(f"protection: {100 * asked:g}%", rec.product_unseen)


def _fixed(r: Replays, asked: float) -> Outcome:
    """Fixed headroom sized on the seen days (the N the rule sizes), whatever the forecast did
    there."""
    rec = recommend_choice(r, asked)
    assert rec.replicas is not None
    res, starts = r.result, r.replayed.starts
    unseen = span(res, r.replayed, starts[len(starts) // 2], res.pods.size)
    return Outcome(f"fixed N={rec.replicas}", unseen.judge(r.replayed.static_runs[rec.replicas]))


VARIANTS: dict[str, Callable[[Replays, float], Outcome]] = {
    "current": _rule(ChoiceRule()),
    "missed by <= 2 pts counts as kept": _rule(ChoiceRule(tolerance=0.02)),
    "missed by <= 1 pt counts as kept": _rule(ChoiceRule(tolerance=0.01)),
    "the level asked or fixed": _rule(ChoiceRule(lower_levels=False)),
    "the level asked (<= 2 pts) or fixed": _rule(ChoiceRule(tolerance=0.02, lower_levels=False)),
    "no margin (1.00)": _rule(ChoiceRule(margin=1.0)),
    "too few events: fixed N": _rule(ChoiceRule(few_events_fixed=True)),
    "too few events: fixed N; missed by <= 2 pts kept": _rule(
        ChoiceRule(few_events_fixed=True, tolerance=0.02)
    ),
    "always protection: P": _as_asked,
    "always fixed N": _fixed,
}
"""The current rule first (issue 44's: `ChoiceRule()`); every variant reads the same `Replays`."""


def _load(path: Path, args: argparse.Namespace) -> BacktestResult:
    """The series' replay: from the cache when it holds one, else replayed (and cached)."""
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


def _cell(o: Outcome, asked: float) -> str:
    ratio = o.unseen.over_static
    marks = ("✓" if o.kept_ok(asked) else "✗") + ("✓" if o.cost_ok() else "✗")
    return (
        f"{o.label}: {100 * o.unseen.kept:.1f}% for {o.unseen.per_day:,.1f}, "
        f"{'-' if ratio is None else f'{ratio:.2f}'}x {marks}"
    )


def _short(o: Outcome, asked: float) -> str:
    """`p80 83.1% 0.33x ✗✓` (a protection level) or `N=101 84.4% 1.00x ✗✓` (fixed N)."""
    label = o.label.replace("protection: ", "p").replace("%", "").replace("fixed ", "")
    ratio = o.unseen.over_static
    marks = ("✓" if o.kept_ok(asked) else "✗") + ("✓" if o.cost_ok() else "✗")
    return f"{label} {100 * o.unseen.kept:.1f}% {'-' if ratio is None else f'{ratio:.2f}'}x {marks}"


def markdown(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (for docs/promise.md)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def verdict(table: dict[tuple[str, float], dict[str, Outcome]]) -> list[list[str]]:
    """Per variant: rows meeting the kept figure, the cost figure, both, the rows where the
    current rule met a figure the variant breaks, and the series where it met both at every
    protection."""
    out = []
    for name in VARIANTS:
        kept = cost = both = broken = 0
        missed: set[str] = set()
        for (stem, asked), row in table.items():
            o, now = row[name], row["current"]
            kept += o.kept_ok(asked)
            cost += o.cost_ok()
            both += o.kept_ok(asked) and o.cost_ok()
            if not (o.kept_ok(asked) and o.cost_ok()):
                missed.add(stem)
            broken += (now.kept_ok(asked) and not o.kept_ok(asked)) or (
                now.cost_ok() and not o.cost_ok()
            )
        series = len({stem for stem, _ in table} - missed)
        out.append([name, str(kept), str(cost), str(both), str(broken), str(series)])
    return out


def adopted(summary: list[list[str]]) -> str:
    """The variant meeting both figures on the most rows, above the current rule's count and
    breaking nothing the current rule meets; else the current rule."""
    now = int(summary[0][3])
    fit = [s for s in summary[1:] if int(s[3]) > now and s[4] == "0"]
    return max(fit, key=lambda s: int(s[3]))[0] if fit else "current"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", nargs="*", help="dataset names (file stems) to run")
    parser.add_argument("--days", type=float, help="replay only the last DAYS of each series")
    parser.add_argument("--protection", type=parse_protections, default=(0.9, 0.95))
    parser.add_argument("--cache", type=Path, help="keep (and reuse) each series' replay here")
    parser.add_argument(
        "--markdown", action="store_true", help="print Markdown tables, short cells"
    )
    args = parser.parse_args(argv)
    files = sorted(args.datasets.glob("*.csv"), key=_rank)
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no CSV files in {args.datasets}", file=sys.stderr)
        return 2
    table: dict[tuple[str, float], dict[str, Outcome]] = {}
    for path in files:
        started = time.perf_counter()
        r = replays(_load(path, args), args.protection)
        for p in args.protection:
            table[path.stem, p] = {name: pick(r, p) for name, pick in VARIANTS.items()}
        print(f"done {path.stem} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    cell = _short if args.markdown else _cell
    rows = [
        [stem, f"{100 * p:g}%", *(cell(row[name], p) for name in VARIANTS)]
        for (stem, p), row in table.items()
    ]
    show = (lambda h, r: print(markdown(h, r))) if args.markdown else print_table
    show(["series", "asked", *VARIANTS], rows)
    print()
    summary = verdict(table)
    show(
        [
            "variant",
            "kept >= P - 2",
            "cost <= 1.10x static",
            "both",
            "breaks where current meets",
            "series: both at every P",
        ],
        summary,
    )
    print(f"\nadopted: {adopted(summary)} (of {len(table)} series x protections)")
    same = [n for n, pick in VARIANTS.items() if getattr(pick, "rule", None) == RULE]
    print(f"tune's rule (backtest.choice.RULE) is: {', '.join(same) or 'none of these'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
