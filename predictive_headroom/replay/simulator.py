"""A simulated cluster for the backtest (`docs/design.md`, section 4): pure numpy, 1-minute steps.

Everything is counted in placeholder-sized slots:

- App pods follow demand like an HPA, up at once and down only after a 5-minute hold:
  `W(t) = max over the last 5 minutes of ceil(demand / demandPerReplica)`.
- A node holds `node_slots` slots. The node autoscaler wants `ceil((W + P) / node_slots)` nodes,
  where `P` is the placeholder count. Nodes asked for arrive `lag` minutes later; a ready node is
  removed once it has not been needed for `scale_down_delay` whole minutes (the cluster keeps the
  most nodes wanted at any step of the last `scale_down_delay + 1` steps).
- App pods preempt placeholders, so only app pods can go unserved:
  `U(t) = max(0, W(t) - node_slots * ready(t))`.

The cluster starts warm: before the first step it has the nodes the first step wants.

Interruptions (optional, `Interruptions`): ready nodes are interrupted at random (a seeded Poisson
process of `rate` per node-minute, the same draws for every strategy) with a notice of
`notice_minutes`. From the notice the node is leaving: nothing new is placed on it, its app pods
(their even share of W, at most a node's slots) keep running until it goes, then need room
elsewhere. The autoscaler counts only staying nodes as room: it wants
`ceil((W - pods on leaving nodes + P) / node_slots)` staying nodes, so a planner that adds the
leaving pods to P (the disruption component) has a replacement ordered at the notice, and one that
does not orders it when the pods are already waiting. Unserved:
`U = max(0, W - node_slots * staying - pods on leaving nodes)`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from predictive_headroom.core.forecast_math import forward_max
from predictive_headroom.core.series import History

MINUTE = 60.0

# Decides the placeholder count at step i given the ready nodes at the end of step i - 1 (and,
# with interruptions, the app pods on leaving nodes as a third argument).
Decide = Callable[..., int]


@dataclass(frozen=True)
class ClusterSpec:
    """The simulated node pool: slots per node, node boot lag and scale-down delay (minutes)."""

    node_slots: int = 8
    lag_minutes: int = 3
    scale_down_minutes: int = 10
    hpa_hold_minutes: int = 5

    def __post_init__(self) -> None:
        if self.node_slots < 1:
            raise ValueError(f"node_slots must be at least 1, got {self.node_slots}")
        for name in ("lag_minutes", "scale_down_minutes", "hpa_hold_minutes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} cannot be negative, got {getattr(self, name)}")


@dataclass(frozen=True)
class Interruptions:
    """Nodes interrupted at random: `rate` per node-minute, `notice_minutes` of notice, `seed`.

    Draws are shared by every strategy: a Poisson process of rate `rate x max_nodes` gives the
    candidate instants, and a candidate hits when its uniform draw is below the share of
    `max_nodes` the strategy's staying nodes make (thinning), so a cluster twice the size is hit
    twice as often at the same instants."""

    rate: float
    notice_minutes: int = 2
    seed: int = 0
    max_nodes: int = 1000

    def __post_init__(self) -> None:
        if self.rate < 0 or self.notice_minutes < 0 or self.max_nodes < 1:
            raise ValueError("interruptions need rate >= 0, notice_minutes >= 0, max_nodes >= 1")

    def draws(self, steps: int) -> list[list[float]]:
        """Per step, the uniform draws of its candidate interruptions (most steps: none)."""
        rng = np.random.default_rng(self.seed)
        counts = rng.poisson(self.rate * self.max_nodes, steps)
        uniforms = rng.random(int(counts.sum())).tolist()
        out: list[list[float]] = []
        k = 0
        for c in counts.tolist():
            out.append(uniforms[k : k + c])
            k += c
        return out


@dataclass(frozen=True)
class Run:
    """One simulated strategy: per-minute placeholders, ready nodes and unserved app pods (with
    interruptions: the app pods on leaving nodes per minute, and how many nodes were interrupted)."""

    placeholders: np.ndarray
    ready: np.ndarray
    unserved: np.ndarray
    leaving: np.ndarray | None = None
    interrupted: np.ndarray | None = None
    """Nodes interrupted (given notice) per minute."""


@dataclass(frozen=True)
class Metrics:
    """The scored totals of a run (`docs/design.md`, section 4)."""

    unserved_pod_minutes: float
    node_hours: float
    cold_starts: int


def minute_grid(history: History) -> tuple[np.ndarray, np.ndarray]:
    """The series on a 1-minute grid (whole minutes within its span), linearly interpolated."""
    if len(history) < 2:
        raise ValueError(f"series {history.source!r} needs at least two points, has {len(history)}")
    first = math.ceil(history.start / MINUTE) * MINUTE
    last = math.floor(history.end / MINUTE) * MINUTE
    times = np.arange(first, last + MINUTE / 2, MINUTE)
    return times, np.interp(times, history.times, history.values)


def rolling_max(values: np.ndarray, window: int) -> np.ndarray:
    """out[i] = max(values[max(0, i - window + 1) : i + 1]) (trailing window of `window` steps)."""
    if window <= 1 or values.size == 0:
        return values.copy()
    padded = np.concatenate([np.full(window - 1, values[0]), values])
    return sliding_window_view(padded, window).max(axis=1)


def app_pods(demand: np.ndarray, demand_per_replica: float, hold_minutes: int = 5) -> np.ndarray:
    """W(t): app pods an HPA would run, in slots: ceil(demand / demandPerReplica) held up for `hold_minutes`."""
    if demand_per_replica <= 0:
        raise ValueError(f"demand_per_replica must be positive, got {demand_per_replica}")
    pods = np.ceil(np.maximum(demand, 0.0) / demand_per_replica - 1e-9).astype(np.int64)
    return rolling_max(pods, hold_minutes)


def oracle_placeholders(pods: np.ndarray, lag_minutes: int) -> np.ndarray:
    """Perfect foresight: P(t) = max over [t, t + lag] of W - W(t)."""
    return forward_max(pods, lag_minutes) - pods


def simulate(
    pods: np.ndarray,
    placeholders: np.ndarray | Decide,
    cluster: ClusterSpec,
    interruptions: Interruptions | None = None,
) -> Run:
    """Run the cluster through the app pods `pods` (W) with the given placeholders.

    `placeholders` is either a per-minute array or a function `(step, ready nodes) -> count`
    for strategies that look at the cluster (CPA, the full planner). With `interruptions`, a
    function is asked `(step, ready nodes, app pods on leaving nodes)`.
    """
    if interruptions is None and not callable(placeholders):
        p = np.maximum(np.asarray(placeholders, dtype=np.int64), 0)
        if p.shape != pods.shape:
            raise ValueError(f"placeholders has {p.size} steps but app pods has {pods.size}")
        slots = cluster.node_slots
        wanted = -(-(pods + p) // slots)
        keep = rolling_max(wanted, cluster.scale_down_minutes + 1)
        ready = _run_nodes(wanted.tolist(), keep.tolist(), cluster.lag_minutes)
        return Run(p, ready, np.maximum(0, pods - slots * ready))
    return _simulate_steps(pods, placeholders, cluster, interruptions)


def _run_nodes(wanted: list[int], keep: list[int], lag: int) -> np.ndarray:
    """Ready nodes per step for precomputed wanted and kept node counts (plain loop over ints).

    The array fast path: `_simulate_steps` without interruptions, with the counts known ahead
    (placeholders given as an array), about 4x faster; the static curve runs it dozens of times per
    backtest. `test_the_array_fast_path_is_the_general_loop` proves both give the same run on 28
    days of a real series."""
    n = len(wanted)
    arrive = [0] * (n + lag + 1)
    out = [0] * n
    ready = wanted[0] if n else 0
    pending = 0
    for i in range(n):
        got = arrive[i]
        if got:
            ready += got
            pending -= got
        short = wanted[i] - ready - pending
        if short > 0:
            if lag == 0:
                ready += short
            else:
                arrive[i + lag] += short
                pending += short
        if ready > keep[i]:
            ready = keep[i]
        out[i] = ready
    return np.asarray(out, dtype=np.int64)


class _Leaving:
    """The interrupted nodes on notice, in the order they go: (step it goes, app pods on it), the
    app pods on them (`pods`) and the nodes interrupted per step (`hits`). Without interruptions
    it stays empty and `next_draw` is past the last step."""

    def __init__(self, spec: Interruptions | None, steps: int, slots: int) -> None:
        self.queue: deque[tuple[int, int]] = deque()
        self.pods = 0
        self.hits = [0] * steps
        self.slots = slots
        self.notice = 0 if spec is None else spec.notice_minutes
        self.max_nodes = 1 if spec is None else spec.max_nodes
        # The steps with candidate interruptions and their uniform draws, then a sentinel.
        draws = [] if spec is None else [(i, d) for i, d in enumerate(spec.draws(steps)) if d]
        self._draws = iter([*draws, (steps, [])])
        self.next_draw, self._uniforms = next(self._draws)

    def go(self, step: int, ready: int) -> int:
        """Ready nodes once the nodes whose notice ends by `step` have gone."""
        while self.queue and self.queue[0][0] <= step:
            self.pods -= self.queue.popleft()[1]
            ready = max(0, ready - 1)
        return ready

    def draw(self, step: int, app_pods: int, ready: int) -> tuple[int, int]:
        """Interrupt staying nodes at `step` (the step's candidate draws, thinned by the share of
        `max_nodes` staying); returns the ready nodes once those without notice have gone, and the
        next step with a draw."""
        staying = ready - len(self.queue)
        for u in self._uniforms:
            if staying > 0 and u < staying / self.max_nodes:
                share = min(self.slots, -(-app_pods // max(1, ready)))
                self.queue.append((step + self.notice, share))
                self.pods += share
                staying -= 1
                self.hits[step] += 1
        self.next_draw, self._uniforms = next(self._draws)
        return self.go(step, ready), self.next_draw  # no notice: gone at once


# Long on purpose: the hot loop of every feedback replay; helper calls per step would cost speed.
def _simulate_steps(  # noqa: C901
    pods: np.ndarray,
    strategy: np.ndarray | Decide,
    cluster: ClusterSpec,
    spec: Interruptions | None,
) -> Run:
    """`simulate` one step at a time: a strategy that looks at the cluster, interruptions (module
    docstring; the same draws for every strategy), or both. The interruption bookkeeping runs only
    at steps with a candidate draw and while a node is on notice, so without draws this is the
    plain feedback loop."""
    n = pods.size
    slots, lag, delay = cluster.node_slots, cluster.lag_minutes, cluster.scale_down_minutes
    w = pods.tolist()
    fixed = None if callable(strategy) else np.maximum(np.asarray(strategy, np.int64), 0).tolist()
    if fixed is not None and len(fixed) != n:
        raise ValueError(f"placeholders has {len(fixed)} steps but app pods has {n}")
    three = spec is not None  # with interruptions a strategy is also told the pods on leaving nodes
    leaving = _Leaving(spec, n, slots)
    on_notice = leaving.queue
    arrive = [0] * (n + lag + 1)
    ready_out, p_out, leave_out, gone_out = [0] * n, [0] * n, [0] * n, [0] * n
    window: deque[tuple[int, int]] = deque()  # (step, wanted) with decreasing wanted: rolling max
    ready, pending, on_leaving = (-(-w[0] // slots) if n else 0), 0, 0
    next_draw = leaving.next_draw
    for i in range(n):
        if on_notice:
            ready = leaving.go(i, ready)
        if i == next_draw:
            ready, next_draw = leaving.draw(i, w[i], ready)
        gone = len(on_notice)
        if fixed is not None:
            p = fixed[i]
        else:
            p = int(strategy(i, ready, leaving.pods) if three else strategy(i, ready))
            if p < 0:
                p = 0
        if gone:
            on_leaving = leaving.pods
            wanted = -(-max(0, w[i] - on_leaving + p) // slots) + gone
        else:
            on_leaving, wanted = 0, -(-(w[i] + p) // slots)
        if i == 0 and wanted > ready:
            ready = wanted
        got = arrive[i]
        if got:
            ready += got
            pending -= got
        short = wanted - ready - pending
        if short > 0:
            if lag == 0:
                ready += short
            else:
                arrive[i + lag] += short
                pending += short
        while window and window[-1][1] <= wanted:
            window.pop()
        window.append((i, wanted))
        while window[0][0] < i - delay:
            window.popleft()
        if ready > window[0][1]:
            ready = max(window[0][1], gone)
        ready_out[i], p_out[i] = ready, p
        if gone:
            leave_out[i], gone_out[i] = on_leaving, gone
    ready_arr, leave_arr = np.asarray(ready_out, dtype=np.int64), np.asarray(leave_out, np.int64)
    staying = ready_arr - np.asarray(gone_out, dtype=np.int64)
    return Run(
        np.asarray(p_out, dtype=np.int64),
        ready_arr,
        np.maximum(0, pods - slots * staying - leave_arr),
        None if spec is None else leave_arr,
        None if spec is None else np.asarray(leaving.hits, dtype=np.int64),
    )


def score(run: Run, start: int = 0) -> Metrics:
    """Totals from step `start` on: unserved pod-minutes, node-hours and steps with unserved pods."""
    unserved = run.unserved[start:]
    return Metrics(
        unserved_pod_minutes=float(unserved.sum()),
        node_hours=float(run.ready[start:].sum()) / 60.0,
        cold_starts=int(np.count_nonzero(unserved)),
    )
