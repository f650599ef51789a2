"""What every shell gives a component read at an instant, the same way for each (`Context`: one
method per `core.vocabulary.Input`: the instant, the node's price, what the pool held, what its
pods request, its nodes on their way out, the namespace's ResourceQuotas), and what a pool held,
told plan by plan (`Held`).

A component read from the context (`core.vocabulary.Feed.CONTEXT`) names the inputs it reads and
brings its own pure `read(pool, settings, context)` in its registration (`core.components`); the
daemon (`daemon.components.DaemonContext`), `plan`/`report` (`commands.components.CliContext`) and
the replay (`replay.planner.ReplayContext`) each implement each input once, for every component.
An input a shell cannot give now is None (the component is left out), or `NotRead` saying why.
Pure: no clock reads, no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from predictive_headroom.core.price import Price
from predictive_headroom.core.vocabulary import DisruptionSource
from predictive_headroom.policy.config import Pool

if TYPE_CHECKING:
    from predictive_headroom.core.settings import PlanSettings


@dataclass(frozen=True)
class Leaving:
    """What a shell sees of a pool's nodes on their way out (`Context.leaving`): the room their
    pods need and where it came from, and what the spot reserve is sized from."""

    room: int = 0
    """Placeholders the leaving nodes' pods need."""
    nodes: int = 0
    """Nodes leaving."""
    source: DisruptionSource = DisruptionSource.NONE
    spot: bool = False
    """Whether the pool is on spot capacity (a reserve is kept for interruptions)."""
    rate: float | None = None
    """Interruptions per node-hour the reserve is sized for (None: none known, no reserve)."""
    staying: int = 0
    """Nodes not leaving."""
    slots: int = 0
    """Placeholders a staying node holds."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """What the plan's details show of what was seen (the leaving nodes, the rate's source)."""


@dataclass(frozen=True)
class QuotaSeen:
    """One ResourceQuota as a shell reads it: its name, `status.hard` and `status.used` as
    amounts (cores, bytes, units; `spec.hard` when no status yet), its `scopes` and its
    `scopeSelector` expressions (scope name, operator, values)."""

    name: str
    hard: Mapping[str, float]
    used: Mapping[str, float] = field(default_factory=dict)
    scopes: tuple[str, ...] = ()
    selector: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class QuotaRoom:
    """What a shell gives the quota cap (`Context.quotas`): the namespace's quotas, how many of
    the pool's own placeholder pods they count in `used` now, and the PriorityClass the
    placeholders run at (None: not known, a quota scoped by PriorityClass is not applied)."""

    quotas: tuple[QuotaSeen, ...]
    own: int = 0
    priority_class: str | None = None


class NotRead(Exception):
    """An input the shell cannot give now, with why: the component reading it is left out of the
    plan and the shell says why (the daemon on `/last-run`)."""


class Context(Protocol):
    """What every shell gives a component read at an instant (`Feed.CONTEXT`), the same way for
    each: the daemon from its clock, the policy's `cost:` and its own plans; `plan`/`report` from
    `--at`, the price flags and `--budget-spent`; a replay from its minutes, the node it
    simulates and what it held."""

    @property
    def at(self) -> float:
        """The instant (POSIX seconds)."""
        ...

    def price(self, pool: Pool) -> Price:
        """The node `pool` is priced on: its node-hour's price and the placeholders it holds
        (`core.price`, from the policy's `cost:`)."""
        ...

    def held(self, pool: Pool, since: float) -> float | None:
        """The overhead node-hours `pool`'s placeholders held from `since` until `at` (in the
        node `price` gives); None: not known (a component that needs it is left out)."""
        ...

    def requests(self, pool: Pool) -> Mapping[str, float] | None:
        """What `pool`'s pods request at `at` (cores, bytes, units by resource); None: not
        known."""
        ...

    def leaving(self, pool: Pool, settings: PlanSettings) -> Leaving | None:
        """`pool`'s nodes on their way out at `at` and the spot reserve's inputs (a pod gone from a
        leaving node counts for `settings.lead`); None: the nodes are not seen."""
        ...

    def quotas(self, pool: Pool) -> QuotaRoom | None:
        """The ResourceQuotas of `pool`'s target namespace at `at`, with what its own placeholders
        use of them (`core.quota`); None: not known."""
        ...


class Held:
    """What a pool held, told plan by plan: each count is held from its instant until the next
    one's (the last until the instant asked about); before the first, nothing is counted. Pure:
    no clock, no I/O; O(log n) a question or a record."""

    def __init__(self) -> None:
        self._at: list[float] = []
        self._count: list[int] = []
        self._sum: list[float] = []
        """Placeholder-seconds held from the first record until each record's instant."""

    def _until(self, t: float) -> float:
        k = bisect_right(self._at, t) - 1
        if k < 0:
            return self._sum[0] if self._sum else 0.0
        return self._sum[k] + self._count[k] * (t - self._at[k])

    def record(self, at: float, replicas: int) -> None:
        """`replicas` held from `at` on (an instant not after the last one's is ignored; the last
        one's count again is the same holding, kept as one record)."""
        if self._at and (at <= self._at[-1] or int(replicas) == self._count[-1]):
            return
        self._sum.append(self._until(at))
        self._at.append(at)
        self._count.append(int(replicas))

    def latest(self) -> int:
        """The count held now (0 before the first record)."""
        return self._count[-1] if self._count else 0

    def seconds(self, since: float, until: float) -> float:
        """Placeholder-seconds held from `since` until `until` (at or after the last record)."""
        return max(0.0, self._until(until) - self._until(since))

    def forget_before(self, at: float) -> None:
        """Drop what is not needed to answer from `at` on (the record in force then is kept)."""
        k = bisect_right(self._at, at) - 1
        if k > 0:
            del self._at[:k], self._count[:k], self._sum[:k]
