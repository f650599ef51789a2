"""What `tune` recommends from a backtest with a grid: the cheapest forecast setting reaching the
protection target, or static headroom or the proportional rule when they reach it for less (or
are the only ones that do), with the costs, runner-ups and the walk-forward check."""

from __future__ import annotations

from typing import Any

from predictive_headroom.backtest.frontier import families, protection
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.backtest.tuning import choose
from predictive_headroom.policy.config import Pool


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


def recommend(result: BacktestResult, pool: Pool, target: float) -> dict[str, Any]:
    """The recommendation as JSON: the chosen setting, its YAML, its cost against the other families
    at `target`, the runner-ups and the walk-forward check."""
    reactive = result.strategies["reactive"].metrics
    reactive_u = reactive.unserved_pod_minutes
    cands = [
        (g.setting, g.metrics.node_hours - reactive.node_hours, g.metrics.unserved_pod_minutes)
        for g in result.grid
        if g.family == "forecast"
    ]
    setting, reached = choose(cands, reactive_u, target)
    overhead = next(c[1] for c in cands if c[0] == setting)
    reaching = sorted(
        (c for c in cands if protection(c[2], reactive_u) >= target - 1e-12),
        key=lambda c: (c[1], c[2]),
    )
    at = result.frontier["at"][0]
    fams = families(result)
    static = _static_at(fams["static"], reactive_u, target)
    prop = result.strategies["proportional"]
    prop_protection = protection(prop.metrics.unserved_pod_minutes, reactive_u)
    wf_cost = at["cost"]["forecast tuned"]
    forecast_cost = wf_cost if wf_cost is not None else overhead
    out: dict[str, Any] = {
        "pool": pool.name,
        "protection_target": target,
        "history": {
            "from": _iso(float(result.times[0])),
            "to": _iso(float(result.times[-1])),
            "scored_from": _iso(result.settings.scored_from),
            "refits": result.settings.refits,
        },
        "reactive_unserved_pod_minutes": reactive_u,
        "chosen": {
            "burst_quantile": setting.quantile,
            "scale_down_stabilization_seconds": setting.window,
            "protection": round(reached, 5),
            "overhead_node_hours": round(overhead, 3),
        },
        "walk_forward": {
            "cost_at_target": wf_cost,
            "reached": at["reached"]["forecast tuned"],
        },
        "cost_at_target": at["cost"],
        "ratios": at["ratios"],
        "runner_ups": [
            {
                "burst_quantile": s.quantile,
                "scale_down_stabilization_seconds": s.window,
                "protection": round(protection(u, reactive_u), 5),
                "overhead_node_hours": round(c, 3),
            }
            for s, c, u in reaching[1:4]
        ],
        "static": static,
        "proportional": {
            "protection": round(prop_protection, 5),
            "overhead_node_hours": round(prop.overhead_node_hours, 3),
            "rule": "config" if pool.proportional else "linear: {nodesPerReplica: 1}",
        },
    }
    forecast_reaches = reached >= target - 1e-12
    cheaper = []
    if static is not None and (
        not forecast_reaches or static["overhead_node_hours"] < forecast_cost
    ):
        cheaper.append(("static", static["overhead_node_hours"]))
    if prop_protection >= target and (
        not forecast_reaches or prop.overhead_node_hours < forecast_cost
    ):
        cheaper.append(("proportional", prop.overhead_node_hours))
    if not forecast_reaches and not cheaper:
        out["status"] = "unreachable"
        out["yaml"] = []
        return out
    if cheaper:
        best = min(cheaper, key=lambda c: c[1])[0]
        out["status"] = f"{best}-cheaper"  # or: reaches the target where the forecast does not
        if best == "static":
            out["yaml"] = [f"minReplicas: {static['replicas']}"]  # type: ignore[index]
        else:
            out["yaml"] = (
                ["proportional: (keep the pool's rule)"]
                if pool.proportional
                else ["proportional:", "  linear: {nodesPerReplica: 1}"]
            )
    else:
        out["status"] = "forecast"
        out["yaml"] = [
            f"scaleDownStabilization: {setting.window / 60:g}m",
            "forecast:",
            f"  burstQuantile: {setting.quantile:g}",
        ]
    return out


def _static_at(points: list[Any], reactive_u: float, target: float) -> dict[str, Any] | None:
    """The fewest static placeholders reaching `target` (None when the curve never does)."""
    for pt in sorted(points, key=lambda p: p.overhead):
        if protection(pt.unserved, reactive_u) >= target - 1e-12:
            return {
                "replicas": int(pt.label.removeprefix("N=")),
                "overhead_node_hours": round(pt.overhead, 3),
                "protection": round(protection(pt.unserved, reactive_u), 5),
            }
    return None
