"""The limits cap: the placeholders' total requests stay within the pool's `limits:`.

Pure arithmetic on the pool's own fields: per resource of `limits:`, the placeholders that fit
are the floor of the limit over the placeholder's request; the cap is the smallest over the
resources, and names the resource that sets it. `combine` limits the plan to it, after the
floors and the reserve, as it does to maxReplicas (`core.components`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.policy.limits import fitting


@dataclass(frozen=True)
class LimitsPart:
    """The limits cap: `replicas` placeholders fit within every limit; `by` is the resource
    that allows the fewest, and `fit` how many each resource allows."""

    replicas: int
    by: str
    fit: Mapping[str, int] = field(default_factory=dict)

    def to_details(self) -> dict[str, Any]:
        """The plan's details about this cap: how many placeholders each limit allows."""
        return {"limits_fit": dict(self.fit), "limits_by": self.by}

    def later(self) -> LimitsPart:
        """The same cap at every instant (the pool's own fields)."""
        return self


def limits_part(limits: Mapping[str, float], request: Mapping[str, float]) -> LimitsPart | None:
    """The cap `limits` sets on placeholders requesting `request` (None when no limit applies)."""
    fit = fitting(limits, request)
    if not fit:
        return None
    by = min(fit, key=lambda name: fit[name])
    return LimitsPart(fit[by], by, fit)
