"""The daemon's reader of each registered component (`core.components.REGISTRY`), in one place.

A `ComponentWatch` reads what its component needs at each reconcile and keeps what `/last-run`
and the report show; `watches` builds one per registered name, and the reconcile, the report
hook and `/last-run` iterate them (`parts_of`, `last_parts`, `status`) instead of naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from predictive_headroom.core.components import Part
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import Component
from predictive_headroom.daemon.disruption import DisruptionSettings, DisruptionWatch
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.share import ShareWatch
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import NodePodReader


class ComponentWatch(Protocol):
    """What reads one component's inputs in the daemon."""

    def begin(self, deadline: float) -> None:
        """A new reconcile, to be done by `deadline` (monotonic)."""
        ...

    def part(self, pool: Pool, at: float, settings: PlanSettings) -> Part | None:
        """The component of `pool` at `at`; None: left out of the plan (off, or unreadable)."""
        ...

    def parts(self) -> Mapping[str, Part]:
        """The last part of each pool, by pool name."""
        ...

    def status(self) -> dict[str, Any]:
        """Per pool, what `/last-run` shows."""
        ...

    def forget(self, names: Collection[str]) -> None:
        """Drop what was kept of removed pools."""
        ...


Watches = dict[str, ComponentWatch]


def watches(
    inputs: Inputs,
    pods: NodePodReader | None,
    metrics: Metrics,
    read_pods: bool,
    monotonic: Callable[[], float],
) -> Watches:
    """One watch per registered component, by name (a test checks every one has a watch)."""
    disruption = DisruptionWatch(
        inputs, pods, metrics, DisruptionSettings(read_pods=read_pods), monotonic
    )
    return {
        str(Component.DISRUPTION): disruption,
        str(Component.SHARE): ShareWatch(inputs, disruption),
    }


def parts_of(watches: Watches, pool: Pool, at: float, settings: PlanSettings) -> dict[str, Part]:
    """Each component of `pool` now that could be had, by name."""
    found = {name: w.part(pool, at, settings) for name, w in watches.items()}
    return {name: part for name, part in found.items() if part is not None}


def last_parts(watches: Watches) -> dict[str, dict[str, Part]]:
    """Each pool's last parts, by pool then component name (for the report)."""
    out: dict[str, dict[str, Part]] = {}
    for name, watch in watches.items():
        for pool, part in watch.parts().items():
            out.setdefault(pool, {})[name] = part
    return out
