"""Shared helpers for the sub-commands: time arguments, output, errors.

Every command imports this module, `validate` too, which needs none of the sources, numpy or the
HTTP libraries: those are imported by the helpers that use them (`source_from_args`,
`csv_options`, `iso`), so a command starts with only what it runs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from predictive_headroom.core import strict_json
from predictive_headroom.core.price import NodeShape, Price, price_node_hour
from predictive_headroom.kube.quantity import amount
from predictive_headroom.policy.durations import parse_duration
from predictive_headroom.policy.load import ConfigError, load_policy
from predictive_headroom.policy.shares import parse_share
from predictive_headroom.policy.units import cores_problem, parse_quantity, unit_problem

if TYPE_CHECKING:
    from predictive_headroom.policy.config import Policy
    from predictive_headroom.policy.settings import Settings
    from predictive_headroom.protocols import Source
    from predictive_headroom.sources.csvsource import CsvOptions

if TYPE_CHECKING:
    from predictive_headroom.app.hold import ChoiceOptions


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


def iso(seconds: float) -> str:
    """ISO-8601 UTC text for POSIX seconds (`core.series.iso_utc`)."""
    from predictive_headroom.core.series import iso_utc

    return iso_utc(seconds)


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


def add_csv_arguments(parser: argparse.ArgumentParser) -> None:
    """The bounds of a `--data` CSV: `--max-csv-rows`, `--max-csv-bytes` and `--max-csv-line`."""
    from predictive_headroom.sources.csvsource import CsvOptions

    defaults = CsvOptions()
    parser.add_argument(
        "--max-csv-rows",
        type=_count_arg,
        default=defaults.max_rows,
        metavar="N",
        help=f"refuse a --data CSV of more data rows (default {defaults.max_rows:,}; "
        "16 bytes of memory a row)",
    )
    parser.add_argument(
        "--max-csv-bytes",
        type=_bytes_arg,
        default=defaults.max_bytes,
        metavar="SIZE",
        help="refuse a larger --data CSV before reading it (default 1Gi; 500Mi, 2Gi, or bytes)",
    )
    parser.add_argument(
        "--max-csv-line",
        type=_bytes_arg,
        default=defaults.max_line,
        metavar="SIZE",
        help="refuse a --data CSV at a line longer than this many characters (default 1Mi)",
    )


def csv_options(args: argparse.Namespace) -> CsvOptions:
    """The CSV bounds given on the command line, with a progress bar on stderr for long reads."""
    from predictive_headroom.sources.csvsource import CsvOptions

    return CsvOptions(
        max_rows=args.max_csv_rows,
        max_bytes=args.max_csv_bytes,
        max_line=args.max_csv_line,
        progress=sys.stderr,
    )


def _count_arg(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _bytes_arg(text: str) -> int:
    try:
        value = amount("--max-csv-bytes", text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; e.g. 500Mi, 2Gi or 1073741824") from None
    if not math.isfinite(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a size of at least 1 byte")
    return int(value)


def load_config(path: str) -> Policy:
    """Load a policy file, turning every problem into one CommandError."""
    try:
        return load_policy(path)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def source_from_args(
    data: str | None,
    prometheus_url: str | None,
    settings: Settings | None = None,
    csv: CsvOptions | None = None,
) -> Source:
    """A CSV source for `data` (read with `csv`), else a Prometheus source for `prometheus_url`
    (or PH_PROMETHEUS_URL)."""
    from predictive_headroom.policy.settings import Settings
    from predictive_headroom.sources.csvsource import CsvSource
    from predictive_headroom.sources.prometheus import from_settings

    settings = settings or Settings()
    if data:
        return CsvSource(data, csv)
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


def daemon_retune_window(settings: Settings | None = None) -> float:
    """The recent history the daemon re-tunes a `protection:` pool on (`PH_RETUNE_WINDOW`,
    14 days by default): the review commands run the same re-tune, so they show what it holds."""
    from predictive_headroom.policy.settings import Settings

    return (settings or Settings()).retune_window


def daemon_choice(settings: Settings | None = None) -> ChoiceOptions:
    """How the daemon makes `tune`'s choice at a refit (`app.hold`): the history it reads
    (`PH_CHOICE_WINDOW`, 28 days by default) and the refits it keeps (`PH_CACHE_DIR`, as `tune`
    keeps them; unreadable or `off`: none)."""
    from predictive_headroom.app.hold import ChoiceOptions  # lazy: the backtest's imports
    from predictive_headroom.policy.settings import Settings
    from predictive_headroom.replay.refit_cache import cache_spec  # lazy: the cache's imports

    try:
        cache = cache_spec(os.environ)
    except ValueError:
        cache = None
    return ChoiceOptions((settings or Settings()).choice_window, cache)


def add_price_arguments(parser: argparse.ArgumentParser) -> None:
    """`--node-hour-price`, `--node-cpu`, `--node-memory`: the node's price or shape, over the
    policy's `cost:` (`core.price`: one price for every command and page)."""
    parser.add_argument(
        "--node-hour-price",
        type=float,
        metavar="PRICE",
        help="what one node-hour costs (default: the policy's cost.nodeHourPrice, else the node's "
        "shape at costPerCpuHour and costPerGiBHour)",
    )
    parser.add_argument(
        "--node-cpu",
        type=_node_cores_arg,
        metavar="CORES",
        help="the node's allocatable CPU cores (with --node-memory; `size` shows them): sets the "
        "placeholders a simulated node holds and prices a node-hour",
    )
    parser.add_argument(
        "--node-memory",
        type=_node_memory_arg,
        metavar="QUANTITY",
        help="the node's allocatable memory, e.g. 61Gi (with --node-cpu)",
    )


