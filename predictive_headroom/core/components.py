"""The seam for a plan's components: what a component hands the planner, where each is
registered, and which one names the plan.

Two kinds (`Kind`): a floor asks for at least so many placeholders (the plan takes the largest:
the schedule windows, the proportional rule, the forecast, disruption, share, minReplicas); a cap
allows at most so many (the plan is limited by the smallest, after the floors and the reserve,
before the scale-down stabilisation, which it also limits: maxReplicas, limits). Each is
registered once,
in `REGISTRY`, with everything it brings: its name (the key in the plan's `components`, the
metric label, and the plan's reason word when it sets or limits the plan), its kind, where its
value comes from (`Feed`: the pool alone, the engine, or the instant's `Context`), the inputs it
reads from the context (`Input`), the pool's config section that turns it on, its glossary entry
and its colour on the pages. Each component at an instant is a `Part`, handed to
`planner.combine` in one mapping by name; the shells iterate the registry. A component read at
each instant brings its own pure `read(pool, settings, context)`; each shell implements each
input once in its `core.context.Context` (`daemon.components.DaemonContext`,
`commands.components.CliContext`, `replay.planner.ReplayContext`), so a shell holds no code of
any component (a test checks).

Precedence, written once: among floors asking for the same number the reason names the first in
`ORDER` (schedule, proportional, forecast, disruption, share, min: `winner`), except that a floor
read at each instant asking for 0 names no plan; among caps allowing the same number, the first in
`ORDER` too (`binding`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from predictive_headroom.core.budget import read_budget
from predictive_headroom.core.context import Context, NotRead
from predictive_headroom.core.disruption import read_disruption
from predictive_headroom.core.limits import limits_part
from predictive_headroom.core.quota import read_quota
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.share import read_share
from predictive_headroom.core.vocabulary import Component, Feed, Input, Kind
from predictive_headroom.policy.config import Pool

ORDER: tuple[Component, ...] = tuple(Component)
"""Among components asking for (or allowing) the same number, the reason names the first."""


class Part(Protocol):
    """One component at one instant, as the planner takes it."""

    @property
    def replicas(self) -> int | None:
        """The placeholders it asks for (a floor) or allows (a cap); None: no value now (it
        neither competes nor limits)."""
        ...

    def to_details(self) -> dict[str, Any]:
        """What the plan's details show of it."""
        ...

    def later(self) -> Part:
        """The component at the instants after the first of a horizon (what is known ahead)."""
        ...


@dataclass(frozen=True)
class Count:
    """A component that is a count and nothing more (minReplicas, maxReplicas, the proportional
    rule), with what the plan's details say of it."""

    replicas: int | None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_details(self) -> dict[str, Any]:
        """The plan's details about this component."""
        return dict(self.details)

    def later(self) -> Count:
        """The same count after the first instant."""
        return self


@dataclass(frozen=True)
class Registration:
    """One component of the plan, with everything it brings (see the module docstring)."""

    name: Component
    """Its key in the plan's `components`, its metric label and its reason word."""
    kind: Kind
    feed: Feed
    section: str | None
    """The `Pool` field (and YAML key) that turns it on (its `enabled`, or being set); None: on
    for every pool, shown in every plan's `components` (None there when it has no value)."""
    glossary: str | None
    """What the component holds, in the words of the pages' glossary (None: the glossary's own
    entry for the word stands)."""
    colour: str
    """Its colour on the pages (the plan's step line and legend)."""
    of_pool: Callable[[Pool], Part | None] | None = None
    """Its part from the pool alone (`Feed.POOL`)."""
    read: Callable[[Pool, PlanSettings, Context], Part | None] | None = None
    """Its part at the context's instant (`Feed.CONTEXT`; None: left out then). Pure; a
    ValueError says why the pool's section cannot be read (each shell says it its way)."""
    inputs: tuple[Input, ...] = ()
    """What `read` reads from the context (each shell gives each input its own way)."""
    node_labels: tuple[str, ...] = ()
    """The node labels its inputs read (e.g. a zone): every node record keeps them
    (`protocols.NodeSeen.labels`, `NODE_LABELS`); the others are dropped at the edge."""

    replayed: bool = True
    """Whether a replay can read it (False: a replay never gives its inputs, so it leaves the
    replay planning at once: the quota cap, read from the cluster or `plan --quota-room`)."""

    @property
    def at_each_instant(self) -> bool:
        """Whether its value is read at each instant (from the `Context`), so not known ahead."""
        return self.feed == Feed.CONTEXT

    def enabled(self, pool: Pool) -> bool:
        """Whether `pool` plans with this component."""
        if self.section is None:
            return True
        value = getattr(pool, self.section)
        return bool(getattr(value, "enabled", value))


