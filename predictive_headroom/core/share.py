"""The share component: headroom as a share of what the pool's pods request.

Pure arithmetic on what the caller read (the daemon from the pods on the pool's nodes, `plan`
from `--requests`, the backtest from its app pods x their request): per resource of the pool's
`share:` section, the amount to keep free is the share of the requested amount (or the absolute
amount given); in placeholders, the largest ratio of that amount to the placeholder's request,
rounded up (`core.disruption.in_placeholders`). `combine` takes the larger of it and the other
components.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from predictive_headroom.core.disruption import in_placeholders
from predictive_headroom.policy.share import Share

if TYPE_CHECKING:
    from predictive_headroom.core.context import Context
    from predictive_headroom.core.settings import PlanSettings
    from predictive_headroom.policy.config import Pool


@dataclass(frozen=True)
class SharePart:
    """The share component at one instant: `replicas` placeholders, the `requested` amounts it
    was sized from and the amounts it keeps free (`wanted`)."""

    replicas: int
    requested: Mapping[str, float] = field(default_factory=dict)
    wanted: Mapping[str, float] = field(default_factory=dict)

    def to_details(self) -> dict[str, Any]:
        """The plan's details about this component."""
        return {
            "share_requested": {k: round(v, 6) for k, v in self.requested.items()},
            "share_wanted": {k: round(v, 6) for k, v in self.wanted.items()},
        }

    def later(self) -> SharePart:
        """The component after the first instant of a horizon: the same (what runs later is not
        known, so the requests read now stand)."""
        return self


def wanted_amounts(share: Share, requested: Mapping[str, float]) -> dict[str, float]:
    """Per resource of `share`, the amount to keep free: its share of `requested` (0 when nothing
    of it is requested) or the absolute amount given."""
    out = {}
    for name, term in share.terms.items():
        amount = term.amount if term.fraction is None else term.fraction * requested.get(name, 0.0)
        out[name] = max(0.0, amount or 0.0)
    return out


def share_part(
    share: Share, requested: Mapping[str, float], placeholder: Mapping[str, float]
) -> SharePart:
    """The share component sized from the pool's pods' `requested` amounts (cores, bytes, units)
    and the placeholder's request (`Placeholder.amounts`)."""
    wanted = wanted_amounts(share, requested)
    relevant = {name: requested.get(name, 0.0) for name in share.root}
    return SharePart(in_placeholders(wanted, placeholder), relevant, wanted)


def read_share(pool: Pool, _settings: PlanSettings, context: Context) -> SharePart | None:
    """The share component of `pool` from what its pods request at the context's instant; None
    without a `share:` section or when the context does not know the requests."""
    if not pool.share.enabled:
        return None
    requested = context.requests(pool)
    if requested is None:
        return None
    return share_part(pool.share, requested, pool.placeholder.amounts)
