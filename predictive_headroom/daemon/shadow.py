"""The live N a dry-run daemon reads on each pool's target, kept over time for the shadow
comparison (`replay.shadow`): in dry-run nothing is written, so the target's replicas are the
user's own (their fixed pause pods), whatever they set over the days.

`LiveReplicas` keeps each pool's count at every change (and the first read), only as far back as
the re-tune replays: the last change before that and every one after it. The reconcile records,
the refit reads a copy (they run on different threads).
"""

from __future__ import annotations

import threading
from collections.abc import Collection


class LiveReplicas:
    """Per pool, (instant, replicas) at the first read and at each change, ascending."""

    def __init__(self, keep_seconds: float) -> None:
        self.keep_seconds = keep_seconds
        """How far back the reads are kept (the re-tune's window)."""
        self._reads: dict[str, list[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def record(self, pool: str, at: float, replicas: int) -> None:
        """The target of `pool` had `replicas` at `at` (POSIX seconds, not before the last read)."""
        with self._lock:
            reads = self._reads.setdefault(pool, [])
            if reads and reads[-1][1] == replicas:
                return
            reads.append((at, replicas))
            cutoff = at - self.keep_seconds
            # keep the last change at or before the cutoff: it was in force from there on
            while len(reads) > 1 and reads[1][0] <= cutoff:
                reads.pop(0)

    def reads(self, pool: str) -> tuple[tuple[float, int], ...]:
        """The reads kept for `pool` (empty: none)."""
        with self._lock:
            return tuple(self._reads.get(pool, ()))

    def forget(self, pools: Collection[str]) -> None:
        """Drop the reads of `pools` (removed from the config, or no longer in dry-run)."""
        with self._lock:
            for name in pools:
                self._reads.pop(name, None)
