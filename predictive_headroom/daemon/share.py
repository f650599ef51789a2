"""The share component in the daemon: what the pods on each pool's nodes request, read once a
reconcile, sized by `core.share`.

The pods come from the disruption watch's list (`DisruptionWatch.pods_now`: one cluster-wide list
a reconcile, shared, waited for until the reconcile's deadline). When they cannot be had (pods are
not read, the list is refused with 403, it timed out with no recent list) the component is left
out of the pool's plan, the other components still plan, and `/last-run` says why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from typing import Any

from predictive_headroom.core.disruption import sum_requests
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.share import SharePart, share_part
from predictive_headroom.daemon.closedloop import pool_node_selector
from predictive_headroom.daemon.disruption import DisruptionWatch
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.policy.config import Pool

logger = logging.getLogger(__name__)


class ShareWatch:
    """The share component of each pool (see the module docstring)."""

    def __init__(self, inputs: Inputs, pods: DisruptionWatch) -> None:
        self.inputs, self.pods = inputs, pods
        self.last: dict[str, SharePart] = {}
        self.why: dict[str, str] = {}
        """Why a pool's component was left out at its last reconcile (or how old its pods are)."""
        self._lock = threading.Lock()
        """Pools are reconciled concurrently; `/last-run` reads from another thread."""

    def begin(self, deadline: float) -> None:
        """A new reconcile: nothing to do (the pod list is the disruption watch's)."""

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> SharePart | None:
        """The share component of `pool` now; None when the pool has no `share:` section or
        what its pods request could not be read (the reason is kept for `/last-run`)."""
        if not pool.share.enabled:
            return None
        try:
            nodes = self.inputs.nodes(pool_node_selector(pool)).nodes
        except Exception as exc:  # counted by Inputs as a cluster error
            return self._left_out(pool.name, f"the pool's nodes could not be listed ({exc})")
        listed, note = self.pods.pods_now()
        if listed is None:
            return self._left_out(pool.name, note or "pods could not be listed")
        on_pool = (p.requests for n in nodes for p in listed.get(n.name, ()) if not p.excluded)
        part = share_part(pool.share, sum_requests(on_pool), pool.placeholder.amounts)
        with self._lock:
            self.last[pool.name] = part
            if note:
                self.why[pool.name] = note
            else:
                self.why.pop(pool.name, None)
        return part

    def _left_out(self, name: str, why: str) -> None:
        with self._lock:
            if self.why.get(name) != why:
                logger.warning("pool %s: the share component is left out: %s", name, why)
            self.why[name] = why
            self.last.pop(name, None)
        return None

    def parts(self) -> dict[str, SharePart]:
        """The last share component of each pool (for the report)."""
        with self._lock:
            return dict(self.last)

    def status(self) -> dict[str, Any]:
        """Per pool, for /last-run: the component's value and what it was sized from, or why it
        was left out."""
        with self._lock:
            last, why = dict(self.last), dict(self.why)
        out: dict[str, Any] = {}
        for name in sorted(set(last) | set(why)):
            part = last.get(name)
            entry: dict[str, Any] = {"replicas": part.replicas if part else None}
            if part is not None:
                entry.update(part.to_details())
            if name in why:
                entry["left_out" if part is None else "note"] = why[name]
            out[name] = entry
        return out

    def forget(self, names: Collection[str]) -> None:
        """Drop what was seen of removed pools."""
        with self._lock:
            for name in names:
                self.last.pop(name, None)
                self.why.pop(name, None)
