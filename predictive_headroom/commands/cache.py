"""`predictive-headroom cache`: the refits `tune` and `backtest` keep across runs
(`replay.refit_cache`): `cache info` says where and how much, `cache clear` empties it."""

from __future__ import annotations

import argparse
import os

from predictive_headroom.commands import CommandError

HELP = "show (info) or empty (clear) the cache of refits that tune and backtest keep across runs"
EXAMPLE = "predictive-headroom cache info\npredictive-headroom cache clear"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=("info", "clear"), help="info: where and how much; clear: empty it"
    )


def _size(n: int) -> str:
    """`1.2 GB`, `340 MB`, `12 kB`."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    from predictive_headroom.replay.cache_store import safe_root
    from predictive_headroom.replay.refit_cache import (  # lazy: joblib
        CACHE_DIR_ENV,
        UnsafeCache,
        cache_spec,
        cache_usage,
        clear_cache,
    )

    try:
        spec = cache_spec(os.environ)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if spec is None:
        print(f"the refit cache is off ({CACHE_DIR_ENV}=off)")
        return 0
    if args.action == "clear":
        try:
            entries, size = clear_cache(spec.location)
        except UnsafeCache as exc:
            raise CommandError(f"refusing to clear {exc.path}: it {exc.why} ({exc.fix})") from None
        except OSError as exc:
            raise CommandError(f"cannot clear {spec.location}: {exc.strerror or exc}") from None
        print(f"cleared {spec.location}: {entries} refits, {_size(size)}")
        return 0
    entries, size = cache_usage(spec.location)
    print(
        f"{spec.location}: {entries} refits, {_size(size)} (bounded at {_size(spec.max_bytes)}, "
        "the least recently used evicted beyond it)"
    )
    if spec.location.exists() or spec.location.is_symlink():
        try:
            safe_root(spec.location)
        except UnsafeCache as exc:
            print(f"refused: {exc.path} {exc.why}; tune and backtest run without it ({exc.fix})")
        except OSError as exc:
            print(f"cannot be used: {exc.strerror or exc}")
    return 0
