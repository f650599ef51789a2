"""Reading a cost/protection curve: the one interpolation of the fixed-headroom curve and of every
other family (docs/promise.md, "One set of numbers").

Protection p of a strategy is the share of no headroom's (`reactive`'s) unserved pod-minutes it
removes (1 when no headroom leaves none waiting). A family is a set of points (overhead node-hours
over no headroom, unserved pod-minutes). No headroom itself, cost 0 and protection 0, is a point
of every family. The family is read along its Pareto frontier (the points no cheaper point
protects as well as), linear between the two neighbours: `cost_at` the cost of reaching a
protection, `protection_at` the protection a cost buys. The two are inverse readings of the same
line, so "at the same cost" and "at the same protection" never disagree. `fewest` finds the
fewest fixed placeholders keeping a protection exactly (every integer, not a grid's steps).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

NO_HEADROOM = "no headroom"
"""The label of the free point every family holds."""


@dataclass(frozen=True)
class Point:
    """One strategy or setting: overhead node-hours over no headroom and unserved pod-minutes."""

    overhead: float
    unserved: float
    label: str


@dataclass(frozen=True)
class Reading:
    """A family's cost at one protection: None when its best (`reached`) falls short; `between`
    names the point(s) it was read from."""

    cost: float | None
    reached: float
    between: tuple[str, ...]


def protection(unserved: float, reactive_unserved: float) -> float:
    """The share of no headroom's unserved pod-minutes removed (1 when it leaves none)."""
    if reactive_unserved <= 0:
        return 1.0
    return 1.0 - unserved / reactive_unserved


def pareto(points: Sequence[Point], reactive_unserved: float) -> list[Point]:
    """The points no cheaper point protects as well as, by cost."""
    out: list[Point] = []
    best = -float("inf")
    for pt in sorted(points, key=lambda p: (p.overhead, p.unserved)):
        got = protection(pt.unserved, reactive_unserved)
        if got > best + 1e-12:
            out.append(pt)
            best = got
    return out


def frontier(points: Sequence[Point], reactive_unserved: float) -> list[Point]:
    """The family's Pareto frontier, no headroom (cost 0, protection 0) included."""
    return pareto([Point(0.0, reactive_unserved, NO_HEADROOM), *points], reactive_unserved)


def cost_at(points: Sequence[Point], reactive_unserved: float, p: float) -> Reading:
    """The overhead node-hours the family needs for protection `p`, read along its frontier
    (see the module docstring); None when no point reaches `p`."""
    front = frontier(points, reactive_unserved)
    prot = [protection(pt.unserved, reactive_unserved) for pt in front]
    reached = max(prot)
    j = next((i for i, got in enumerate(prot) if got >= p - 1e-12), None)
    if j is None:
        return Reading(None, reached, ())
    if j == 0:
        return Reading(front[0].overhead, reached, (front[0].label,))
    a, b = front[j - 1], front[j]
    share = (p - prot[j - 1]) / (prot[j] - prot[j - 1])
    return Reading(a.overhead + share * (b.overhead - a.overhead), reached, (a.label, b.label))


def protection_at(points: Sequence[Point], reactive_unserved: float, cost: float) -> float:
    """The protection the family reaches for `cost` overhead node-hours, read along the same
    frontier as `cost_at` (its inverse)."""
    front = frontier(points, reactive_unserved)
    got = [protection(pt.unserved, reactive_unserved) for pt in front]
    below = [i for i, pt in enumerate(front) if pt.overhead <= cost + 1e-9]
    if not below:
        return 0.0
    i = below[-1]
    if i + 1 == len(front):
        return got[i]
    a, b = front[i], front[i + 1]
    share = (cost - a.overhead) / (b.overhead - a.overhead) if b.overhead > a.overhead else 0.0
    return got[i] + share * (got[i + 1] - got[i])


def fewest(keeps: Callable[[int], bool], lo: int, hi: int) -> int:
    """The fewest N in (lo, hi] for which `keeps(N)`, given `keeps(hi)` and not `keeps(lo)`
    (protection never falls as fixed placeholders are added): bisection, every integer tried."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if keeps(mid):
            hi = mid
        else:
            lo = mid
    return hi
