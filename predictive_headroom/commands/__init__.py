"""Shared helpers for the sub-commands: time arguments, output, errors."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from predictive_headroom.core import strict_json
from predictive_headroom.core.series import iso_utc
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.durations import parse_duration
from predictive_headroom.policy.load import ConfigError, load_policy
from predictive_headroom.policy.settings import Settings
from predictive_headroom.policy.shares import parse_share
from predictive_headroom.protocols import Source
from predictive_headroom.sources.csvsource import CsvSource
from predictive_headroom.sources.prometheus import from_settings


class CommandError(Exception):
    """A problem with the user's input; printed to stderr, exit code 2."""


def print_error(message: str) -> None:
    """Print an error for a person on stderr."""
    print(f"predictive-headroom: error: {message}", file=sys.stderr)


def parse_time(text: str) -> float:
    """POSIX seconds for an ISO-8601 time with an offset or `Z` (`now` is the current time)."""
    if text == "now":
        return datetime.now(UTC).timestamp()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--at {text!r} is not an ISO-8601 time; use e.g. 2026-11-20T08:00:00Z or 2026-11-20T09:00:00+01:00"
        ) from None
    if when.tzinfo is None:
        raise CommandError(
            f"--at {text!r} has no UTC offset; add 'Z' or e.g. '+01:00' so the instant is unambiguous"
        )
    return when.timestamp()


iso = iso_utc
"""ISO-8601 UTC text for POSIX seconds (`core.series.iso_utc`)."""


def duration_arg(text: str) -> float:
    """argparse type for durations such as 90s, 10m, 6h, 28d; returns seconds."""
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def share_arg(text: str) -> float:
    """argparse type for shares such as 0.9 or 90%; `90` is refused with the suggestion 90%."""
    try:
        return parse_share(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def load_config(path: str) -> Policy:
    """Load a policy file, turning every problem into one CommandError."""
    try:
        return load_policy(path)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def source_from_args(
    data: str | None, prometheus_url: str | None, settings: Settings | None = None
) -> Source:
    """A CSV source for `data`, else a Prometheus source for `prometheus_url` (or PH_PROMETHEUS_URL)."""
    settings = settings or Settings()
    if data:
        return CsvSource(data)
    source = from_settings(settings, prometheus_url)
    if source is None:
        raise CommandError(
            "no demand history: pass --data CSV or --prometheus-url URL (or set PH_PROMETHEUS_URL)"
        )
    return source


def add_output_argument(parser: argparse.ArgumentParser, default: str = "table") -> None:
    """The shared `--output json|table` option."""
    parser.add_argument(
        "--output",
        "-o",
        choices=("json", "table"),
        default=default,
        help=f"output format (default {default})",
    )


def print_json(data: Any) -> None:
    """Machine-readable output on stdout."""
    sys.stdout.write(strict_json.dumps(data))
    sys.stdout.write("\n")


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    """A plain aligned text table on stdout."""
    cells = [[str(h) for h in headers]] + [
        [("" if c is None else str(c)) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
