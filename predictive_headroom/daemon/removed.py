"""Placeholders of pools that left the policy (removed or renamed while the daemon runs).

A removed pool's placeholder would otherwise hold its capacity with nothing managing it. When a
reload drops a pool, its target is remembered; once the pool's `scaleDownStabilization` has
passed (as for any scale-down), the leader scales it to 0 through /scale, unless the policy says
`removedPools: keep`. It is only touched when it is the daemon's placeholder for that pool: a
Deployment carrying the label `predictive-headroom.io/pool: <pool>` (the chart and the kustomize
bases set it; a CapacityBuffer too), not paused, not the target of a pool still in the policy (a rename). Every outcome
is one log line and counted in `predictive_headroom_removed_pool_placeholders_total{action}`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, get_args

from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.kube.errors import NotFound
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.target import POOL_LABEL, ownership_problem
from predictive_headroom.protocols import Actuator, ActuatorError

logger = logging.getLogger(__name__)

Action = Literal["scaled-to-zero", "kept", "left"]
"""What was done with a removed pool's placeholder (the metric's `action` label)."""


@dataclass
class _Removed:
    pool: Pool
    due: float
    """When (on the monotonic clock) its placeholder may be scaled to 0."""


class RemovedPools:
    """Remembers the pools a reload dropped and retires their placeholders when due."""

    def __init__(self, actuator: Actuator, metrics: Metrics, monotonic: Callable[[], float]):
        self.actuator, self.metrics, self.monotonic = actuator, metrics, monotonic
        self.waiting: dict[str, _Removed] = {}
        for action in get_args(Action):  # each at 0, so rates work from the first scrape
            metrics.removed_pools.labels(action=action)

    def removed(self, old: Policy, new: Policy) -> None:
        """`new` replaced `old`: remember the pools it dropped (or keep them, as it says)."""
        names = {p.name for p in new.pools}
        targets = {_key(p) for p in new.pools}
        for name in list(self.waiting):
            if name in names or _key(self.waiting[name].pool) in targets:
                del self.waiting[name]  # back in the policy, or its target is managed again
        for pool in old.pools:
            if pool.name in names:
                continue
            target = f"{pool.target.kind} {pool.target.namespace}/{pool.target.name}"
            if _key(pool) in targets:
                logger.info(
                    "pool %s left the policy; %s is managed by another pool now", pool.name, target
                )
                continue
            if new.removed_pools == "keep":
                logger.warning(
                    "pool %s left the policy; its placeholder %s is kept as it is and no longer "
                    "managed (removedPools: keep)",
                    pool.name,
                    target,
                )
                self.metrics.removed_pools.labels(action="kept").inc()
                continue
            wait = pool.scale_down_stabilization.total_seconds()
            self.waiting[pool.name] = _Removed(pool, self.monotonic() + wait)
            logger.warning(
                "pool %s left the policy; its placeholder %s will be scaled to 0 in %.0fs (its "
                "scaleDownStabilization; removedPools: keep keeps it)",
                pool.name,
                target,
                wait,
            )

    def retire_due(self, dry_run: bool) -> list[str]:
        """As the leader: scale to 0 the placeholders whose wait is over; the names handled."""
        now, done = self.monotonic(), []
        for name, entry in list(self.waiting.items()):
            if now < entry.due:
                continue
            try:
                action = self._retire(entry.pool, dry_run)
            except ActuatorError as exc:  # tried again at the next reconcile
                logger.warning("pool %s (removed): %s; trying again", name, exc)
                continue
            del self.waiting[name]
            self.metrics.removed_pools.labels(action=action).inc()
            done.append(name)
        return done

    def _retire(self, pool: Pool, dry_run: bool) -> Action:
        target = f"{pool.target.kind} {pool.target.namespace}/{pool.target.name}"
        try:
            state = self.actuator.read(pool)
        except NotFound:
            logger.info("pool %s (removed): %s is gone; nothing to scale", pool.name, target)
            return "left"
        foreign = ownership_problem(pool.target, pool.name, state.pool_label)
        if foreign is not None or state.paused:
            why = "paused" if state.paused else f"no label {POOL_LABEL}={pool.name}"
            logger.warning(
                "pool %s (removed): %s left at %d replicas (%s: not the daemon's placeholder to "
                "scale down)",
                pool.name,
                target,
                state.replicas,
                why,
            )
            return "left"
        if state.replicas > 0 or state.odd:
            self.actuator.scale(pool, 0, "pool-removed", dry_run=dry_run)
        logger.warning(
            "pool %s (removed): %s %s from %s to 0",
            pool.name,
            "DRY-RUN would scale" if dry_run else "scaled",
            target,
            state.odd or state.replicas,
        )
        return "scaled-to-zero"

    def forget(self, names: Collection[str]) -> None:
        for name in names:
            self.waiting.pop(name, None)


def _key(pool: Pool) -> tuple[str, str, str]:
    return (pool.target.kind, pool.target.namespace, pool.target.name)
