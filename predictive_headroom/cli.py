"""The `predictive-headroom` command line: one entry point, one module per sub-command."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import textwrap
from collections.abc import Sequence

# Before any import that takes time: a SIGTERM while the daemon starts exits 0, not -15.
from predictive_headroom.daemon.early_stop import exit_on_stop_until_serving

exit_on_stop_until_serving(sys.argv[1:])

from pydantic import ValidationError  # noqa: E402

from predictive_headroom import __version__  # noqa: E402
from predictive_headroom.commands import CommandError, print_error  # noqa: E402
from predictive_headroom.core.vocabulary import AT_ONCE  # noqa: E402
from predictive_headroom.policy.load import ConfigError  # noqa: E402

# Sub-command modules under predictive_headroom.commands; each has HELP, add_arguments(), run().
COMMANDS = ("run", "validate", "size", "plan", "forecast", "report", "backtest", "tune", "demo")
COMMANDS += ("cache",)  # `cache info|clear`: the refits tune and backtest keep (replay.refit_cache)


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps the description as usual; keeps the example's lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example:"):
            return textwrap.indent(text, indent)
        return super()._fill_text(text, width, indent)


class _HeldWarnings(logging.Handler):
    """A command's log lines: below WARNING (and warnings logged `AT_ONCE`) written as they
    come, WARNING and above held and written after the command's own output, in one block on
    stderr (`write_held`)."""

    FORMAT = "%(levelname)s %(name)s: %(message)s"

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter(self.FORMAT))
        self.held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        if record.levelno < logging.WARNING or getattr(record, AT_ONCE, False):
            print(line, file=sys.stderr, flush=True)
        else:
            self.held.append(line)

    def write_held(self) -> None:
        """Write the held warnings after what the command printed, and stop listening."""
        logging.getLogger().removeHandler(self)
        if not self.held:
            return
        sys.stdout.flush()
        print(f"-- {len(self.held)} warning(s) while it ran:", file=sys.stderr)
        print("\n".join(self.held), file=sys.stderr, flush=True)


def _hold_warnings(level: str) -> _HeldWarnings | None:
    """Log at `level` for one command, its warnings held until its output is out; None (logging
    left alone) when the process has configured logging already, as `logging.basicConfig` does."""
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = _HeldWarnings()
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every sub-command that is installed (`only`: that one alone, so
    a command imports what it needs and not every other command's libraries)."""
    parser = argparse.ArgumentParser(
        prog="predictive-headroom",
        description="Keep warm spare capacity ahead of demand: schedules, cluster size and a forecast "
        "size a placeholder (pause-pod) Deployment.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("PH_LOG_LEVEL", "WARNING"),
        help="log level (default WARNING; env PH_LOG_LEVEL)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (only,) if only in COMMANDS else COMMANDS:
        try:
            module = importlib.import_module(f"predictive_headroom.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"predictive_headroom.commands.{name}":
                raise
            continue
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog="example:\n" + textwrap.indent(module.EXAMPLE, "  "),
            formatter_class=_HelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code (2 for usage and input errors, and
    for a refit whose worker process died twice)."""
    parser = build_parser(_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    held = _hold_warnings(args.log_level) if args.command != "run" else None
    try:
        return _handle(args)
    finally:
        if held is not None:
            held.write_held()


def _command(argv: Sequence[str]) -> str | None:
    """The sub-command `argv` names, when nothing before it asks for the whole parser (help, the
    version, an unknown option); None otherwise."""
    words = list(argv)
    while words and words[0].startswith("--log-level"):
        words = words[1:] if "=" in words[0] else words[2:]
    return words[0] if words and words[0] in COMMANDS else None


# Errors of modules only some commands import (`validate` imports neither): an error of a module
# never imported cannot have been raised, so `_handle` catches those of the modules loaded.
_MODULE_ERRORS = (
    ("predictive_headroom.protocols", "SourceError"),
    ("predictive_headroom.replay.workers", "WorkerDied"),  # a refit worker died twice
)


def _input_errors() -> tuple[type[Exception], ...]:
    """The errors a command raises for bad input (printed, exit code 2): `CommandError`,
    `ConfigError`, and those of `_MODULE_ERRORS` whose module the command imported."""
    loaded = [sys.modules.get(module) for module, _ in _MODULE_ERRORS]
    return (
        CommandError,
        ConfigError,
        *(getattr(m, name) for m, (_, name) in zip(loaded, _MODULE_ERRORS, strict=True) if m),
    )


def _handle(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args) or 0)
    except Exception as exc:
        if isinstance(exc, _input_errors()):
            print_error(str(exc))
        elif isinstance(exc, ValidationError):  # PH_* environment settings
            problems = "; ".join(
                f"PH_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
            )
            print_error(f"bad setting: {problems}".replace("Value error, ", ""))
        else:
            raise
        return 2
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
