"""The seam for a plan's components: what a component hands the planner, where each is
registered, and which one names the plan.

The floors (minReplicas, the schedule, the proportional rule) and the forecast are the plan's
own. Every other component is a `Part` computed by its own module from what the caller read
(`core.disruption`, `core.share`) and handed to `planner.combine` in a mapping by name. Each is
registered once, in `REGISTRY`: its name (the plan's reason word, its key in `components`, its
metric label), the pool's config section that turns it on, and its glossary entry. The shells
iterate the registry (`daemon.components` holds what reads each one's inputs).

Precedence, written once (`winner`): the plan takes the largest value; among equal values the
reason names the first in `ORDER`: schedule, proportional, forecast, disruption, share, min.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from predictive_headroom.core.vocabulary import Component
from predictive_headroom.policy.config import Pool

ORDER: tuple[Component, ...] = tuple(Component)
"""Among components asking for the same number, the reason names the first in this order."""


class Part(Protocol):
    """One component at one instant, as the planner takes it."""

    @property
    def replicas(self) -> int:
        """The placeholders it asks for."""
        ...

    def to_details(self) -> dict[str, Any]:
        """What the plan's details show of it."""
        ...

    def later(self) -> Part:
        """The component at the instants after the first of a horizon (what is known ahead)."""
        ...


@dataclass(frozen=True)
class Registration:
    """A component beyond the floors and the forecast."""

    name: Component
    section: str
    """The `Pool` field (and YAML key) that configures it; its `enabled` turns it on."""
    glossary: str
    """What the component holds, in the words of the pages' glossary."""

    def enabled(self, pool: Pool) -> bool:
        """Whether `pool` plans with this component."""
        return bool(getattr(pool, self.section).enabled)


REGISTRY: tuple[Registration, ...] = (
    Registration(
        Component.DISRUPTION,
        "disruption",
        "room for the pods of nodes on their way out (cordoned or tainted for removal), plus "
        "the spot reserve for interruptions within the lead time",
    ),
    Registration(
        Component.SHARE,
        "share",
        "a share of what the pool's pods request (e.g. 10% of their CPU), or an absolute "
        "amount, in placeholders",
    ),
)
"""Every registered component, in `ORDER`."""


def in_plan(pool: Pool, parts: Mapping[str, Part] | None) -> dict[str, Part]:
    """The parts of `parts` that `pool` plans with: registered, turned on by the pool, in `ORDER`
    (a component whose part is missing is left out of the plan)."""
    given = parts or {}
    return {str(r.name): given[r.name] for r in REGISTRY if r.name in given and r.enabled(pool)}


def later(parts: Mapping[str, Part]) -> dict[str, Part]:
    """Each part as it holds after the first instant of a horizon (`Part.later`)."""
    return {name: part.later() for name, part in parts.items()}


def winner(candidates: Mapping[str, int]) -> tuple[str, int]:
    """(name, value): the largest of `candidates` (by component name), the first in `ORDER`
    among equals. `candidates` must not be empty."""
    wanted = max(candidates.values())
    return next(n for n in ORDER if candidates.get(n) == wanted), wanted
