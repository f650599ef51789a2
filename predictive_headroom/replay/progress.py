"""The refits' progress on stderr: a bar on a terminal (tqdm, with the time left), else a line
every `every` seconds (a pipe, a CI log), so a long replay is never silent."""

from __future__ import annotations

import sys
import threading
import time
from datetime import timedelta
from typing import Any, TextIO

from tqdm import tqdm

from predictive_headroom.core.series import History, iso_utc
from predictive_headroom.core.vocabulary import CurveRefit
from predictive_headroom.policy.durations import format_duration

PIPE_LINE_SECONDS = 10.0
"""Without a terminal, a progress line this often."""


def _duration(seconds: float) -> str:
    return format_duration(timedelta(seconds=max(1, round(seconds))))


class RefitProgress:
    """Refits done of `total`: on a terminal a tqdm bar, else (when `enabled`) a line every
    `every` seconds on `stream` saying how many are done and about how long is left. `close`
    ends it (the line thread included)."""

    def __init__(
        self,
        total: int,
        enabled: bool,
        every: float = PIPE_LINE_SECONDS,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.done, self.every = total, 0, every
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        tty = enabled and self.stream.isatty()
        self.bar: Any = tqdm(
            total=total, desc="refits", unit="fit", file=self.stream, disable=not tty
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if enabled and not tty and total > 0:
            self._thread = threading.Thread(target=self._lines, name="refit-progress", daemon=True)
            self._thread.start()

    def tick(self) -> None:
        """One refit done."""
        self.done += 1
        self.bar.update(1)

    def line(self) -> str:
        """`refits: 12/41 done, 1m elapsed, about 2m left` (no estimate before the first)."""
        elapsed = time.monotonic() - self.started
        done, total = self.done, self.total
        left = ""
        if 0 < done < total:
            left = f", about {_duration(elapsed / done * (total - done))} left"
        return f"refits: {done}/{total} done, {_duration(elapsed)} elapsed{left}"

    def _lines(self) -> None:
        while not self._stop.wait(self.every):
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the bar or the lines; a last line when lines were printed."""
        self.bar.close()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            print(self.line(), file=self.stream, flush=True)


def say_plan(
    history: History,
    pool: str,
    refits: int,
    held: tuple[int, int, int],
    workers: int,
    curve: CurveRefit = CurveRefit.DAILY,
) -> None:
    """The replay's first line, for pool `pool`: what was read and what the replay will do
    (`held`: the refits read whole from the cache, those read and swept at quantiles they
    lack, and how many quantiles; and how the curve is refitted, when not afresh at every
    refit)."""
    span = (history.end - history.start) / 86400 if len(history) else 0.0
    read = (
        f"{len(history):,} samples {iso_utc(history.start)} .. {iso_utc(history.end)} "
        f"({span:.1f} days)"
        if len(history)
        else "no samples"
    )
    whole, extended, new = held
    cached = f", {whole + extended} of them in the cache" if whole + extended else ""
    if extended:
        cached += (
            f" ({extended} to read again for burst models at {new} more "
            f"quantile{'s' if new > 1 else ''})"
        )
    fits = refits - whole - extended
    runs = fits + extended
    where = f" in {min(workers, runs)} worker processes" if runs > 1 and workers > 1 else ""
    if curve is not CurveRefit.DAILY:
        where += f" (--curve-refit {curve}: not the daemon's way, see docs/forecast.md)"
    print(
        f"pool {pool}: read {read}; {refits} refits{cached}, {fits} to fit{where}",
        file=sys.stderr,
        flush=True,
    )
