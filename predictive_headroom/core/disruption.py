"""The disruption component: room for the pods of nodes on their way out, and the spot reserve.

Pure arithmetic on what the caller read (the daemon from the API, the backtest from its simulated
cluster):

- a node is leaving when cordoned or tainted with one of the pool's removal taint keys
  (`leaving_why`);
- the room its pods need, in placeholders: their summed requests divided by the placeholder's,
  the largest ratio over the placeholder's resources, rounded up (`in_placeholders`); without the
  pods, the estimate is the node's allocatable in placeholders, as if it were full (`node_slots`);
- on spot capacity, the reserve for interruptions within the lead time: with interruptions at
  `rate` per node-hour, their number within the lead time over `nodes` nodes is Poisson with mean
  `rate x nodes x lead`; the reserve is its `quantile` (the protection the pool plans with,
  `reserve_quantile`) in nodes, times the placeholders a node holds (`spot_reserve`).

The component's value is room + reserve; `combine` takes the larger of it and the other components.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from predictive_headroom.core.context import Context
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import DisruptionSource

if TYPE_CHECKING:
    from predictive_headroom.policy.config import Pool

CORDONED = "cordoned"


def leaving_why(keys: Iterable[str], unschedulable: bool, removal: Collection[str]) -> str | None:
    """Why a node with taint `keys` is on its way out: the first of them in `removal` (the pool's
    removal taint keys), else `cordoned` when it is unschedulable, else None."""
    for key in keys:
        if key in removal:
            return key
    return CORDONED if unschedulable else None


def in_placeholders(requests: Mapping[str, float], placeholder: Mapping[str, float]) -> int:
    """Placeholders needed to hold `requests`: per resource the placeholder requests (> 0), the
    summed request divided by it, the largest ratio, rounded up (0 for no requests)."""
    ratios = [requests.get(name, 0.0) / size for name, size in placeholder.items() if size > 0]
    return max(0, math.ceil(max(ratios, default=0.0) - 1e-9))


def node_slots(allocatable: Mapping[str, float], placeholder: Mapping[str, float]) -> int:
    """Placeholders that fit in a node's allocatable: the smallest ratio over the placeholder's
    resources, rounded down (0 when a resource it requests is missing)."""
    ratios = [allocatable.get(name, 0.0) / size for name, size in placeholder.items() if size > 0]
    return max(0, math.floor(min(ratios, default=0.0) + 1e-9))


def sum_requests(pods: Iterable[Iterable[tuple[str, float]]]) -> dict[str, float]:
    """The per-resource sum of several pods' requests."""
    total: dict[str, float] = {}
    for requests in pods:
        for name, amount in requests:
            total[name] = total.get(name, 0.0) + amount
    return total


def poisson_quantile(mean: float, quantile: float) -> int:
    """The smallest k with P(N <= k) >= `quantile` for N Poisson with `mean` (0 for mean 0), for
    any mean (scipy's, which holds where `exp(-mean)` underflows, past a mean of about 745)."""
    from scipy.stats import poisson  # lazy: scipy.stats costs a few hundred ms to import

    if mean <= 0:
        return 0
    return int(poisson.ppf(min(quantile, 1 - 1e-12), mean))


def reserve_quantile(settings: PlanSettings) -> float:
    """The quantile of interruptions the spot reserve covers: the protection the pool plans with
    (`PlanSettings.protection`: its `protection:`, or a what-if such as `tune --protection 99%`),
    else its burst quantile (`PlanSettings.quantile`)."""
    if settings.protection is not None:
        return settings.protection.value
    return settings.quantile


def spot_reserve(
    rate_per_node_hour: float, nodes: int, lead: float, slots: int, quantile: float
) -> tuple[int, float]:
    """(placeholders, expected interruptions): the `quantile` of the interruptions among `nodes`
    within the lead time, times `slots` placeholders per node."""
    expected = max(0.0, rate_per_node_hour) * max(0, nodes) * max(0.0, lead) / 3600.0
    return poisson_quantile(expected, quantile) * max(0, slots), expected


@dataclass(frozen=True)
class DisruptionPart:
    """The disruption component at one instant: `room` for the leaving nodes' pods plus the spot
    `reserve`, in placeholders, where the room came from, and what the plan's details show."""

    room: int = 0
    reserve: int = 0
    nodes_leaving: int = 0
    source: DisruptionSource = DisruptionSource.NONE
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def replicas(self) -> int:
        """Room plus reserve, in placeholders."""
        return self.room + self.reserve

    def to_details(self) -> dict[str, Any]:
        """The plan's details about this component."""
        return {
            "nodes_leaving": self.nodes_leaving,
            "disruption_room": self.room,
            "disruption_source": str(self.source),
            "spot_reserve": self.reserve,
            **self.details,
        }

    def later(self) -> DisruptionPart:
        """The component after the first instant of a horizon: the spot reserve alone (when the
        leaving nodes go is not known)."""
        return replace(self, room=0, nodes_leaving=0, details={})


def read_disruption(pool: Pool, settings: PlanSettings, context: Context) -> DisruptionPart | None:
    """The disruption component of `pool` at the context's instant, with the settings it plans
    with (the lead time, the burst quantile): room for the leaving nodes' pods plus, on spot
    capacity with a known rate, the spot reserve; None without a `disruption:` section or when
    the context does not see the pool's nodes."""
    if not pool.disruption.enabled:
        return None
    seen = context.leaving(pool, settings)
    if seen is None:
        return None
    reserve, details = 0, dict(seen.details)
    if seen.spot and seen.rate is not None:
        quantile = reserve_quantile(settings)
        reserve, expected = spot_reserve(
            seen.rate, seen.staying, settings.lead, seen.slots, quantile
        )
        if "spot" in details:  # the shell explains the reserve: say what it expects
            details["expected_interruptions_in_lead_time"] = round(expected, 4)
    return DisruptionPart(seen.room, reserve, seen.nodes, seen.source, details)
