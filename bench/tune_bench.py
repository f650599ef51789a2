"""`tune` on the last days of a shared series: seconds for the whole command (measured, not
asserted; the target is <= 90 s on 28 days of 1-minute data).

Usage: python bench/tune_bench.py [--data CSV] [--days 28] [--protection 95%] [--step 1m]
                                  [--demand-per-replica X]

Writes the last `--days` of the series and a one-pool policy (`protection:` as asked, the
series' own demand per replica: median about 20 pods, `forecast.history` as long as the slice)
to a temporary directory, runs `predictive-headroom tune -c POLICY --data CSV -q` in this
process, as a user would, and prints its output, then the wall and CPU seconds it took (Stan's
optimiser, a child process, included).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

from predictive_headroom.cli import main as cli_main
from predictive_headroom.core.series import DAY_SECONDS, iso_utc
from predictive_headroom.policy.shares import parse_protection
from predictive_headroom.replay.setup import auto_demand_per_replica
from predictive_headroom.sources.csvsource import read_csv_history

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "worldcup98_requests_1min.csv"
)
POLICY = """pools:
  - name: web
    target: {{namespace: headroom, name: web-placeholder}}
    maxReplicas: 100000
    leadTime: 5m
    protection: {protection:g}%
    forecast:
      query: demand
      demandPerReplica: {dpr:g}
      history: {days:g}d
"""


def write_slice(data: Path, days: float, into: Path) -> tuple[Path, float]:
    """The last `days` of `data` as a CSV in `into`, and its demand per replica."""
    history = read_csv_history(str(data))
    keep = history.since(history.end - days * DAY_SECONDS + 1.0)
    out = into / f"{data.stem}-last-{days:g}d.csv"
    rows = (
        f"{iso_utc(float(t))},{float(v)!r}" for t, v in zip(keep.times, keep.values, strict=True)
    )
    out.write_text("\n".join(["timestamp,value", *rows]) + "\n")
    return out, auto_demand_per_replica(keep)


def cpu_seconds() -> float:
    """CPU seconds of this process and of the children it waited for (Stan's optimiser runs as
    one)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--days", type=float, default=28.0)
    parser.add_argument("--protection", type=parse_protection, default=0.95)
    parser.add_argument("--demand-per-replica", type=float)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        csv, dpr = write_slice(args.data, args.days, Path(tmp))
        policy = Path(tmp) / "policy.yaml"
        text = POLICY.format(
            protection=100 * args.protection,
            dpr=args.demand_per_replica or dpr,
            days=math.ceil(args.days),
        )
        policy.write_text(text)
        wall, cpu = time.perf_counter(), cpu_seconds()
        code = cli_main(["tune", "-c", str(policy), "--data", str(csv), "-q"])
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    print(
        f"tune on the last {args.days:g} days of {args.data.name}: {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU (exit {code})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