REGISTRY: tuple[Registration, ...] = (
    Registration(
        Component.MIN,
        Kind.FLOOR,
        Feed.POOL,
        None,
        None,
        "#64748b",
        lambda pool: Count(pool.min_replicas),
    ),
    Registration(
        Component.MAX,
        Kind.CAP,
        Feed.POOL,
        None,
        None,
        "#dc2626",
        lambda pool: Count(pool.max_replicas),
    ),
    Registration(Component.SCHEDULE, Kind.FLOOR, Feed.ENGINE, None, None, "#7c3aed"),
    Registration(Component.PROPORTIONAL, Kind.FLOOR, Feed.ENGINE, None, None, "#059669"),
    Registration(Component.FORECAST, Kind.FLOOR, Feed.ENGINE, None, None, "#2563eb"),
    Registration(
        Component.DISRUPTION,
        Kind.FLOOR,
        Feed.CONTEXT,
        "disruption",
        "room for the pods of nodes on their way out (cordoned or tainted for removal), plus "
        "the spot reserve for interruptions within the lead time",
        "#db2777",
        read=read_disruption,
        inputs=(Input.LEAVING,),
    ),
    Registration(
        Component.SHARE,
        Kind.FLOOR,
        Feed.CONTEXT,
        "share",
        "a share of what the pool's pods request (e.g. 10% of their CPU), or an absolute "
        "amount, in placeholders",
        "#0891b2",
        read=read_share,
        inputs=(Input.REQUESTS,),
    ),
    Registration(
        Component.LIMITS,
        Kind.CAP,
        Feed.POOL,
        "limits",
        "the most placeholders whose requests fit within the pool's limits: (e.g. cpu: 64), "
        "a cap like maxReplicas",
        "#4d7c0f",
        lambda pool: limits_part(pool.limits.amounts, pool.placeholder.amounts),
    ),
    Registration(
        Component.BUDGET,
        Kind.CAP,
        Feed.CONTEXT,
        "budget",
        "the most overhead node-hours a day the pool's budget: allows: what is left of the day's "
        "budget spread over the rest of the day, in placeholders",
        "#ca8a04",
        read=read_budget,
        inputs=(Input.TIME, Input.PRICE, Input.HELD),
    ),
    Registration(
        Component.QUOTA,
        Kind.CAP,
        Feed.CONTEXT,
        "quota",
        "the most placeholders the room the namespace's ResourceQuotas leave (hard - used, plus "
        "what the placeholders already use) holds, as a CapacityBuffer's LimitedByQuotas",
        "#9333ea",
        read=read_quota,
        inputs=(Input.QUOTAS,),
        replayed=False,
    ),
)
"""Every registered component, in the order the plan's `components` show them."""

READ: tuple[Registration, ...] = tuple(r for r in REGISTRY if r.at_each_instant)
"""The components read at each instant from the `Context`."""

BY_CONTEXT = READ

NODE_LABELS: frozenset[str] = frozenset(k for r in REGISTRY for k in r.node_labels)
"""The node labels some registered component asks for, kept on every node record."""
"""The components read from the `Context` (every shell reads them the same way)."""


def from_context(pool: Pool, settings: PlanSettings, context: Context) -> dict[str, Part]:
    """Each component of `pool` read from `context`, by name (those left out then, for want of
    an input, are not there); a ValueError names the pool and why its section cannot be read."""
    out: dict[str, Part] = {}
    for r in BY_CONTEXT:
        if r.read is not None and r.enabled(pool):
            try:
                part = r.read(pool, settings, context)
            except ValueError as exc:
                raise ValueError(f"pool {pool.name}: {exc}") from None
            except NotRead:
                continue
            if part is not None:
                out[str(r.name)] = part
    return out


_BY_NAME: dict[str, Registration] = {str(r.name): r for r in REGISTRY}


