"""The daemon's refit of one `protection:` pool, its choice included (issue 62): seconds for the
first refit (nothing kept) and for the steady state (the refits of the same day, its fits kept in
the refit cache), and the pools one replica can refit per hour.

Usage: python bench/daemon_refit_bench.py [--data CSV] [--window 28] [--days-before 0]
                                          [--protection 95%] [--every 6h] [--refits 3]

A one-pool policy on the series (its own demand per replica: median about 20 pods, the
`tune_bench.py` policy), the production forecaster (Prophet and the burst models) and a refit
cache in a temporary directory; `app.fit.fit_one` is called as the daemon's refit calls it (tune's
choice on the last `--window` days from the midnight on, then the re-tune and the fit) at the
series' last midnight minus `--days-before` days (the first refit), then `--refits` more times
`--every` apart (the daemon's refit schedule; the same day's cuts, read back from the cache).
Prints each refit's wall and CPU seconds, what the choice held, and the pools per hour: 3600 over
the mean seconds of one day's refits (one first, the rest steady) at the refit cadence asked.
"""

from __future__ import annotations

import argparse
import logging
import math
import tempfile
import time
from pathlib import Path

from stages import cpu_seconds
from tune_bench import DEFAULT_DATA, POLICY, write_slice

from predictive_headroom.app.fit import default_forecaster, fit_one
from predictive_headroom.app.hold import ChoiceOptions
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.series import DAY_SECONDS, iso_utc
from predictive_headroom.policy.durations import parse_duration
from predictive_headroom.policy.load import load_policy
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.refit_cache import CacheSpec
from predictive_headroom.sources.csvsource import CsvSource


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--window", type=float, default=28.0, help="days tune's choice reads")
    parser.add_argument("--days-before", type=float, default=0.0)
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument(
        "--every", type=lambda s: parse_duration(s).total_seconds(), default=6 * 3600.0
    )
    parser.add_argument("--refits", type=int, default=3, help="steady refits after the first")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        csv, dpr = write_slice(args.data, args.window + args.days_before + 2, Path(tmp))
        policy = Path(tmp) / "policy.yaml"
        text = POLICY.format(protection=100 * args.protection, dpr=dpr, days=28)
        policy.write_text(text)
        loaded = load_policy(policy)
        pool = loaded.pools[0]
        source = CsvSource(csv)
        end = source.full().end
        first = math.floor(end / DAY_SECONDS) * DAY_SECONDS - args.days_before * DAY_SECONDS
        first -= args.refits * args.every  # every refit of the day at or before the last sample
        options = ChoiceOptions(args.window * DAY_SECONDS, CacheSpec(Path(tmp) / "cache"))
        forecaster = default_forecaster()
        seconds = []
        for k in range(args.refits + 1):
            at = first + k * args.every
            wall, cpu = time.perf_counter(), cpu_seconds()
            fit = fit_one(
                pool,
                source,
                at,
                forecaster,
                retune_window=14 * DAY_SECONDS,
                price=pool_price(pool, loaded.cost),
                choice=options,
            )
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            seconds.append(wall)
            t = fit.tuning
            held = "-" if t is None else f"{t.choice and t.choice['pasted']}; {t.holding()}"
            kind = "first" if k == 0 else "steady"
            print(f"{kind} refit at {iso_utc(at)}: {wall:.1f} s wall, {cpu:.1f} s CPU; {held}")
            if t is not None and k == 0:
                print(f"  read {t.read}")
    per_day = round(DAY_SECONDS / args.every)
    steady = seconds[1:] or seconds
    mean = (seconds[0] + (per_day - 1) * sum(steady) / len(steady)) / per_day
    hours = args.every / 3600
    print(
        f"{args.data.name}: first {seconds[0]:.1f} s, steady {min(steady):.1f}-{max(steady):.1f} s; "
        f"a day of refits every {hours:g} h (one first, {per_day - 1} steady): {mean:.1f} s a "
        f"refit on average, {3600 / mean:.0f} refits an hour on one replica, so "
        f"{3600 * hours / mean:.0f} pools refitted every {hours:g} h"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
