"""Cost at equal protection (docs/design.md, the backtest): what each strategy family pays to absorb a share
of the demand that would otherwise wait for a node.

Protection p of a strategy is the share of `reactive`'s unserved pod-minutes it removes (1 when
reactive leaves none). A family is a set of points (overhead node-hours over reactive, unserved
pod-minutes): static over N, forecast and naive over their grid of settings (fixed for the whole
run, chosen in hindsight like static's N), the same two tuned walk-forward to a range of targets
(the setting used each day chosen on the week before it), proportional and the oracle one
point each. The cost of reaching p is read along the family's Pareto frontier, linear in
protection between the two neighbours around p, no headroom (cost 0, protection 0) a point of
every family (`core.curve`, the one reading every command and page uses); None when no point
reaches p.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.core.curve import (
    Point,
    Reading,
    cost_at,
    pareto,
    protection,
    protection_at,
)
from predictive_headroom.replay.tuning import Setting, Tuned, Walk, choose, tune_walk_forward

TUNE_TARGETS = (0.5, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


def families(result: BacktestResult, tuned: Sequence[Tuned] = ()) -> dict[str, list[Point]]:
    """Each family's points from a backtest result (and its walk-forward tuned runs)."""
    reactive_nh = result.strategies["reactive"].metrics.node_hours
    out: dict[str, list[Point]] = {
        "static": [
            Point(m.node_hours - reactive_nh, m.unserved_pod_minutes, f"N={n}")
            for n, m in result.static_curve
        ]
    }
    for name in ("proportional", "oracle"):
        s = result.strategies[name]
        out[name] = [Point(s.overhead_node_hours, s.metrics.unserved_pod_minutes, name)]
    for family in ("forecast", "naive"):
        if result.grid:
            out[family] = [
                Point(
                    g.metrics.node_hours - reactive_nh,
                    g.metrics.unserved_pod_minutes,
                    g.setting.label(),
                )
                for g in result.grid
                if g.family == family
            ]
        else:
            s = result.strategies[family]
            pts = [Point(s.overhead_node_hours, s.metrics.unserved_pod_minutes, "default")]
            pts += [
                Point(
                    getattr(d, family).overhead_node_hours,
                    getattr(d, family).metrics.unserved_pod_minutes,
                    f"q={d.quantile:g}",
                )
                for d in result.dial
            ]
            pts += [
                Point(
                    getattr(w, family).overhead_node_hours,
                    getattr(w, family).metrics.unserved_pod_minutes,
                    f"w={w.stabilization_seconds / 60:g}m",
                )
                for w in result.stabilization_dial
            ]
            out[family] = pts
    for t in tuned:
        out.setdefault(f"{t.family} tuned", []).append(
            Point(
                t.metrics.node_hours - reactive_nh,
                t.metrics.unserved_pod_minutes,
                f"target {t.target:g}",
            )
        )
    return out


def tune_result(
    result: BacktestResult, targets: Sequence[float] = TUNE_TARGETS, **kwargs: Any
) -> list[Tuned]:
    """The forecast and the naive baseline tuned walk-forward to each target on `result.grid`."""
    if not result.grid:
        return []
    s = result.settings
    cluster = result.cluster
    default = Setting(s.quantile, s.scale_down_stabilization_seconds)
    delay = s.observation_delay_seconds or 0.0
    known_lag = int(-(-(delay + s.data_step_seconds) // 60))
    reactive = result.strategies["reactive"].run
    walk = Walk.daily(result.pods, cluster, result.scored_from, known_lag, s.max_replicas)
    return [
        tune_walk_forward(result.grid, family, target, reactive, walk, default, **kwargs)
        for family in ("forecast", "naive")
        for target in targets
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b <= 0:
        return None if a > 0 else 1.0
    return a / b


def frontier(
    result: BacktestResult, protections: Sequence[float], tuned: Sequence[Tuned] | None = None
) -> dict[str, Any]:
    """The frontier as JSON: every family's points, each family's cost at each protection, the
    ratios static/forecast, naive/forecast and forecast/oracle (forecast and naive tuned walk-forward
    when a grid was replayed), and the setting tuning would choose now for each protection."""
    if tuned is None:
        tuned = tune_result(result, sorted({*TUNE_TARGETS, *protections}))
    fams = families(result, tuned)
    reactive_u = result.strategies["reactive"].metrics.unserved_pod_minutes
    forecast_key = "forecast tuned" if "forecast tuned" in fams else "forecast"
    naive_key = "naive tuned" if "naive tuned" in fams else "naive"
    at = []
    for p in protections:
        readings = {name: cost_at(points, reactive_u, p) for name, points in fams.items()}
        cost = {name: r.cost for name, r in readings.items()}
        at.append(
            {
                "protection": p,
                "cost": {k: None if v is None else round(v, 3) for k, v in cost.items()},
                "reached": {k: round(r.reached, 5) for k, r in readings.items()},
                "read_from": {k: list(r.between) for k, r in readings.items()},
                "ratios": {
                    "static/forecast": _ratio(cost["static"], cost[forecast_key]),
                    "naive/forecast": _ratio(cost[naive_key], cost[forecast_key]),
                    "proportional/forecast": _ratio(cost["proportional"], cost[forecast_key]),
                    "forecast/oracle": _ratio(cost[forecast_key], cost["oracle"]),
                },
                "chosen": _chosen_now(result, p),
            }
        )
    return {
        "reactive_unserved_pod_minutes": reactive_u,
        "forecast_family": forecast_key,
        "naive_family": naive_key,
        "families": {
            name: [
                {
                    "label": pt.label,
                    "overhead_node_hours": round(pt.overhead, 3),
                    "unserved_pod_minutes": pt.unserved,
                    "protection": round(protection(pt.unserved, reactive_u), 5),
                }
                for pt in points
            ]
            for name, points in fams.items()
        },
        "at": at,
    }


def _chosen_now(result: BacktestResult, target: float) -> dict[str, Any] | None:
    """The forecast setting the whole scored history would pick for `target` (what `tune` says)."""
    if not result.grid:
        return None
    reactive_nh = result.strategies["reactive"].metrics.node_hours
    cands = [
        (g.setting, g.metrics.node_hours - reactive_nh, g.metrics.unserved_pod_minutes)
        for g in result.grid
        if g.family == "forecast"
    ]
    setting, got = choose(cands, result.strategies["reactive"].metrics.unserved_pod_minutes, target)
    overhead = next(c[1] for c in cands if c[0] == setting)
    return {
        "quantile": setting.quantile,
        "stabilization_seconds": setting.window,
        "label": setting.label(),
        "protection": round(got, 5),
        "overhead_node_hours": round(overhead, 3),
    }


__all__ = [
    "TUNE_TARGETS",
    "Point",
    "Reading",
    "cost_at",
    "families",
    "frontier",
    "pareto",
    "protection",
    "protection_at",
    "tune_result",
]
