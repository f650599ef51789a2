"""The quota cap: the placeholders the namespace's ResourceQuotas leave room for.

Pure arithmetic on what the caller read (the daemon from a watch of the namespace's
ResourceQuotas and of the pool's own placeholder pods, `plan` from `--quota-room`): per quota that
applies to the placeholder pods (its `scopes` and `scopeSelector` matched against a placeholder:
it requests something, so it is not BestEffort; it has no activeDeadlineSeconds, so it is
NotTerminating; its PriorityClass) and per resource the quota limits that a placeholder uses
(`pods`, `count/pods`, `requests.<r>` or `<r>`, `limits.<r>`), the room left is `hard - used`
plus what the pool's own placeholders already use (they are counted in `used`); the cap is the
smallest count of placeholders that room holds, naming the quota and the resource, as a
CapacityBuffer's `LimitedByQuotas` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from predictive_headroom.core.context import QuotaRoom, QuotaSeen
from predictive_headroom.policy.units import parse_quantity

if TYPE_CHECKING:
    from predictive_headroom.core.context import Context
    from predictive_headroom.core.settings import PlanSettings
    from predictive_headroom.policy.config import Pool

COUNTS = frozenset({"pods", "count/pods"})
"""Quota keys counting pods."""
UNSCOPED = frozenset({"cpu", "memory", "ephemeral-storage"})
"""Quota keys that are requests without the `requests.` prefix."""


@dataclass(frozen=True)
class QuotaPart:
    """The quota cap at one instant: `replicas` placeholders fit the room every applying quota
    leaves; `by` names the quota and resource allowing the fewest, `fit` what each allows."""

    replicas: int
    by: str
    fit: Mapping[str, int] = field(default_factory=dict)

    def to_details(self) -> dict[str, Any]:
        """The plan's details about this cap: how many placeholders each quota's resource
        allows, and which sets it (`quota_by`, e.g. `compute: requests.cpu`)."""
        return {"quota_fit": dict(self.fit), "quota_by": self.by}

    def later(self) -> QuotaPart:
        """The same cap after the first instant (what the quotas leave later is not known)."""
        return self


def _scope_holds(scope: str, operator: str, values: tuple[str, ...], pod: _Pod) -> bool:
    if scope == "PriorityClass":
        if pod.priority_class is None:
            return False
        if operator == "In":
            return pod.priority_class in values
        if operator == "NotIn":
            return pod.priority_class not in values
        return operator == "Exists"
    held = {
        "BestEffort": pod.best_effort,
        "NotBestEffort": not pod.best_effort,
        "Terminating": False,
        "NotTerminating": True,
        "CrossNamespacePodAffinity": False,
    }.get(scope, False)
    return held if operator != "DoesNotExist" else not held


@dataclass(frozen=True)
class _Pod:
    best_effort: bool
    priority_class: str | None


def applies(quota: QuotaSeen, priority_class: str | None, best_effort: bool = False) -> bool:
    """Whether `quota` counts a placeholder pod of `priority_class` (every scope and every
    scopeSelector expression must match; an unknown PriorityClass matches none)."""
    pod = _Pod(best_effort, priority_class)
    plain = all(_scope_holds(s, "Exists", (), pod) for s in quota.scopes)
    return plain and all(_scope_holds(s, op, v, pod) for s, op, v in quota.selector)


def per_pod(key: str, request: Mapping[str, float], limits: Mapping[str, float]) -> float:
    """What one placeholder uses of quota key `key` (0: the key is not about what it uses)."""
    if key in COUNTS:
        return 1.0
    if key.startswith("limits."):
        return limits.get(key.removeprefix("limits."), 0.0)
    if key.startswith("requests."):
        return request.get(key.removeprefix("requests."), 0.0)
    return request.get(key, 0.0) if key in UNSCOPED else 0.0


def quota_part(
    room: QuotaRoom, request: Mapping[str, float], limits: Mapping[str, float] | None = None
) -> QuotaPart | None:
    """The cap `room` sets on placeholders requesting `request` (and limited at `limits`; None:
    at their requests); None when no quota applies to them."""
    limits = request if limits is None else limits
    best_effort = not request and not limits
    fit: dict[str, int] = {}
    for quota in room.quotas:
        if not applies(quota, room.priority_class, best_effort):
            continue
        for key, hard in quota.hard.items():
            each = per_pod(key, request, limits)
            if each <= 0:
                continue
            left = hard - quota.used.get(key, 0.0) + room.own * each
            fit[f"{quota.name}: {key}"] = max(0, math.floor(left / each + 1e-9))
    if not fit:
        return None
    by = min(fit, key=lambda name: fit[name])
    return QuotaPart(fit[by], by, fit)


def placeholder_limits(pool: Pool) -> dict[str, float]:
    """The placeholder's limits as amounts: those the chart renders, else its requests."""
    given = {k: float(parse_quantity(v)) for k, v in pool.placeholder.pod_limits().items()}
    return {**pool.placeholder.amounts, **given}


def read_quota(pool: Pool, settings: PlanSettings, context: Context) -> QuotaPart | None:
    """The quota cap of a Deployment `pool` now (None: not a Deployment target, or the room is
    not known)."""
    if pool.target.kind != "Deployment":
        return None
    room = context.quotas(pool)
    if room is None:
        return None
    return quota_part(room, pool.placeholder.amounts, placeholder_limits(pool))
