"""`predictive-headroom validate FILE...`: check policy files, naming every problem."""

from __future__ import annotations

import argparse
import sys

from predictive_headroom.policy.load import ConfigError, load_policy

HELP = (
    "check policy files; exit 2 with every problem (field path, line, bad value, what is expected)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="policy YAML file(s)")


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        try:
            policy = load_policy(path)
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            continue
        windows = sum(len(p.schedules) for p in policy.pools)
        forecasts = sum(1 for p in policy.pools if p.forecast and p.forecast.enabled)
        print(
            f"{path}: ok: {len(policy.pools)} pool(s), {windows} schedule window(s), {forecasts} forecast(s)"
        )
    return 2 if failed else 0
