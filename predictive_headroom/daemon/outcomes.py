"""What a reconcile did: one `PoolOutcome` per pool, gathered in a `ReconcileResult`.

Both are plain values: the daemon logs their `summary()` and serves their `to_dict()` on /last-run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from predictive_headroom.core.planner import Plan, plan_to_dict
from predictive_headroom.core.vocabulary import PoolAction
from predictive_headroom.protocols import TargetCondition


@dataclasses.dataclass
class PoolOutcome:
    """What one reconcile did for one pool."""

    pool: str
    action: PoolAction
    plan: Plan | None = None
    current: int | None = None
    error: str | None = None
    failed_reads: list[str] = dataclasses.field(default_factory=list)
    """Reads that failed while something stood in for them (a node count: the last good one)."""
    target_conditions: tuple[TargetCondition, ...] = ()
    """The target's status conditions as read in this reconcile (a CapacityBuffer's)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.pool,
            "action": self.action,
            "current_replicas": self.current,
        }
        if self.plan is not None:
            out.update({k: v for k, v in plan_to_dict(self.plan).items() if k != "name"})
        if self.target_conditions:
            out["target_conditions"] = [c.to_dict() for c in self.target_conditions]
        if self.error:
            out["error"] = self.error
        if self.failed_reads:
            out["failed_reads"] = list(self.failed_reads)
        return out

    def summary(self) -> str:
        if self.plan is None:
            return f"{self.pool}=? ({self.action}: {self.error})"
        change = (
            f"{self.current}->{self.plan.desired}"
            if self.action in (PoolAction.SCALED, PoolAction.DRY_RUN)
            else self.action
        )
        if self.action in (PoolAction.ERROR, PoolAction.REFUSED):
            change = f"{self.action}: {self.error}"
        return f"{self.pool}={self.plan.desired} ({self.plan.reason}, {change})"


@dataclasses.dataclass
class ReconcileResult:
    """One reconcile over every pool."""

    at: float
    seconds: float
    leader: bool
    dry_run: bool
    pools: list[PoolOutcome]

    @property
    def ok(self) -> bool:
        """True when no pool failed."""
        return all(o.error is None for o in self.pools)

    @property
    def served(self) -> bool:
        """True when at least one pool was served (or there was nothing to serve)."""
        return not self.pools or any(o.error is None for o in self.pools)

    def summary(self) -> str:
        role = ("DRY-RUN " if self.dry_run else "") + ("leader" if self.leader else "follower")
        return f"reconcile ({role}, {self.seconds * 1000:.0f} ms): " + "; ".join(
            o.summary() for o in self.pools
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "seconds": round(self.seconds, 4),
            "ok": self.ok,
            "leader": self.leader,
            "dry_run": self.dry_run,
            "pools": [o.to_dict() for o in self.pools],
            "errors": [o.error for o in self.pools if o.error],
            "failed_reads": [r for o in self.pools for r in o.failed_reads],
        }
