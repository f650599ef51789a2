"""Is the reconcile loop alive, and how old is its last success: `LoopWatch`, on the monotonic clock.

The wall clock can step back or forward (NTP, a resumed VM); every age here is measured on a
monotonic clock, so a step changes nothing. `/readyz` asks `readiness()`; the leader elector asks
`stuck()` before every renewal, so a replica whose loop is stuck lets the Lease go.

`/readyz` says only ready or not to whoever asks (the probe port is open); `ReadinessLog` logs the
reasons each time readiness changes, and /last-run (authorised callers) carries them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class ReadinessLog:
    """Logs readiness with its reason when it changes: the first answer, and every change from
    ready to not ready (a warning) or back."""

    def __init__(self) -> None:
        self._last: bool | None = None
        self._lock = threading.Lock()

    def note(self, ready: bool, why: str) -> None:
        with self._lock:
            first, changed, self._last = self._last is None, ready is not self._last, ready
        if changed:
            level = logging.INFO if ready or first else logging.WARNING
            logger.log(level, "%s: %s", "ready" if ready else "not ready", why)


class LoopWatch:
    """Records when reconciles start and end (on `monotonic`) and judges them against `interval`.

    Stuck: a reconcile running for more than 3 intervals, or none started for 3 intervals.
    Not ready (when leader): no reconcile served pools within 3 intervals, or an age below zero.
    """

    def __init__(self, monotonic: Callable[[], float], interval: float) -> None:
        self.monotonic, self.interval = monotonic, interval
        self._created = monotonic()
        self._running_since: float | None = None
        """When the reconcile in progress started (None between reconciles)."""
        self._last_started: float | None = None
        self._success: float | None = None
        """When the last reconcile that served pools ended."""

    @property
    def limit(self) -> float:
        return 3 * self.interval

    def started(self) -> None:
        self._running_since = self._last_started = self.monotonic()

    def ended(self, served: bool) -> None:
        self._running_since = None
        if served:
            self._success = self.monotonic()

    def stuck(self) -> str | None:
        """None while the loop runs; else why it is stuck."""
        now, running = self.monotonic(), self._running_since
        if running is not None and now - running > self.limit:
            return (
                f"a reconcile has been running for {now - running:.0f}s (limit {self.limit:.0f}s)"
            )
        last = self._last_started if self._last_started is not None else self._created
        if running is None and now - last > self.limit:
            return f"no reconcile started for {now - last:.0f}s (limit {self.limit:.0f}s)"
        return None

    def readiness(self, leader: bool) -> tuple[bool, str]:
        """(ready, why): a follower is ready; a leader needs a reconcile that served pools lately."""
        if not leader:
            return True, "config loaded; follower (not leader)"
        if self._success is None:
            return False, "leader, but no reconcile has succeeded yet"
        age = self.monotonic() - self._success
        if age < 0 or age > self.limit:
            return (
                False,
                f"leader, but the last successful reconcile was {age:.0f}s ago "
                f"(limit {self.limit:.0f}s)",
            )
        return True, f"config loaded; leader; last successful reconcile {age:.0f}s ago"
