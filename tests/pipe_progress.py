"""A pytest plugin for a run whose output goes to a pipe or a file (`make test | tee log`, CI):
a line `[progress] 412/1584 tests done, 3m20s` every `PH_TEST_PROGRESS_SECONDS` (20 by
default), flushed, so the log never goes quiet while a slow test or a worker's fixture runs. In a terminal pytest's own progress shows, and this stays silent.

Loaded by `tests/conftest.py` (or `-p pipe_progress` with tests/ on the path); under xdist only
the controller reports.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any

import pytest

SECONDS = float(os.environ.get("PH_TEST_PROGRESS_SECONDS", "20"))


class _Progress:
    """Counts finished tests and writes a progress line every `every` seconds to `out`, a
    duplicate of the run's stdout descriptor taken before any test captured it: a line written
    while a test runs touches neither the test's capture nor its `sys.stdout` (suspending pytest's
    capture from this thread put pytest's own stream back in place of a test's
    `contextlib.redirect_stdout`, whose output was then lost)."""

    def __init__(self, reporter: Any, out: int, every: float) -> None:
        self.reporter, self.out, self.every = reporter, out, every
        self.total, self.done = 0, 0
        self.began = self.last = time.monotonic()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._beat, name="pipe-progress", daemon=True)

    def _beat(self) -> None:
        while not self.stop.wait(min(1.0, self.every / 4)):
            if time.monotonic() - self.last >= self.every:
                self.say()

    def say(self) -> None:
        """Write the line now, on a line of its own, straight to the pipe."""
        with self.lock:
            took = int(time.monotonic() - self.began)
            of = f"/{self.total}" if self.total else ""
            line = f"[progress] {self.done}{of} tests done, {took // 60}m{took % 60:02d}s\n"
            writer = self.reporter._tw
            if writer.width_of_current_line:  # after a row of dots
                line = "\n" + line
                writer._current_line = ""  # the dots go on below the line
            with contextlib.suppress(OSError):  # a closed pipe: nothing to tell
                os.write(self.out, line.encode())
            self.last = time.monotonic()


_ACTIVE: list[_Progress | None] = [None]
"""The run's progress (None: not a pipe, or an xdist worker)."""


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or sys.stdout.isatty():
        return
    try:
        sys.stdout.flush()
        out = os.dup(sys.stdout.fileno())
    except (
        OSError,
        ValueError,
    ):  # no descriptor (pytest run in-process on a StringIO): stay silent
        return
    _ACTIVE[0] = _Progress(reporter, out, SECONDS)
    _ACTIVE[0].thread.start()


def pytest_collection_finish(session: pytest.Session) -> None:
    if _ACTIVE[0] is not None and session.items:
        _ACTIVE[0].total = len(session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    if _ACTIVE[0] is not None:
        _ACTIVE[0].total = max(_ACTIVE[0].total, len(ids))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    progress = _ACTIVE[0]
    if progress is not None and (
        report.when == "call" or (report.when == "setup" and not report.passed)
    ):
        progress.done += 1


def pytest_unconfigure(config: pytest.Config) -> None:
    progress, _ACTIVE[0] = _ACTIVE[0], None
    if progress is not None:
        progress.stop.set()
        progress.thread.join()
        os.close(progress.out)
