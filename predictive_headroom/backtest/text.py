"""The backtest as text: the strategy table and the two sweep tables (the headline sentence is in `results`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.backtest.results import NEGATIVE_CHANGE, BacktestResult, StrategyResult
from predictive_headroom.pages.format import fmt_signed as signed
from predictive_headroom.policy.durations import format_duration


def format_table(result: BacktestResult) -> str:
    """The strategy table as aligned text."""
    headers = [
        "strategy",
        "unserved pod-min",
        "node-hours",
        "cold starts",
        "overhead node-h",
        "x vs static",
    ]
    rows = [headers]
    for name, s in result.strategies.items():
        d = s.to_dict()
        x = "inf" if d["x"] is None else f"{d['x']:.2f}"
        rows.append(
            [
                name,
                f"{d['unserved_pod_minutes']:.0f}",
                f"{d['node_hours']:.1f}",
                str(d["cold_starts"]),
                signed(d["overhead_node_hours"], 1),
                x,
            ]
        )
    return columns(rows)


def format_dial(result: BacktestResult) -> str:
    """The quantile sweep as aligned text: what each burst quantile buys and costs."""
    return _sweep_table("quantile", [(f"{p.quantile:g}", p.forecast, p.naive) for p in result.dial])


def format_stabilization_dial(result: BacktestResult) -> str:
    """The stabilisation-window sweep as aligned text: what holding placeholders longer buys and costs."""
    rows = [
        (format_duration(timedelta(seconds=p.stabilization_seconds)), p.forecast, p.naive)
        for p in result.stabilization_dial
    ]
    return _sweep_table("window", rows)


def _sweep_table(first: str, points: list[tuple[str, StrategyResult, StrategyResult]]) -> str:
    headers = [
        first,
        "forecast unserved",
        "overhead node-h",
        "x",
        "naive unserved",
        "overhead node-h",
        "x",
    ]
    rows = [headers]
    for label, forecast, naive in points:
        row = [label]
        for s in (forecast, naive):
            d = s.to_dict()
            row += [
                f"{d['unserved_pod_minutes']:.0f}",
                signed(d["overhead_node_hours"], 1),
                "inf" if d["x"] is None else f"{d['x']:.2f}",
            ]
        rows.append(row)
    return columns(rows, first_left=False)


FRONTIER_COLUMNS = ("static", "proportional", "naive tuned", "forecast tuned", "forecast", "oracle")


def _cost(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_frontier(frontier: dict[str, Any]) -> str:
    """Each family's cost at each protection, the ratios and the setting tuning would choose now."""
    fams = [c for c in FRONTIER_COLUMNS if c in frontier["families"]]
    headers = [
        "protection",
        *fams,
        "static/forecast",
        "naive/forecast",
        "forecast/oracle",
        "choose",
    ]
    rows = [headers]
    for at in frontier["at"]:
        chosen = at.get("chosen")
        rows.append(
            [
                f"{100 * at['protection']:g}%",
                *(_cost(at["cost"][f]) for f in fams),
                *(
                    _times(at["ratios"][k])
                    for k in ("static/forecast", "naive/forecast", "forecast/oracle")
                ),
                chosen["label"] if chosen else "-",
            ]
        )
    return columns(rows, first_left=False)


def format_promise(promise: Sequence[PromiseEntry]) -> str:
    """The promise entries (`backtest --protection`) as a table: what each kept and cost, next to
    a fixed reserve re-chosen daily and static headroom in hindsight, and their cost over the
    promise's (the page's table, column for column)."""
    headers = [
        "asked",
        "kept",
        "unserved pod-min",
        "overhead node-h",
        "a day",
        "daily reserve",
        "static in hindsight",
        "reserve ÷ promise",
        "static ÷ promise",
    ]
    rows = [headers]
    for e in promise:
        per_day = e.overhead_node_hours_per_day
        rows.append(
            [
                f"{100 * e.protection:g}%",
                f"{100 * e.realized_protection:.1f}%",
                f"{e.unserved_pod_minutes:.0f}",
                f"{e.overhead_node_hours:.1f}",
                "-" if per_day is None else f"{per_day:.1f}",
                _reached(e.reserve_walk_forward_overhead_node_hours),
                _reached(e.static_hindsight_overhead_node_hours),
                _times(e.reserve_ratio),
                _times(e.static_ratio),
            ]
        )
    return columns(rows, first_left=False)


def _reached(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f}"


def format_interruptions(result: BacktestResult) -> str:
    """What each strategy leaves waiting on the interrupted cluster, as aligned text."""
    report = result.interruptions
    assert report is not None
    headers = [
        "strategy",
        "unserved pod-min",
        "without interruptions",
        "change in waiting",
        "node-hours",
        "node-h change",
        "interruptions",
    ]
    rows = [headers]
    for row in report.rows:
        d = row.to_dict()
        rows.append(
            [
                row.name,
                f"{d['unserved_pod_minutes']:.0f}",
                f"{d['unserved_pod_minutes_without_interruptions']:.0f}",
                signed(d["waiting_change_with_interruptions"], 0),
                f"{d['node_hours']:.1f}",
                signed(d["node_hours_change"], 1),
                str(d["interruptions"]),
            ]
        )
    table = columns(rows)
    if any(row.change < 0 for row in report.rows):
        table += f"\nchange in waiting: {NEGATIVE_CHANGE}"
    return table


def columns(rows: list[list[str]], first_left: bool = True) -> str:
    """`rows` (the header first) as aligned text columns two spaces apart, a rule under the
    header; numbers right-aligned, the first column left-aligned unless `first_left` is False."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if first_left and not i else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
