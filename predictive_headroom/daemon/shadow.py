"""The live N a dry-run daemon reads on each pool's target, kept over time for the shadow
comparison (`replay.shadow`): in dry-run nothing is written, so the target's replicas are the
user's own (their fixed pause pods), whatever they set over the days.

`LiveReplicas` keeps each pool's count at every change (and the first read), only as far back as
the re-tune replays: the last change before that and every one after it. The reconcile records,
the refit reads a copy (they run on different threads).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping

from predictive_headroom.core.price import pool_price
from predictive_headroom.core.spend import adoption_budget
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import Actuator

logger = logging.getLogger(__name__)


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


def read_live(live: LiveReplicas, actuator: Actuator, pools: Collection[Pool], at: float) -> None:
    """The target's replicas of each of `pools` not read yet, recorded in `live` at `at`: the
    dry-run daemon's start-up refit comes before its first reconcile, so this is the shadow's
    first read and the first refit already replays the user's live N beside the plan. A failed
    read is left to the reconcile (which reads it again and reports a failure)."""
    for pool in pools:
        if live.reads(pool.name):
            continue
        try:
            state = actuator.read(pool)
        except Exception as exc:
            logger.info("pool %s: cannot read the live N before the refit: %s", pool.name, exc)
            continue
        live.record(pool.name, at, state.replicas)


def warn_adopted(policy: Policy, current: Mapping[str, int | None], warned: set[str]) -> None:
    """Once per pool (`warned` keeps them): a pool adopting an existing Deployment with no
    budget is told what its live N spends a day and the `budget:` to paste
    (`core.spend.adoption_budget`)."""
    for pool in policy.pools:
        replicas = current.get(pool.name)
        if replicas is None or pool.name in warned:
            continue
        warned.add(pool.name)
        said = adoption_budget(pool, replicas, pool_price(pool, policy.cost))
        if said is not None:
            logger.warning("%s", said)