def _node_cores_arg(text: str) -> float:
    try:
        cores = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of cores") from None
    problem = cores_problem(cores)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return cores


def _node_memory_arg(text: str) -> str:
    problem = unit_problem("memory", text, per_pod=False)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def price_from_args(
    args: argparse.Namespace, placeholder: Any, cost: Any, slots: int | None = None
) -> tuple[Price, NodeShape | None]:
    """The one price (`core.price.price_node_hour`) for placeholders like `placeholder`
    (`policy.placeholder.Placeholder`) from the flags over the policy's `cost:`, and the node
    shape the flags gave (None: none)."""
    price = getattr(args, "node_hour_price", None)
    cpu, memory = getattr(args, "node_cpu", None), getattr(args, "node_memory", None)
    if price is not None and not (price > 0 and math.isfinite(price)):
        raise CommandError(f"--node-hour-price must be a positive number, got {price:g}")
    shape = None
    if (cpu is None) != (memory is None):
        raise CommandError(
            "--node-cpu and --node-memory go together: give the node's shape as both"
        )
    if cpu is not None:
        if not (cpu > 0 and math.isfinite(cpu)):
            raise CommandError(f"--node-cpu must be a positive number of cores, got {cpu:g}")
        try:
            gib = float(parse_quantity(memory)) / 2**30
        except ValueError:
            raise CommandError(
                f"--node-memory {memory!r} is not a Kubernetes quantity such as 61Gi"
            ) from None
        if not (gib > 0 and math.isfinite(gib)):
            raise CommandError(f"--node-memory must be positive, got {memory!r}")
        shape = NodeShape(cpu, gib, "--node-cpu/--node-memory")
    priced = price_node_hour(
        cost,
        placeholder.cpu_cores,
        placeholder.memory_gib,
        shape=shape,
        node_hour_price=price,
        slots=slots,
    )
    return priced, shape


def pool_price_from_args(args: argparse.Namespace | None, pool: Any, cost: Any) -> Price:
    """The price of `pool`'s node-hour (`policy.config.Pool`) with the command's
    `--node-hour-price`, `--node-cpu` and `--node-memory` over the policy's `cost:` (the same
    price `tune` and `backtest` give)."""
    if args is None:
        return price_node_hour(cost, pool.placeholder.cpu_cores, pool.placeholder.memory_gib)
    return price_from_args(args, pool.placeholder, cost)[0]
