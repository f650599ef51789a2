"""How the forecast's curve is refitted (`--curve-refit daily|warm|weekly`, `replay.walkforward`)
judged on every shared series by the promise's figures (measured, not asserted; issue 57 item 2:
a cadence is adopted only where the protection kept stays within 0.5 point and the overhead
node-hours a day within 2% of `daily`'s on every series).

Usage: python bench/refit_cadence_bench.py [--data CSV ...] [--days 21] [--protection 95%]
                                           [--modes daily,warm,weekly] [--workers N]

For each series (default: every CSV in `../shared/datasets`), writes its last `--days` and a
one-pool policy as `tune_bench.py` does, then runs `predictive-headroom tune -c POLICY --data CSV
--protection P --no-cache -o json --curve-refit MODE` for each mode in a child process (the
replay `tune` makes: refits every day walk-forward, each day's setting and reserve chosen on the
days before it). Prints per series and mode the protection kept and the overhead node-hours a
day at P, their change against `daily`, whether the change holds (<= 0.5 point, <= 2%), the
refits, and the wall seconds of the run (on a shared machine: an upper bound; `warm` runs its
chain of refits one after the other, `weekly` its curve refits first, then the others).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tune_bench import POLICY, write_slice

from predictive_headroom.policy.shares import parse_protection

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
KEPT_POINTS = 0.5
"""The promise's tolerance on the protection kept, in points."""
NODE_HOURS_SHARE = 0.02
"""The promise's tolerance on the overhead node-hours a day, a share of `daily`'s."""


def tune(policy: Path, csv: Path, protection: float, mode: str, workers: int) -> dict:
    """`tune` in a child process without the cache: its promise's figures, refits, wall seconds."""
    argv = [
        sys.executable,
        "-m",
        "predictive_headroom",
        "tune",
        "-c",
        str(policy),
        "--data",
        str(csv),
        "--protection",
        f"{100 * protection:g}%",
        "--no-cache",
        "-q",
        "-o",
        "json",
        "--curve-refit",
        mode,
        "--workers",
        str(workers),
    ]
    env = {**os.environ, "PH_CACHE_DIR": "off"}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise RuntimeError(f"tune --curve-refit {mode} on {csv.name} failed:\n{done.stderr}")
    out = json.loads(done.stdout)
    promise = out["promise"]
    return {
        "kept": 100 * promise["realized_protection"],
        "nh_day": promise["overhead_node_hours_per_day"],
        "refits": out["history"]["refits"],
        "wall": wall,
    }


def verdict(row: dict, base: dict) -> tuple[str, str, bool]:
    """(kept change, node-hours change, holds) of `row` against `base` (`daily`)."""
    dk = row["kept"] - base["kept"]
    if base["nh_day"] is None or row["nh_day"] is None:
        same = base["nh_day"] == row["nh_day"]
        return f"{dk:+.2f}", "same" if same else "n/a", abs(dk) <= KEPT_POINTS and same
    dn = (row["nh_day"] - base["nh_day"]) / base["nh_day"] if base["nh_day"] else math.inf
    holds = abs(dk) <= KEPT_POINTS and abs(dn) <= NODE_HOURS_SHARE
    return f"{dk:+.2f}", f"{100 * dn:+.1f}%", holds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append")
    parser.add_argument("--days", type=float, default=21.0)
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--modes", default="daily,warm,weekly")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    series = args.data or sorted(DATASETS.glob("*.csv"))
    modes = args.modes.split(",")
    print(
        f"tune --protection {100 * args.protection:g}% on the last {args.days:g} days of each series, "
        f"--no-cache, --workers {args.workers}"
    )
    print(
        "| series | curve refit | refits | kept % | node-h/day | kept Δ | node-h Δ | holds | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    holds = {mode: True for mode in modes if mode != "daily"}
    for data in series:
        with tempfile.TemporaryDirectory() as tmp:
            csv, dpr = write_slice(data, args.days, Path(tmp))
            policy = Path(tmp) / "policy.yaml"
            text = POLICY.format(
                protection=100 * args.protection, dpr=dpr, days=math.ceil(args.days)
            )
            policy.write_text(text)
            rows = {mode: tune(policy, csv, args.protection, mode, args.workers) for mode in modes}
        base = rows.get("daily")
        for mode, row in rows.items():
            dk, dn, ok = ("–", "–", True) if base is None or mode == "daily" else verdict(row, base)
            if mode in holds:
                holds[mode] = holds[mode] and ok
            nh = "–" if row["nh_day"] is None else f"{row['nh_day']:.1f}"
            print(
                f"| {data.stem} | {mode} | {row['refits']} | {row['kept']:.2f} | {nh} | {dk} | {dn} | "
                f"{'' if mode == 'daily' else ('yes' if ok else 'NO')} | {row['wall']:.0f} |",
                flush=True,
            )
    for mode, ok in holds.items():
        print(f"{mode}: {'holds on every series' if ok else 'does NOT hold on every series'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
