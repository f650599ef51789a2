"""The frontier chart of the backtest page: overhead node-hours against protection, per family."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib import ticker
from matplotlib.figure import Figure

from predictive_headroom.pages.format import fmt_compact
from predictive_headroom.pages.svg import RC

COLOURS = {
    "proportional": "#9467bd",
    "forecast": "#d62728",
    "naive": "#ff7f0e",
    "oracle": "#2ca02c",
}
PROMISE_COLOUR = "#7f1d1d"
"""The product's curve: `protection:` walked forward."""
CURRENT_COLOUR = "#facc15"
"""The fixed N the user runs today (`--current`)."""
_FAMILY_STYLE = {
    "static": ("#1f77b4", "-", "o"),
    "proportional": (COLOURS["proportional"], "", "s"),
    "forecast": (COLOURS["forecast"], ":", "d"),
    "naive": (COLOURS["naive"], ":", "d"),
    "forecast tuned": (COLOURS["forecast"], "-", "o"),
    "naive tuned": (COLOURS["naive"], "--", "o"),
    "oracle": (COLOURS["oracle"], "", "*"),
}


def frontier_figure(
    frontier: dict[str, Any],
    promise: Sequence[dict[str, Any]] = (),
    current: Sequence[dict[str, Any]] = (),
    days: float = 0.0,
) -> Figure:
    """Overhead node-hours against protection: each family's Pareto frontier as a line, the oracle's
    point, the asked protections as vertical lines and the setting `tune` would choose marked (a
    cross named in the legend, not a label on the lines); with `promise` (JSON entries) the
    product's curve, `protection:` walked forward at each level asked, and with `current` (JSON
    `current`, per day over `days` scored days) each fixed N the user runs as a point of the static
    curve. Every name is in the legend, none on the plot, so no label covers another or a line."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(11.2, 5.0), layout="constrained")
        ax = fig.add_subplot()
        _families(ax, frontier["families"])
        for at in frontier["at"]:
            ax.axvline(100 * at["protection"], color="#94a3b8", linewidth=0.8, linestyle="--")
            chosen = at.get("chosen")
            if chosen:
                ax.scatter(
                    [100 * chosen["protection"]],
                    [chosen["overhead_node_hours"]],
                    s=140,
                    marker="X",
                    color=COLOURS["forecast"],
                    edgecolors="black",
                    linewidths=0.6,
                    zorder=4,
                    label=f"choose: {chosen['label']} for {100 * at['protection']:g}%",
                )
        _promise_and_current(ax, promise, current, days)
        shown = [100 * at["protection"] for at in frontier["at"]]
        shown += [100 * e["realized_protection"] for e in promise]
        shown += [100 * c["kept"] for c in current]
        lowest = min(shown, default=90.0)
        ax.set_xlim(max(0.0, min(50.0, lowest - 20)), 100.5)
        ax.set_xlabel("protection: % of the pod-minutes waiting without headroom that are absorbed")
        ax.set_ylabel("overhead node-hours (cost)")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(fmt_compact))
        ax.grid(True, color="#e2e8f0", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.legend(fontsize=8, loc="upper left")
        return fig


def _families(ax: Any, families: dict[str, Any]) -> None:
    """Each family's Pareto frontier (the cheapest point at each protection reached) as a line."""
    for name, points in families.items():
        colour, line, marker = _FAMILY_STYLE.get(name, ("black", "-", "o"))
        front, best = [], -1.0
        for pt in sorted(points, key=lambda q: (q["overhead_node_hours"], -q["protection"])):
            if pt["protection"] > best:
                front.append(pt)
                best = pt["protection"]
        ax.plot(
            [100 * pt["protection"] for pt in front],
            [pt["overhead_node_hours"] for pt in front],
            line or "none",
            marker=marker,
            markersize=12 if name == "oracle" else 4,
            color=colour,
            label=name if name != "forecast" else "forecast, each fixed setting",
            alpha=0.6 if name in ("forecast", "naive") else 1.0,
            zorder=3 if name in ("oracle", "forecast tuned") else 2,
        )


def _promise_and_current(
    ax: Any, promise: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]], days: float
) -> None:
    """The promise's walk-forward points as one line (by protection kept) and each user's N as
    a large marker, named in the legend."""
    if promise:
        points = sorted((100 * e["realized_protection"], e["overhead_node_hours"]) for e in promise)
        asked = ", ".join(f"{100 * e['protection']:g}%" for e in promise)
        ax.plot(
            [x for x, _ in points],
            [y for _, y in points],
            "-",
            marker="D",
            markersize=6,
            color=PROMISE_COLOUR,
            linewidth=2.0,
            label=f"protection: walk-forward (asked {asked})",
            zorder=4,
        )
    for c in current:
        n = c["replicas"]
        ax.scatter(
            [100 * c["kept"]],
            [c["overhead_node_hours_per_day"] * days],
            s=160,
            marker="*",
            color=CURRENT_COLOUR,
            edgecolors="black",
            linewidths=0.6,
            zorder=5,
            label=f"your fixed {n}: {100 * c['kept']:.1f}% for "
            f"{c['overhead_node_hours_per_day']:,.1f} overhead node-hours a day",
        )
