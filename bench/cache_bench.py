"""`tune` with the refit cache (`replay.refit_cache`), three ways on one shared series: a cold
cache, the second run on the same history, and a run after a day appended; each against the same
run without the cache for its printed figures (measured, not asserted; the issue's goals are the
second run at least 10x and a day appended at least 5x faster than the cold run).

Usage: python bench/cache_bench.py [--data CSV] [--protection 95%] [--current 20]
                                   [--skip-uncached]

Writes a one-pool policy (`protection:` as asked, the series' own demand per replica,
`forecast.history` the whole series) and two CSVs (the series without its last day, and the
whole series) to a temporary directory with an empty cache directory (`PH_CACHE_DIR`), and runs
`predictive-headroom tune -c POLICY --data CSV --protection P --current N` as a user would, in a
child process: (1) on the shorter CSV, cold; (2) the same again; (3) on the whole CSV (one day
appended). It prints for each the wall seconds, the seconds to the first line on stderr, and
whether stdout is the same as without the cache (`--no-cache`, the cold run's seconds aside):
(1) and (2) against each other and against an uncached run of the shorter CSV, (3) against an
uncached run of the whole CSV (both skipped with `--skip-uncached`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tune_bench import POLICY

from predictive_headroom.core.series import DAY_SECONDS, History, iso_utc
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.refit_cache import cache_usage
from predictive_headroom.replay.setup import auto_demand_per_replica
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "nab_twitter_fb_5min.csv"
)
SECONDS = re.compile(r"refits, [0-9.]+ s\)")
"""The one figure of tune's text that is a measurement of this run (its wall seconds)."""


def write_csv(history: History, path: Path) -> Path:
    rows = (
        f"{iso_utc(float(t))},{float(v)!r}"
        for t, v in zip(history.times, history.values, strict=True)
    )
    path.write_text("\n".join(["timestamp,value", *rows]) + "\n")
    return path


def tune(argv: list[str], cache: Path | None) -> tuple[float, float, str, str, int]:
    """Run tune in a child process: (wall seconds, seconds to the first stderr line, stdout
    without its seconds, stderr, exit code)."""
    env = {**os.environ, "PH_CACHE_DIR": str(cache) if cache else "off"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "predictive_headroom", "tune", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stderr is not None
    first_line = child.stderr.readline()
    first = time.perf_counter() - started if first_line else math.nan
    out, err = child.communicate()
    wall = time.perf_counter() - started
    return wall, first, SECONDS.sub("refits, – s)", out), first_line + err, child.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--current", default="20")
    parser.add_argument("--skip-uncached", action="store_true")
    args = parser.parse_args(argv)
    history = read_csv_history(str(args.data))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        shorter = write_csv(history.until(history.end - DAY_SECONDS), d / "shorter.csv")
        whole = write_csv(history, d / "whole.csv")
        days = math.ceil((history.end - history.start) / DAY_SECONDS)
        dpr = auto_demand_per_replica(history)
        policy = d / "policy.yaml"
        policy.write_text(POLICY.format(protection=100 * args.protection, dpr=dpr, days=days))
        common = [
            "-c",
            str(policy),
            "--protection",
            f"{100 * args.protection:g}%",
            "--current",
            args.current,
        ]
        cache = d / "refits"
        runs = {
            "cold cache": tune([*common, "--data", str(shorter)], cache),
            "second run, same history": tune([*common, "--data", str(shorter)], cache),
            "a day appended": tune([*common, "--data", str(whole)], cache),
        }
        entries, size = cache_usage(cache)
        plain = {}
        if not args.skip_uncached:
            plain["shorter"] = tune([*common, "--data", str(shorter)], None)
            plain["whole"] = tune([*common, "--data", str(whole)], None)
    cold = runs["cold cache"][0]
    print(
        f"tune on {args.data.name} ({days} days), --protection {100 * args.protection:g}% --current {args.current}"
    )
    for name, (wall, first, out, err, code) in runs.items():
        against = plain.get("whole" if name == "a day appended" else "shorter")
        same = "not compared" if against is None else ("same" if out == against[2] else "DIFFERENT")
        plainly = "" if against is None else f", {against[0] / wall:.1f}x than --no-cache"
        print(
            f"  {name}: {wall:.1f} s wall ({cold / wall:.1f}x faster than cold{plainly}), first "
            f"line after {first:.1f} s, exit {code}, printed figures {same} as without the cache"
        )
        print(f"    first line: {err.splitlines()[0] if err else '-'}")
    if runs["cold cache"][2] != runs["second run, same history"][2]:
        print("  the second run printed DIFFERENT figures from the cold run")
    for name, (wall, *_rest) in plain.items():
        print(f"  without the cache ({name} CSV): {wall:.1f} s wall")
    print(f"  cache after the three runs: {entries} refits, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
