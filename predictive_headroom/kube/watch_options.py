"""What one list-and-watch cache holds and how it waits: its query, its timings, client-go's
backoff, the words of its modes and reasons, and its status as `/last-run` shows it.

`kube.informer` keeps the caches; this module is what callers configure and read of them
(`WatchQuery`, `WatchOptions`, `CacheStatus`), and the backoff schedule on its own (`Backoff`),
pure and testable without a thread.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class CacheMode(StrEnum):
    """Where reads of a cache come from."""

    STARTING = "starting"
    """The first list has not completed: reads list for themselves."""
    WATCHING = "watching"
    """Listed and watched: reads come from memory."""
    LISTING = "listing"
    """The API server refused the watch (or the list): reads list for themselves."""


class RelistReason(StrEnum):
    """Why a cache listed its query (again)."""

    START = "start"
    GONE = "gone"
    """The watch's resourceVersion was compacted away (410)."""
    UNKNOWN_VERSION = "unknown-version"
    """The API server does not know the watch's resourceVersion (too large, unreadable)."""
    RETRY_WATCH = "retry-watch"
    """The watch was refused earlier; trying it again."""
    FAILED = "failed"
    """The previous list failed."""


class BackoffReason(StrEnum):
    """Why a cache waited before its next request to the API server."""

    LIST_FAILED = "list-failed"
    WATCH_FAILED = "watch-failed"
    """The watch was answered with an error (5xx, 429, ...)."""
    BROKEN = "broken"
    """No answer (connection refused, reset, a timeout), or the stream broke before it was healthy."""
    SHORT = "short"
    """The watch ended at once, having sent nothing."""
    GONE = "gone"
    """The watch's version is gone (410) or unknown: the wait before the re-list."""


@dataclass(frozen=True)
class BackoffTiming:
    """client-go's reflector backoff (`wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)`),
    with the reset after a healthy minute."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    """Each wait is its step plus up to `jitter` times the step, at random."""
    reset_after: float = 60.0
    """Seconds without a wait after which the next wait starts from `initial` again."""


class Backoff:
    """The waits of one cache: `next(now)` is the seconds to wait before the next try.

    Steps grow from `initial` by `factor` up to `cap`; a wait asked for `reset_after` seconds
    after the last one ended starts from `initial` again. `random` is injectable for tests."""

    def __init__(self, timing: BackoffTiming, random: Callable[[], float] = random.random) -> None:
        self.timing, self.random = timing, random
        self._step = timing.initial
        self._ends: float | None = None
        """When the last wait ended (None: no wait yet)."""

    def next(self, now: float) -> float:
        """The next wait at `now` (a pure step of the schedule, then jitter)."""
        t = self.timing
        if self._ends is not None and now - self._ends > t.reset_after:
            self._step = t.initial
        step, self._step = self._step, min(t.cap, self._step * t.factor)
        wait = step + t.jitter * step * self.random()
        self._ends = now + wait
        return wait

    def reset(self) -> None:
        """The cache is healthy again (a list or a watch succeeded): the next wait starts from
        `initial`, as if none had come before."""
        self._step, self._ends = self.timing.initial, None


@dataclass(frozen=True)
class WatchQuery:
    """What one cache holds: a resource, in a namespace ('' = all) with optional selectors."""

    resource: str
    namespace: str = ""
    label_selector: str = ""
    field_selector: str = ""

    def describe(self) -> str:
        """`pods in team-a (labels app=x)`, for logs and /last-run."""
        where = f" in {self.namespace}" if self.namespace else ""
        picks = [f"labels {self.label_selector}"] if self.label_selector else []
        picks += [f"fields {self.field_selector}"] if self.field_selector else []
        return f"{self.resource}{where}" + (f" ({'; '.join(picks)})" if picks else "")

    def scope(self) -> str:
        """Where the `watch` permission is needed, in RBAC words."""
        return (
            f"in namespace {self.namespace} (a Role)"
            if self.namespace
            else "cluster-wide (a ClusterRole)"
        )


@dataclass(frozen=True)
class WatchOptions:
    """Timings of the caches (tests use small values)."""

    page_size: int = 500
    watch_seconds: int = 300
    """The API server ends each watch request after this long; it is resumed from its last
    resourceVersion without a list."""
    quiet_deadline: float = 150.0
    """A watch that sends nothing (no event, no bookmark) for this long is dropped and resumed
    from its last version."""
    retry_watch: float = 600.0
    """Seconds between tries of a refused watch (RBAC may have been updated meanwhile)."""
    backoff: BackoffTiming = BackoffTiming()
    """Waits before each retry after a failed list or watch."""
    healthy_watch: float = 1.0
    """A watch that lasted this long, or sent anything, was healthy: resumed at once when it ends."""
    sync_wait: float = 10.0
    """How long a read waits for a new cache's first list before listing for itself."""

    @property
    def stale_after(self) -> float:
        """A cache that heard nothing from the API server for this long is said `stale` on
        /last-run (its reads still come from memory, as a client-go informer's do)."""
        return 2 * self.quiet_deadline


@dataclass(frozen=True)
class CacheStatus:
    """One cache as /last-run shows it."""

    query: str
    mode: CacheMode
    objects: int
    age_seconds: float | None
    """Seconds since the cache last heard from the API server (event, bookmark or list)."""
    last_relist_seconds_ago: float | None
    last_relist_reason: str | None
    relists: int
    last_error: str | None
    backoff_waits: int = 0
    stale: bool = False
    """Reads are served from memory although the cache heard nothing for `stale_after` seconds (a
    re-list or a watch is being retried): what the last synced list and watch showed."""

    def to_dict(self) -> dict[str, Any]:
        def rounded(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "query": self.query,
            "mode": self.mode,
            "objects": self.objects,
            "age_seconds": rounded(self.age_seconds),
            "last_relist_seconds_ago": rounded(self.last_relist_seconds_ago),
            "last_relist_reason": self.last_relist_reason,
            "relists": self.relists,
            "last_error": self.last_error,
            "backoff_waits": self.backoff_waits,
            "stale": self.stale,
        }
