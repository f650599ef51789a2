"""How many real samples the implausible-sample screen (`core.screen`) drops, on every series of a
directory of `timestamp,value` CSVs (measured, not asserted).

Usage: python bench/screen_bench.py DIR [--history-days 28] [--fresh-hours 2]

For each series: the screen of the whole file; of every refit's history (a `--history-days`
window ending at each UTC midnight, as the daemon's daily refit reads it); and of every
`--fresh-hours` window a reconcile reads, judged against the bound of the history window before
it (as `app.fit.observe_pool` does). Prints the samples dropped, the windows with any drop, and the most scales above its upper quartile
any refit window's largest (real) sample reached, which `core.screen.FAR` must stay well above.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from predictive_headroom.commands import print_table
from predictive_headroom.core.screen import reach, screen
from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.sources.csvsource import read_csv_history


def windows(
    history: History, days: float, fresh_hours: float
) -> tuple[int, int, int, int, int, float]:
    """(refit windows, with a drop, samples dropped; fresh windows with a drop, samples dropped;
    the most scales above its upper quartile any refit window's largest sample reached)."""
    worst = 0.0
    first = np.ceil(history.start / DAY_SECONDS) * DAY_SECONDS + DAY_SECONDS
    refits = hit = dropped = fresh_hit = fresh_dropped = 0
    for end in np.arange(first, history.end + 1, DAY_SECONDS):
        window = history.until(end).since(end - days * DAY_SECONDS)
        screened = screen(window)
        if (got := reach(window.values[window.values >= 0])) is not None:
            worst = max(worst, (float(window.values.max()) - got[0]) / got[1])
        refits += 1
        hit += bool(screened.count)
        dropped += screened.count
        # every fresh window of the following day, judged against this refit's bound
        for t in np.arange(end, min(end + DAY_SECONDS, history.end), fresh_hours * 3600):
            recent = history.until(t + fresh_hours * 3600).since(t)
            if not len(recent):
                continue
            got = screen(recent, above=screened.above).count
            fresh_hit += bool(got)
            fresh_dropped += got
    return refits, hit, dropped, fresh_hit, fresh_dropped, worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--history-days", type=float, default=28.0)
    parser.add_argument("--fresh-hours", type=float, default=2.0)
    args = parser.parse_args(argv)
    rows = []
    for path in sorted(args.dir.glob("*.csv")):
        history = read_csv_history(path)
        whole = screen(history)
        refits, hit, dropped, fresh_hit, fresh_dropped, worst = windows(
            history, args.history_days, args.fresh_hours
        )
        rows.append(
            [
                path.stem,
                str(len(history)),
                str(whole.count),
                f"{hit}/{refits}",
                str(dropped),
                str(fresh_hit),
                str(fresh_dropped),
                f"{float(history.values.max()) / float(np.median(history.values)):.1f}",
                f"{worst:.1f}",
            ]
        )
    print_table(
        [
            "series",
            "samples",
            "dropped (whole)",
            "refits with a drop",
            "dropped (refits)",
            "fresh windows with a drop",
            "dropped (fresh)",
            "max/median",
            "largest, in scales (FAR)",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
