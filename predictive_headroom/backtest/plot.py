"""The backtest's cost/protection plot (PNG and the page's inline SVG): the static curve as a line,
strategies and dial sweeps as points, each labelled where it stays readable (`plot_labels`).
The page around it is `backtest.page`.
"""

from __future__ import annotations

import io

import matplotlib
import numpy as np
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from predictive_headroom.backtest.plot_labels import declutter
from predictive_headroom.backtest.results import BacktestResult
from predictive_headroom.pages.format import fmt_compact, fmt_duration
from predictive_headroom.pages.svg import RC
from predictive_headroom.replay.simulator import Metrics

_COLOURS = {
    "reactive": "#7f7f7f",
    "proportional": "#9467bd",
    "schedule": "#8c564b",
    "forecast": "#d62728",
    "naive": "#ff7f0e",
    "oracle": "#2ca02c",
}


def plot_figure(result: BacktestResult) -> Figure:
    """Unserved pod-minutes against node-hours: the static curve as a line, strategies and dials as points."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(11.2, 5.6), layout="constrained")
        ax = fig.add_subplot()
        _plot_static_curve(ax, result)
        markers = _plot_strategies(ax, result)
        dial_labels = _plot_sweeps(ax, result)
        _style_axes(ax)
        static_labels = _label_static_curve(fig, ax, result)
        declutter(fig, [], static_labels, dial_labels, markers=markers)
        return fig


def _plot_static_curve(ax: Axes, result: BacktestResult) -> None:
    """The static curve as a line (its labels: `_label_static_curve`)."""
    nh = [m.node_hours for _, m in result.static_curve]
    un = [m.unserved_pod_minutes for _, m in result.static_curve]
    ax.plot(nh, un, "-o", color="#1f77b4", markersize=3, label="static N placeholders")


STATIC_LABEL_GAP_PX = 70.0
"""The least distance on the drawn plot between two labelled points of the static curve."""
STATIC_SAME_PLACE_PX = 8.0
"""Points of the static curve this close to a labelled one are named in its label (`N=0, 1`)."""


def _label_static_curve(fig: Figure, ax: Axes, result: BacktestResult) -> list[Annotation]:
    """Label points of the static curve N=… spread along it as drawn: the first point, then each
    point at least `STATIC_LABEL_GAP_PX` from the last labelled one, and the last (when clear of
    it); a label names every N drawn on its point (within `STATIC_SAME_PLACE_PX`: `N=0, 1`,
    `N=0–54`). Chosen by place, not by index: on a wide x-axis the first hundred N crowd into one
    corner while a few large N cross the plot. Returns the labels (for `declutter`)."""
    if not result.static_curve:
        return []
    fig.draw_without_rendering()  # the axes' size and limits as they will be drawn
    at = ax.transData.transform(
        [(m.node_hours, m.unserved_pod_minutes) for _, m in result.static_curve]
    )
    chosen = [0]
    for k in range(1, len(at)):
        if np.hypot(*(at[k] - at[chosen[-1]])) >= STATIC_LABEL_GAP_PX:
            chosen.append(k)
    last = len(at) - 1
    if chosen[-1] != last and np.hypot(*(at[last] - at[chosen[-1]])) >= STATIC_LABEL_GAP_PX / 2:
        chosen.append(last)
    labels = []
    for k in chosen:
        same = [
            n
            for (n, _), xy in zip(result.static_curve, at, strict=True)
            if np.hypot(*(xy - at[k])) < STATIC_SAME_PLACE_PX
        ]
        names = ", ".join(map(str, same)) if len(same) < 3 else f"{same[0]}–{same[-1]}"
        m = result.static_curve[k][1]
        labels.append(
            ax.annotate(
                f"N={names}",
                (m.node_hours, m.unserved_pod_minutes),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        )
    return labels


def _plot_strategies(ax: Axes, result: BacktestResult) -> list[PathCollection]:
    """One point per strategy in its colour (forecast and oracle larger, oracle a star); returns
    the points (labels keep clear of them, `declutter`)."""
    return [
        ax.scatter(
            [s.metrics.node_hours],
            [s.metrics.unserved_pod_minutes],
            s=160 if name in ("oracle", "forecast") else 60,
            marker="*" if name == "oracle" else "o",
            color=_COLOURS.get(name, "black"),
            label=name,
            zorder=3,
            edgecolors="black",
            linewidths=0.5,
        )
        for name, s in result.strategies.items()
    ]


_SWEEPS = (
    ("dial", "quantile", "d", "burst quantile dial", lambda q: f"q={q:g}"),
    (
        "stabilization_dial",
        "stabilization_seconds",
        "s",
        "stabilisation window dial",
        lambda w: f"w={fmt_duration(w)}",
    ),
)
"""(result attribute, setting key, marker, legend words, label of a setting) of each dial sweep."""


def _plot_sweeps(ax: Axes, result: BacktestResult) -> list[Annotation]:
    """Each dial sweep of the forecast and the naive baseline as a line with a label per setting;
    returns those labels (for `declutter`)."""
    dial_labels: list[Annotation] = []
    for attr, key, marker, what, label in _SWEEPS:
        for name, style in (
            ("forecast", "-" if marker == "d" else ":"),
            ("naive", "--" if marker == "d" else ":"),
        ):
            points = [(getattr(p, key), getattr(p, name).metrics) for p in getattr(result, attr)]
            if not points:
                continue
            ax.plot(
                [m.node_hours for _, m in points],
                [m.unserved_pod_minutes for _, m in points],
                style,
                marker=marker,
                markersize=4,
                color=_COLOURS[name],
                alpha=0.8,
                label=f"{name}, {what}",
            )
            dial_labels += [
                _dial_label(ax, label(value), m, _COLOURS[name], -9 if marker == "d" else 4)
                for value, m in points
            ]
    return dial_labels


def _dial_label(ax: Axes, text: str, m: Metrics, colour: str, dy: float) -> Annotation:
    """A setting's label beside its point (`dy` points up), on a white box so lines stay behind it."""
    return ax.annotate(
        text,
        (m.node_hours, m.unserved_pod_minutes),
        fontsize=7,
        color=colour,
        xytext=(3, dy),
        textcoords="offset points",
        bbox={
            "boxstyle": "square,pad=0.1",
            "facecolor": "white",
            "edgecolor": "none",
            "alpha": 0.8,
        },
        zorder=5,
    )


def _style_axes(ax: Axes) -> None:
    """Symlog unserved axis, both axes ticked in compact human units, labels, grid and legend."""
    ax.set_yscale("symlog", linthresh=1.0)
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(fmt_compact))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(fmt_compact))
    ax.set_xlabel("node-hours (cost)")
    ax.set_ylabel("unserved pod-minutes (lower is better)")
    ax.grid(True, color="#e2e8f0", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8)


def plot_png(result: BacktestResult) -> bytes:
    """The plot as PNG bytes (`backtest.png`)."""
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        plot_figure(result).savefig(buf, format="png", dpi=100)
    return buf.getvalue()
