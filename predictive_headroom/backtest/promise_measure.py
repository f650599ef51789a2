"""The promise, measured (`backtest --protection P`, JSON key `promise`): the choice rule of
`replay.promise` replayed day by day on a backtest's grid, what it kept and what it cost, next
to the daily reserve and static headroom in hindsight at the same protection.

Candidates: the forecast at `PROMISE_QUANTILES` x the grid's windows, each plus a reserve of
N placeholders on top of its plan (`promise.reserve_sizes`), as the daemon's re-tune replays them. Each period is a day; the choice for a day reads only the minutes known at its
start (the observation delay and one data step before it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np

from predictive_headroom.backtest.frontier import Point, cost_at, protection
from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.results import FEW_EVENTS, BacktestResult
from predictive_headroom.core.curve import fewest
from predictive_headroom.core.planner import with_reserve
from predictive_headroom.core.series import iso_utc
from predictive_headroom.core.shortfall import Cause, Shortfall, shortfall_cause
from predictive_headroom.replay.fallback import DEARER_MARGIN, fixed_override
from predictive_headroom.replay.promise import (
    LOOKBACK,
    PROMISE_QUANTILES,
    WINDOW,
    Candidate,
    Choice,
    Ledger,
    ReserveBook,
    StaticRuns,
    Status,
    WalkForward,
    carries_tail,
    choose,
    ledger,
    placeholders_of,
    reserve_book,
    reserve_sizes,
    reserve_walk_forward,
    walk_forward,
)
from predictive_headroom.replay.simulator import ClusterSpec, Run, score, simulate
from predictive_headroom.replay.tail import tail_reserves_at
from predictive_headroom.replay.tuning import DAY_MINUTES, Setting, Walk

RESERVE_TARGETS = (0.5, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)
"""Targets the daily reserve is replayed at, to read its cost at the protection kept."""


@dataclass(frozen=True)
class Replayed:
    """A backtest's grid ready for the rule: candidates' runs summed per day, the day starts."""

    book: Ledger
    base: dict[Setting, np.ndarray]
    walk: Walk
    """The days walked: the app pods, the simulated cluster, the day starts, what is not yet
    known at each, the cap (`replay.tuning.Walk`)."""
    bounds: list[int]
    static_runs: StaticRuns
    default: Candidate
    tails: dict[float, list[int | None]]
    """Per protection, each period's tail-aware reserve (`replay.tail`)."""
    reserves: ReserveBook
    """The static runs summed per day for the daily reserve (`replay.promise.reserve_book`)."""

    @property
    def starts(self) -> list[int]:
        """The first minute of each day walked."""
        return list(self.walk.period_starts)

    @property
    def cluster(self) -> ClusterSpec:
        """The simulated cluster."""
        return self.walk.cluster

    @property
    def known_lag(self) -> int:
        """Minutes not yet known at a day's start."""
        return self.walk.known_lag


