"""What `tune` recommends from a backtest with a grid and the promise measured at the target.

The headline is the promise (`backtest.promise_measure`): what `protection: P` kept walk-forward,
each day's forecast setting and reserve chosen on the days before it, as the daemon re-tunes.
The YAML to paste is `protection: P` (the daemon chooses the setting and reserve itself), or the
proportional rule when it absorbs P for less than the promise cost on this history (it has no
setting to choose, so its figure needs no walk-forward). The best single forecast setting in
hindsight and static headroom with N chosen in hindsight are shown second: ideals no rule
choosing on the past reaches on a changing series.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from predictive_headroom.backtest.frontier import cost_at, families, protection
from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.promise_measure import FEW_EVENTS, measure, pct
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.core.price import Price
from predictive_headroom.core.shortfall import Cause
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.promise_price import FRONTIER_LEVELS, Level, price_of_promise
from predictive_headroom.replay.tuning import choose as choose_fixed

MONTH_DAYS = 30


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


def recommend(
    result: BacktestResult,
    pool: Pool,
    target: float,
    *,
    price: float | None = None,
    currency: str = "USD",
    priced: Price | None = None,
) -> dict[str, Any]:
    """The recommendation as JSON (see the module docstring): `promise` (walk-forward, the
    headline), `now` (what the daemon would hold next), `hindsight` (the best fixed forecast
    setting), `static`, `proportional`, `cost` per day and month (money with `price` a node-hour),
    `warnings`, `status` (`kept`, `short` or `proportional-cheaper`) and `yaml`."""
    reactive_u = result.strategies["reactive"].metrics.unserved_pod_minutes
    promise = _promise_at(result, target)
    prop = result.strategies["proportional"]
    prop_protection = protection(prop.metrics.unserved_pod_minutes, reactive_u)
    out: dict[str, Any] = {
        "pool": pool.name,
        "protection_target": target,
        "history": _history(result),
        "reactive_unserved_pod_minutes": reactive_u,
        "promise": promise.to_dict(),
        "now": promise.now,
        "cost": _cost(promise, price, currency),
        "hindsight": _hindsight(result, target),
        "static": _static_at(families(result)["static"], reactive_u, target),
        "proportional": {
            "protection": round(prop_protection, 5),
            "overhead_node_hours": round(prop.overhead_node_hours, 3),
            "rule": "config" if pool.proportional else "linear: {nodesPerReplica: 1}",
        },
        "warnings": _warnings(promise, pool, target),
        "price_of_promise": price_of_promise(_levels(result, target), target, priced),
    }
    kept, cost = promise.realized_protection, promise.overhead_node_hours
    if prop_protection >= target and (kept < target or prop.overhead_node_hours < cost):
        out["status"] = "proportional-cheaper"
        out["yaml"] = (
            ["proportional: (keep the pool's rule)"]
            if pool.proportional
            else ["proportional:", "  linear: {nodesPerReplica: 1}"]
        )
        return out
    out["status"] = "kept" if kept >= target - 1e-9 else "short"
    out["yaml"] = [f"protection: {pct(target)}"]
    return out


def _promise_at(result: BacktestResult, target: float) -> PromiseEntry:
    """The walk-forward promise entry for `target`: the one the backtest measured when it did,
    else measured here."""
    return (
        next((e for e in result.promise or [] if abs(e.protection - target) < 1e-9), None)
        or measure(result, (target,))[0]
    )


def _levels(result: BacktestResult, target: float) -> list[Level]:
    """The frontier walk-forward: `FRONTIER_LEVELS` and `target`, each from the backtest's
    promise entries (measured here, on the same replays, for the levels it did not measure)."""
    asked = sorted({*FRONTIER_LEVELS, target})
    entries = {round(e.protection, 6): e for e in result.promise or []}
    missing = [p for p in asked if round(p, 6) not in entries]
    for e in measure(result, missing) if missing else []:
        entries[round(e.protection, 6)] = e
    out = []
    for p in asked:
        e = entries[round(p, 6)]
        days, static = e.days, e.static_hindsight_overhead_node_hours
        waited = e.reactive_unserved_pod_minutes > 0
        out.append(
            Level(
                p,
                e.realized_protection if waited else None,
                e.overhead_node_hours_per_day or 0.0,
                None if static is None or not days else static / days,
            )
        )
    return out


def _history(result: BacktestResult) -> dict[str, Any]:
    """The span replayed (ISO-8601 UTC), where scoring started and how many refits it took."""
    return {
        "from": _iso(float(result.times[0])),
        "to": _iso(float(result.times[-1])),
        "scored_from": _iso(result.settings.scored_from),
        "refits": result.settings.refits,
        "refit_every_seconds": result.settings.refit_every_seconds,
    }


def _cost(promise: PromiseEntry, price: float | None, currency: str) -> dict[str, Any]:
    """The promise's overhead node-hours in total, a day and a 30-day month, and in money when
    `price` (a node-hour) is given (None otherwise)."""
    per_day = promise.overhead_node_hours_per_day or 0.0
    return {
        "overhead_node_hours": promise.overhead_node_hours,
        "per_day": round(per_day, 2),
        "per_month": round(MONTH_DAYS * per_day, 1),
        "price_per_node_hour": price,
        "money_per_day": None if price is None else round(per_day * price, 2),
        "money_per_month": None if price is None else round(MONTH_DAYS * per_day * price, 2),
        "currency": currency,
    }


def _hindsight(result: BacktestResult, target: float) -> dict[str, Any]:
    """The cheapest fixed forecast setting of the grid reaching `target` over the whole history
    (the most protective when none does), with the protection it reached and its overhead."""
    reactive = result.strategies["reactive"].metrics
    cands = [
        (g.setting, g.metrics.node_hours - reactive.node_hours, g.metrics.unserved_pod_minutes)
        for g in result.grid
        if g.family == "forecast"
    ]
    setting, reached = choose_fixed(cands, reactive.unserved_pod_minutes, target)
    overhead = next(c[1] for c in cands if c[0] == setting)
    return {
        "burst_quantile": setting.quantile,
        "scale_down_stabilization_seconds": setting.window,
        "protection": round(reached, 5),
        "overhead_node_hours": round(overhead, 3),
    }


def _warnings(promise: PromiseEntry, pool: Pool, target: float) -> list[str]:
    """What the user should know before trusting the figure."""
    out = []
    waited = promise.reactive_unserved_pod_minutes
    if waited < FEW_EVENTS:
        out.append(
            f"the figure rests on few events: without headroom only {waited:,.0f} pod-minutes "
            f"waited in {promise.days:g} scored days (under {FEW_EVENTS:g}: a burst or two), "
            "so one more or less moves it by several points"
        )
    if pool.forecast is not None and "burst_quantile" in pool.forecast.model_fields_set:
        out.append(
            "the pool sets forecast.burstQuantile: remove it when pasting protection: "
            "(protection chooses the quantile; validate refuses both)"
        )
    kept = promise.realized_protection
    if kept < target - 1e-9:
        out.append(
            f"walk-forward it kept {100 * kept:.1f}%, short of {pct(target)}: "
            + (
                promise.cause.says()
                if promise.cause is not None
                and (promise.short_days or promise.cause.cause == Cause.CAP)
                else "the margin it learns from past shortfalls came too late on this history"
            )
        )
    return out


def _static_at(points: list[Any], reactive_u: float, target: float) -> dict[str, Any] | None:
    """Static headroom at `target`: its overhead node-hours read along the static curve (the one
    reading of `core.curve`, as the backtest's frontier table reads it) and the fewest static
    placeholders reaching it (None when the curve never does)."""
    reading = cost_at(points, reactive_u, target)
    if reading.cost is None:
        return None
    for pt in sorted(points, key=lambda p: p.overhead):
        if protection(pt.unserved, reactive_u) >= target - 1e-12:
            return {
                "replicas": int(pt.label.removeprefix("N=")),
                "overhead_node_hours": round(reading.cost, 3),
                "protection": round(protection(pt.unserved, reactive_u), 5),
            }
    return None
