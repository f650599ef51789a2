"""A SIGTERM while the daemon starts ends it at once, with exit 0.

The daemon takes seconds to start on a busy node (importing Prophet and the Kubernetes client,
loading the policy, the first API calls), and a SIGTERM in that time (a rollout replacing a pod
that has just started) killed it with -15 before its own handler existed. The command line calls
`exit_on_stop_until_serving` before it imports anything else when the command is the daemon
(`run` without `--once`); until `commands.run.serve` installs the handler that stops it cleanly, a
SIGTERM or SIGINT ends the process at once with exit 0: nothing has been written yet, and no
thread has started that must be waited for. `run --once` keeps the default (a one-shot run ended midway
did not do what it was asked).

This module imports only the standard library, so the handler exists within a fraction of a
second of the process starting.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any


def is_daemon(argv: Sequence[str]) -> bool:
    """True when `argv` (without the program name) runs the daemon: `run` without `--once`."""
    words = list(argv)
    while words and words[0].startswith("--log-level"):
        words = words[1:] if "=" in words[0] else words[2:]
    return bool(words) and words[0] == "run" and "--once" not in words


def _exit_now(signum: int, _frame: Any) -> None:
    """End the process now, exit 0. Not by raising SystemExit: the handler may run inside a
    callback whose exceptions Python ignores (an import lock's), and the start would go on."""
    name = signal.Signals(signum).name
    print(f"received {name} while starting: exiting before serving", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(0)


Handlers = dict[int, Any]
"""The handlers in place before, by signal, to put back (`restore`)."""


def exit_on_stop_until_serving(argv: Sequence[str]) -> Handlers | None:
    """When `argv` runs the daemon, make SIGTERM and SIGINT exit 0 at once until the daemon
    installs its own handler; the handlers replaced, or None when none was installed (not the
    daemon, or not the main thread, where only one can be installed)."""
    if not is_daemon(argv):
        return None
    try:
        return {s: signal.signal(s, _exit_now) for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread (a test calling the command in a thread)
        return None


def restore(previous: Handlers | None) -> None:
    """Put back the handlers `exit_on_stop_until_serving` replaced (nothing when it did not)."""
    for signum, handler in (previous or {}).items():
        signal.signal(signum, handler)