def prepare(result: BacktestResult, protections: Sequence[float] = ()) -> Replayed:
    """Simulate every candidate on `result`'s app pods (forecast grid runs plus reserves, the
    tail-aware reserve of each day and protection among them)."""
    s = result.settings
    cluster = result.cluster
    delay = s.observation_delay_seconds or 0.0
    known_lag = int(-(-(delay + s.data_step_seconds) // 60))
    pods, start = result.pods, result.scored_from
    walk = Walk.daily(pods, cluster, start, known_lag, s.max_replicas)
    starts = list(walk.period_starts)
    bounds = [b - known_lag for b in starts] + [pods.size]
    base = {
        g.setting: g.run.placeholders
        for g in result.grid
        if g.family == "forecast" and g.setting.quantile in PROMISE_QUANTILES
    }
    if not base:
        base = {g.setting: g.run.placeholders for g in result.grid if g.family == "forecast"}
    static_runs = StaticRuns(pods, cluster, tuple(n for n, _ in result.static_curve))
    tails = _tails(pods, starts, known_lag, cluster.lag_minutes, protections)
    extra = {n for per_day in tails.values() for n in per_day if n is not None}
    cheapest = carries_tail(base)

    def candidate_runs() -> Iterator[tuple[Candidate, Run]]:
        """Each candidate's run, made when the ledger reads it and let go once summed."""
        for setting, ph in base.items():
            grid_run = next(
                g.run for g in result.grid if g.family == "forecast" and g.setting == setting
            )
            tried = set(reserve_sizes(pods[start:])) | (extra if setting == cheapest else set())
            for n in sorted(tried):
                placeholders = with_reserve(ph, n, s.max_replicas)
                yield (
                    Candidate(setting, n),
                    grid_run if n == 0 else simulate(pods, placeholders, cluster),
                )

    reactive = result.strategies["reactive"].run
    q0 = s.quantile if s.quantile is not None else 0.95
    default_setting = Setting(q0, s.scale_down_stabilization_seconds)
    default = Candidate(default_setting if default_setting in base else next(iter(base)), 0)
    return Replayed(
        ledger(candidate_runs(), reactive, bounds, start),
        base,
        walk,
        bounds,
        static_runs,
        default,
        tails,
        reserve_book(static_runs, reactive, walk),
    )


def _tails(
    pods: np.ndarray, starts: Sequence[int], known_lag: int, lead: int, protections: Sequence[float]
) -> dict[float, list[int | None]]:
    """Each period's tail-aware reserve per protection, from the minutes known at its start."""
    per_start = [tail_reserves_at(pods, b, known_lag, lead, protections) for b in starts]
    return {p: [at_start[i] for at_start in per_start] for i, p in enumerate(protections)}


def measure(
    result: BacktestResult, protections: Sequence[float], replayed: Replayed | None = None
) -> list[PromiseEntry]:
    """The `promise` JSON: per asked protection what the rule kept and cost, the daily reserve's
    and static-in-hindsight's cost at that protection, and the choice held each day."""
    if not result.grid:
        return []
    r = prepare(result, protections) if replayed is None else replayed
    reactive = result.strategies["reactive"]
    reactive_u = reactive.metrics.unserved_pod_minutes
    reactive_nh = reactive.metrics.node_hours
    start = result.scored_from
    days = (result.pods.size - start) / DAY_MINUTES
    daily = [
        reserve_walk_forward(r.static_runs, reactive.run, r.walk, t, r.reserves)
        for t in RESERVE_TARGETS
    ]
    reserve_points = [
        Point(w.node_hours - reactive_nh, w.unserved_pod_minutes, f"target {w.target:g}")
        for w in daily
    ]
    static_points = [
        Point(m.node_hours - reactive_nh, m.unserved_pod_minutes, f"N={n}")
        for n, m in result.static_curve
    ]
    out = []
    for p in protections:
        wf = promise_walk(result, r, p)
        entry = _entry(result, wf, p, reactive_u, reactive_nh, days, reserve_points, static_points)
        # Now: the day's reserves and the tail-aware one of the last day (the others' are
        # other days' and would not be tried now).
        tail = r.tails[p][-1] if r.tails.get(p) else None
        sizes = reserve_sizes(result.pods[start:], tail)
        now = choose(r.book.among(sizes), p, tail=tail)
        if result.settings.protection_fallback == "fixed":  # as the daemon would hold now
            static, tried = fixed_book(result, r)
            now = fixed_override(static, p, tried)(len(r.starts), now)
        out.append(replace(entry, now=_now(now)))
    return out


def promise_walk(
    result: BacktestResult,
    r: Replayed,
    p: float,
    fallback: bool | None = None,
    margin: float = DEARER_MARGIN,
) -> WalkForward:
    """`protection: p` replayed day by day on `r` (`replay.promise.walk_forward`): the run the
    promise entry, `tune`'s recommendation and the comparison with a fixed N all read. With
    `fallback` (default: the pool's `protectionFallback: fixed`), a day whose ledger says the
    forecast did not keep `p` or did not beat a fixed N holds the fewest fixed placeholders
    that kept `p` over the days read instead (`replay.fallback`), as the daemon's re-tune does."""
    if fallback is None:
        fallback = result.settings.protection_fallback == "fixed"
    override = None
    if fallback:
        static, sizes = fixed_book(result, r)
        override = fixed_override(static, p, sizes, margin)
    return walk_forward(
        r.book, r.base, r.walk, p, r.default, tails=r.tails.get(p), override=override
    )


def fixed_book(result: BacktestResult, r: Replayed) -> tuple[Ledger, Callable[[int], list[int]]]:
    """Static headroom at the reserves the walk tries (`reserve_sizes`), summed on the walk's
    periods (the fallback's ledger), and the fixed N tried at period k (the day after the last
    one too): those up to the largest reserve sized from the days it reads, as `walk_forward` and
    the daemon size them."""
    pods, start = result.pods, result.scored_from
    sizes = reserve_sizes(pods[start:])
    runs = (
        (Candidate(None, n), simulate(pods, np.full(pods.size, n, dtype=np.int64), r.cluster))
        for n in sizes
    )
    static = ledger(runs, result.strategies["reactive"].run, r.bounds, start)
    span = (WINDOW + LOOKBACK) * DAY_MINUTES

    def tried(k: int) -> list[int]:
        b = r.starts[k] if k < len(r.starts) else pods.size  # k = len(starts): the next day
        largest = max(reserve_sizes(pods[max(0, b - span) : b]))
        return [n for n in sizes if n <= largest]

    return static, tried


def _entry(
    result: BacktestResult,
    wf: WalkForward,
    p: float,
    reactive_u: float,
    reactive_nh: float,
    days: float,
    reserve_points: list[Point],
    static_points: list[Point],
) -> PromiseEntry:
    kept = protection(wf.unserved_pod_minutes, reactive_u)
    overhead = wf.node_hours - reactive_nh
    reserve = cost_at(reserve_points, reactive_u, kept)
    static = cost_at(static_points, reactive_u, kept)
    short = [c for c in wf.choices if c is not None and c.status == Status.SHORT]
    return PromiseEntry(
        protection=p,
        realized_protection=round(kept, 5),
        unserved_pod_minutes=wf.unserved_pod_minutes,
        reactive_unserved_pod_minutes=reactive_u,
        overhead_node_hours=round(overhead, 3),
        overhead_node_hours_per_day=round(overhead / days, 3) if days > 0 else None,
        days=round(days, 2),
        reserve_walk_forward_overhead_node_hours=_round(reserve.cost),
        reserve_walk_forward_best_protection=round(reserve.reached, 5),
        static_hindsight_overhead_node_hours=_round(static.cost),
        reserve_ratio=_ratio(reserve.cost, overhead),
        static_ratio=_ratio(static.cost, overhead),
        kept=kept >= p - 1e-9,
        short_days=len(short),
        few_events=reactive_u < FEW_EVENTS,
        choices=tuple(
            _choice_json(result, b, c) for b, c in zip(wf.period_starts, wf.choices, strict=True)
        ),
        cause=None if kept >= p - 1e-9 else _cause(result, wf, p, len(short), reactive_u),
    )


def _cause(
    result: BacktestResult, wf: WalkForward, p: float, short_days: int, reactive_u: float
) -> Shortfall:
    """Why `wf` kept less than `p` (`core.shortfall`): the days the cap (maxReplicas, or the
    limits where they allow fewer) held the plan while pods waited, and the fewest fixed
    placeholders that kept `p` in this replay."""
    cap = result.settings.max_replicas
    held = (wf.run.placeholders >= cap) & (wf.run.unserved > 0)
    edges = [*wf.period_starts, result.pods.size]
    capped = sum(bool(held[a:b].any()) for a, b in pairwise(edges))
    fixed = fewest_fixed_n(result, p) if capped else None
    return shortfall_cause(
        p,
        short_days=short_days,
        of_days=len(wf.period_starts),
        capped_days=capped,
        max_replicas=cap,
        fixed=fixed,
        cap_name=result.settings.cap_name,
    )


def fewest_fixed_n(result: BacktestResult, p: float) -> tuple[int, float] | None:
    """The fewest fixed placeholders that kept `p` over `result`'s scored days, exactly (every
    N between the static curve's points tried by bisection, `core.curve.fewest`), and what they
    kept: the one "raise it to N" figure (None: no N of the curve kept `p`)."""
    reactive_u = result.strategies["reactive"].metrics.unserved_pod_minutes
    curve = sorted(result.static_curve)
    kept = {n: protection(m.unserved_pod_minutes, reactive_u) for n, m in curve}
    hi = next((n for n, _ in curve if kept[n] >= p - 1e-9), None)
    if hi is None:
        return None
    lo = max((n for n, _ in curve if n < hi), default=hi - 1)
    pods, start, cluster = result.pods, result.scored_from, result.cluster

    def keeps(n: int) -> bool:
        if n not in kept:
            run = simulate(pods, np.full(pods.size, n, dtype=np.int64), cluster)
            kept[n] = protection(score(run, start).unserved_pod_minutes, reactive_u)
        return kept[n] >= p - 1e-9

    n = fewest(keeps, lo, hi)
    return n, kept[n]


def _now(c: Choice) -> dict[str, Any]:
    """What the rule holds after the last replayed day (what the daemon would hold now)."""
    cand = c.candidate
    return {
        "label": cand.label(),
        "burst_quantile": None if cand.setting is None else cand.setting.quantile,
        "scale_down_stabilization_seconds": None if cand.setting is None else cand.setting.window,
        "reserve": cand.reserve,
        "status": str(c.status),
    }


def _choice_json(result: BacktestResult, b: int, c: Any) -> dict[str, Any]:
    day = iso_utc(float(result.times[b]))
    if c is None:
        return {"from": day, "label": "default (no past day)", "status": "untested"}
    cand: Candidate = c.candidate
    return {
        "from": day,
        "label": cand.label(),
        "burst_quantile": None if cand.setting is None else cand.setting.quantile,
        "scale_down_stabilization_seconds": None if cand.setting is None else cand.setting.window,
        "reserve": cand.reserve,
        "status": str(c.status),
        "strictness": c.strictness,
        "kept_on_lookback": None if c.kept is None else round(c.kept, 4),
    }


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b <= 0:
        return None if a > 0 else 1.0
    return round(a / b, 3)


__all__ = ["measure", "placeholders_of", "prepare", "promise_walk"]


def pct(p: float) -> str:
    """95% for 0.95, 99.5% for 0.995."""
    return f"{100 * p:g}%"


def money(node_hours: float, price: float | None, currency: str = "USD") -> str:
    """`: 12.40 USD` for a price per node-hour, else nothing."""
    return "" if not price else f": {node_hours * price:,.2f} {currency}"


def sentence(entry: PromiseEntry, price: float | None = None, currency: str | None = None) -> str:
    """The promise in one sentence: "asked 95%: kept 95.8% for 27.1 overhead node-hours a day
    (812 a month); a fixed reserve re-chosen daily would have needed 36.8 a day", every figure a
    day's (the totals, said so, when the days are not known), with the real cause when it fell
    short (`core.shortfall`) and a word when it rests on few events. `price` is the cost of a
    node-hour (money shown when given; default the entry's `price_per_node_hour`, set when the
    policy has `cost:`)."""
    price = entry.price_per_node_hour if price is None else price
    currency = currency or entry.currency or "USD"
    kept, asked = entry.realized_protection, entry.protection
    per_day = entry.overhead_node_hours_per_day
    if per_day is not None:
        text = (
            f"asked {pct(asked)}: kept {100 * kept:.1f}% for {per_day:,.1f} overhead node-hours a "
            f"day{money(per_day, price, currency)} ({30 * per_day:,.0f} a month"
            f"{money(30 * per_day, price, currency)})"
        )
    else:
        text = (
            f"asked {pct(asked)}: kept {100 * kept:.1f}% for {entry.overhead_node_hours:,.0f} "
            "overhead node-hours in all"
        )
    reserve = entry.reserve_walk_forward_overhead_node_hours
    if reserve is None:
        best = entry.reserve_walk_forward_best_protection
        text += f"; a fixed reserve re-chosen daily never kept {100 * kept:.1f}% (at best {100 * best:.1f}%)"
    elif per_day is not None and entry.days:
        text += (
            f"; a fixed reserve re-chosen daily would have needed {reserve / entry.days:,.1f} a day"
        )
    else:
        text += f"; a fixed reserve re-chosen daily would have needed {reserve:,.0f} in all"
    if kept < asked - 1e-9:
        text += f". Short of {pct(asked)} by {100 * (asked - kept):.1f} points"
        cause = entry.cause
        if cause is not None and (entry.short_days or cause.cause == Cause.CAP):
            text += f": {cause.says()}"
    if entry.few_events:
        text += (
            f" (only {entry.reactive_unserved_pod_minutes:,.0f} pod-minutes waited without "
            "headroom: a few bursts, one more or less moves this by points)"
        )
    return text