def registration(name: str) -> Registration:
    """The registration of the component called `name` (KeyError when none is)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no component is registered as {name!r}") from None


_SHAPES: dict[int, tuple[Pool, tuple[tuple[str, bool, Part | None], ...]]] = {}
"""Per pool (by identity, the pool kept alive beside it): each component it plans with, whether
a shell reads it, and its part from the pool alone (`in_plan` runs at every planned minute)."""


def _shape(pool: Pool) -> tuple[tuple[str, bool, Part | None], ...]:
    known = _SHAPES.get(id(pool))
    if known is not None and known[0] is pool:
        return known[1]
    shape = tuple(
        (str(r.name), r.at_each_instant, r.of_pool(pool) if r.of_pool else None)
        for r in REGISTRY
        if r.enabled(pool)
    )
    if len(_SHAPES) > 256:
        _SHAPES.clear()
    _SHAPES[id(pool)] = (pool, shape)
    return shape


def in_plan(pool: Pool, parts: Mapping[str, Part] | None) -> dict[str, Part | None]:
    """The components `pool` plans with, by name in `REGISTRY`'s order: those `parts` gives, those
    known from the pool alone, and (as None) the pool's own that have no part now; a component
    the pool turns off, or read by a shell and missing from `parts`, is left out."""
    given = parts or {}
    out: dict[str, Part | None] = {}
    for name, read, own in _shape(pool):
        part = given.get(name, own)
        if part is not None or not read:
            out[name] = part
    return out


def of_kind(present: Mapping[str, Part | None], kind: Kind) -> dict[str, int]:
    """The values of the components of `kind` among `present` that have one, by name."""
    return {
        name: int(part.replicas)
        for name, part in present.items()
        if part is not None and part.replicas is not None and _BY_NAME[name].kind == kind
    }


def by_kind(
    present: Mapping[str, Part | None],
) -> tuple[dict[str, int | None], dict[str, int], dict[str, int]]:
    """(components, floors, caps): each present component's value (None: it has none now), and
    the values of the floors and of the caps that have one, by name."""
    components: dict[str, int | None] = {}
    floors: dict[str, int] = {}
    caps: dict[str, int] = {}
    for name, part in present.items():
        value = None if part is None or part.replicas is None else int(part.replicas)
        components[name] = value
        if value is not None:
            (caps if _BY_NAME[name].kind == Kind.CAP else floors)[name] = value
    return components, floors, caps


def static_binding(pool: Pool) -> tuple[str, int]:
    """(name, value): the smallest of `pool`'s caps known from the pool alone (maxReplicas,
    limits:), the first in `ORDER` among equals."""
    parts = {str(r.name): r.of_pool(pool) for r in REGISTRY if r.kind == Kind.CAP and r.of_pool}
    return binding(
        {n: int(p.replicas) for n, p in parts.items() if p is not None and p.replicas is not None}
    )


def static_cap(pool: Pool) -> int:
    """The smallest of `pool`'s caps known from the pool alone (maxReplicas and the like): what a
    replay that stabilises a whole timeline at once caps it at."""
    return static_binding(pool)[1]


def static_cap_name(pool: Pool) -> str:
    """The words for `static_cap`: `maxReplicas`, or the name of the cap that allows fewer."""
    name = static_binding(pool)[0]
    return "maxReplicas" if name == Component.MAX else name


def read_caps(pool: Pool) -> list[str]:
    """The caps of `pool` read by a shell at each instant (their value is not known ahead)."""
    return [str(r.name) for r in READ if r.kind == Kind.CAP and r.replayed and r.enabled(pool)]


def later(parts: Mapping[str, Part]) -> dict[str, Part]:
    """Each part as it holds after the first instant of a horizon (`Part.later`)."""
    return {name: part.later() for name, part in parts.items()}


def winner(candidates: Mapping[str, int]) -> tuple[str, int]:
    """(name, value): the largest of `candidates` (by component name), the first in `ORDER`
    among equals; but a floor read at each instant (disruption, share) that asks for none saw
    nothing to make room for, so it never names a plan of 0 (the next among equals does, in the
    end minReplicas). `candidates` must not be empty."""
    wanted = max(candidates.values())
    name = next(n for n in ORDER if candidates.get(n) == wanted)
    if wanted == 0 and name in _READ_FLOORS:
        name = next((n for n in ORDER if candidates.get(n) == 0 and n not in _READ_FLOORS), name)
    return name, wanted


_READ_FLOORS = frozenset(r.name for r in REGISTRY if r.kind == Kind.FLOOR and r.at_each_instant)
"""The floors read at each instant: one asking for 0 names no plan (`winner`)."""


def binding(caps: Mapping[str, int]) -> tuple[str, int]:
    """(name, value): the smallest of `caps` (by component name), the first in `ORDER` among
    equals. `caps` must not be empty (every pool has maxReplicas)."""
    if len(caps) == 1:  # maxReplicas alone: most pools, at every planned minute
        return next(iter(caps.items()))
    allowed = min(caps.values())
    return next(n for n in ORDER if caps.get(n) == allowed), allowed
