"""The backtest as text: the headline sentence, the strategy table and the two sweep tables."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from predictive_headroom.durations import format_duration

if TYPE_CHECKING:
    from predictive_headroom.backtest import BacktestResult, StrategyResult


def headline(result: BacktestResult) -> str:
    """How much less unserved demand forecast leaves than static headroom at equal cost, and
    what static headroom costs to protect as well as forecast does."""
    return f"{_equal_cost(result)}; {_equal_protection(result)}"


def _equal_protection(result: BacktestResult) -> str:
    f = result.strategies["forecast"]
    reactive_nh = result.strategies["reactive"].metrics.node_hours
    unserved = f.metrics.unserved_pod_minutes
    match = next(((n, m) for n, m in result.static_curve if m.unserved_pod_minutes <= unserved), None)
    if match is None:
        return f"no static headroom up to {result.static_curve[-1][0]} placeholders leaves as little unserved demand"
    n, m = match
    static_overhead = m.node_hours - reactive_nh
    if static_overhead <= 0:
        return "static headroom of 0 placeholders protects as well"
    return (
        f"static headroom needs {n} placeholder(s), {static_overhead:.1f} overhead node-hours, to leave as little "
        f"unserved demand; forecast spends {f.overhead_node_hours:.1f} ({100 * f.overhead_node_hours / static_overhead:.0f}% of that)"
    )


def _equal_cost(result: BacktestResult) -> str:
    f = result.strategies["forecast"]
    x = f.x
    if x is None:
        return "at the same node-hours as static headroom, forecast leaves no unserved demand at all"
    if x == 0:
        return (f"at the same node-hours as static headroom, forecast leaves {f.metrics.unserved_pod_minutes:.0f} "
                "unserved pod-minutes where static headroom leaves none")
    if x >= 1:
        return f"at the same node-hours as static headroom, forecast leaves {100 * (1 - 1 / x):.0f}% less unserved demand ({x:.1f}x less)"
    return f"at the same node-hours as static headroom, forecast leaves {100 * (1 / x - 1):.0f}% more unserved demand"


def format_table(result: BacktestResult) -> str:
    """The strategy table as aligned text."""
    headers = ["strategy", "unserved pod-min", "node-hours", "cold starts", "overhead node-h", "x vs static"]
    rows = [headers]
    for name, s in result.strategies.items():
        d = s.to_dict()
        x = "inf" if d["x"] is None else f"{d['x']:.2f}"
        rows.append([name, f"{d['unserved_pod_minutes']:.0f}", f"{d['node_hours']:.1f}", str(d["cold_starts"]), f"{d['overhead_node_hours']:+.1f}", x])
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_dial(result: BacktestResult) -> str:
    """The quantile sweep as aligned text: what each burst quantile buys and costs."""
    return _sweep_table("quantile", [(f"{p.quantile:g}", p.forecast, p.naive) for p in result.dial])


def format_stabilization_dial(result: BacktestResult) -> str:
    """The stabilisation-window sweep as aligned text: what holding placeholders longer buys and costs."""
    rows = [(format_duration(timedelta(seconds=p.stabilization_seconds)), p.forecast, p.naive) for p in result.stabilization_dial]
    return _sweep_table("window", rows)


def _sweep_table(first: str, points: list[tuple[str, StrategyResult, StrategyResult]]) -> str:
    headers = [first, "forecast unserved", "overhead node-h", "x", "naive unserved", "overhead node-h", "x"]
    rows = [headers]
    for label, forecast, naive in points:
        row = [label]
        for s in (forecast, naive):
            d = s.to_dict()
            row += [f"{d['unserved_pod_minutes']:.0f}", f"{d['overhead_node_hours']:+.1f}", "inf" if d["x"] is None else f"{d['x']:.2f}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
