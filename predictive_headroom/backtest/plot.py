"""The backtest page: the cost/protection plot (PNG and inline SVG) and `templates/backtest.html`.

The page is rendered from the result's JSON (`BacktestResult.to_dict()`), so every number on it
is one a reader of `backtest --output json` can find, formatted by `pages.format`.
"""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from markupsafe import Markup
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

from predictive_headroom.backtest.frontier_plot import frontier_figure
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.results import NEGATIVE_CHANGE, BacktestResult, headline
from predictive_headroom.core.verdict import why_they_differ
from predictive_headroom.pages.format import fmt_compact, fmt_duration, fmt_number, fmt_utc
from predictive_headroom.pages.glossary import (
    BACKTEST_TERMS,
    BURST_TERMS,
    DIAL_TERMS,
    FRONTIER_TERMS,
    INTERRUPTION_TERMS,
    PROMISE_TERMS,
)
from predictive_headroom.pages.render import render
from predictive_headroom.pages.svg import RC, figure_svg
from predictive_headroom.replay.simulator import Metrics

logger = logging.getLogger(__name__)

_COLOURS = {
    "reactive": "#7f7f7f",
    "proportional": "#9467bd",
    "schedule": "#8c564b",
    "forecast": "#d62728",
    "naive": "#ff7f0e",
    "oracle": "#2ca02c",
}
STRATEGY_WORDS = {
    "reactive": "no placeholders: nodes are added only when pods are already waiting",
    "proportional": "the pool's cluster-proportional rule (one spare slot per node by default)",
    "schedule": "the pool's cron windows (a daytime window by default)",
    "forecast": "the whole planner with the forecast, refitted on only the past",
    "naive": "the same planner with a model-free burst baseline instead of the forecast",
    "oracle": "perfect foresight: exactly the growth of the next node lag",
}
# Settings shown with a label and a unit; any other key is shown by its name (`_seconds` as a duration).
SETTING_LABELS = {
    "data": "data",
    "points": "data points",
    "data_step_seconds": "data step",
    "pool": "pool replayed",
    "demand_per_replica": "demand one placeholder serves",
    "median_app_pods": "median app pods",
    "node_slots": "placeholder-sized slots per node",
    "lag_seconds": "node provisioning lag",
    "scale_down_delay_seconds": "an unneeded node is removed after",
    "hpa_hold_seconds": "app pods scale down after",
    "lead_seconds": "lead time",
    "quantile": "burst quantile",
    "burst_model": "burst model",
    "observation_delay_seconds": "observation delay",
    "scale_down_stabilization_seconds": "scale-down stabilisation",
    "warmup_seconds": "warm-up (not scored)",
    "scored_from": "scored from",
    "scored_to": "scored to",
    "scored_minutes": "scored span",
    "refit_every_seconds": "refit every",
    "refits": "refits",
    "models": "models fitted",
    "fit_seconds": "time spent fitting",
    "cores_per_node": "cores per simulated node",
    "schedule_windows": "schedule windows",
    "proportional_rule": "proportional rule",
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
        _declutter(fig, [], static_labels, dial_labels, markers=markers)
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
    corner while a few large N cross the plot. Returns the labels (for `_declutter`)."""
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
    the points (labels keep clear of them, `_declutter`)."""
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
    returns those labels (for `_declutter`)."""
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


_NUDGES = (
    [(3, 4), (3, -9)]
    + [(3, sign * (4 + 9 * k)) for k in range(1, 8) for sign in (1, -1)]
    + [(-30, 4), (-30, -9)]
    + [(-30, sign * (4 + 9 * k)) for k in range(1, 8) for sign in (1, -1)]
)
"""Offsets (points) a label may take, nearest first: beside its point, then stacked further up
or down, then to its left (a point at the right edge), so close dial settings (q=0.5, 0.7, 0.8 a hair apart in cost) each keep a readable label."""


def _text_box(t: Text, renderer: Any) -> Bbox:
    """The box of a label's text alone (an annotation's own extent includes its leader line),
    a little padded."""
    if isinstance(t, Annotation):
        t.update_positions(renderer)
    return Text.get_window_extent(t, renderer).expanded(1.05, 1.15)


def _merge_coinciding(labels: list[Annotation]) -> list[Annotation]:
    """Labels of one sweep whose points fall within a few pixels of each other become one label
    ('q=0.5, 0.7, 0.8' for settings that cost and leave unserved the same); the others are hidden.
    Returns the labels still shown."""
    groups: list[list[Annotation]] = []
    for t in labels:
        key = (t.get_color(), t.get_text().split("=", 1)[0])
        at = t.axes.transData.transform(t.xy)
        for group in groups:
            first = group[0]
            if (first.get_color(), first.get_text().split("=", 1)[0]) == key and (
                abs(first.axes.transData.transform(first.xy) - at) <= _SAME_POINT_PX
            ).all():
                group.append(t)
                break
        else:
            groups.append([t])
    for group in groups:
        if len(group) > 1:
            prefix = group[0].get_text().split("=", 1)[0]
            group[0].set_text(
                f"{prefix}=" + ", ".join(t.get_text().split("=", 1)[1] for t in group)
            )
            for t in group[1:]:
                t.set_visible(False)
    return [group[0] for group in groups]


_SAME_POINT_PX = 4.0


def _marker_boxes(markers: list[PathCollection], renderer: Any) -> list[Bbox]:
    """The pixel box of each strategy's point, with `_MARKER_PAD` points of room around it."""
    boxes = []
    for m in markers:
        half = (math.sqrt(float(m.get_sizes()[0])) / 2 + _MARKER_PAD) * renderer.points_to_pixels(1)
        for x, y in m.get_offset_transform().transform(m.get_offsets()):
            boxes.append(Bbox.from_extents(x - half, y - half, x + half, y + half))
    return boxes


_MARKER_PAD = 2.0


# Long on purpose: one placement loop (measure, try each nudge, keep the first clear one) read top to bottom.
def _declutter(
    fig: Figure, fixed: list[Text], *groups: list[Annotation], markers: list[PathCollection] = ()
) -> None:
    """Move each label, group by group and leftmost first within a group, to the first offset in
    `_NUDGES` where its box lies inside the axes and overlaps no label placed before it (nor the
    fixed ones, the axis labels, ticks and legend, nor a strategy's point in `markers`: a dial
    label never sits on the forecast's marker), with a thin leader line (under the labels) when
    it moved away; a label that fits nowhere is hidden (the tables still list it). Layout is
    settled first and the labels kept out of it, so the boxes measured here are where they are
    drawn."""
    if not any(groups):
        return
    for t in (t for group in groups for t in group):
        t.set_in_layout(False)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    groups = tuple(_merge_coinciding(group) for group in groups)
    ax = next(t for group in groups for t in group).axes
    inside = ax.get_window_extent(renderer)
    fixed = [
        *fixed,
        ax.xaxis.label,
        ax.yaxis.label,
        *ax.get_xticklabels(),
        *ax.get_yticklabels(),
    ]
    placed = [_text_box(t, renderer) for t in fixed if t.get_visible() and t.get_text()]
    legend = ax.get_legend()
    if legend is not None:
        placed.append(legend.get_window_extent(renderer))
    placed += _marker_boxes(list(markers), renderer)
    scale = fig.dpi / 72
    leaders: list[tuple[Annotation, tuple[float, float]]] = []
    for t in (t for group in groups for t in sorted(group, key=lambda a: a.xy[0])):
        home = t.xyann
        for dx, dy in [home] + [n for n in _NUDGES if n != home]:
            t.xyann = (dx, dy)
            box = _text_box(t, renderer)
            within = (
                box.x0 >= inside.x0
                and box.x1 <= inside.x1
                and box.y0 >= inside.y0
                and box.y1 <= inside.y1
            )
            if within and not any(box.overlaps(other) for other in placed):
                placed.append(box)
                if abs(dy - home[1]) * scale > 6:
                    leaders.append((t, (box.x0, box.y0 if dy > 0 else box.y1)))
                break
        else:
            t.set_visible(False)
    ax.set_xlim(ax.get_xlim())  # the leaders must not widen the axes
    ax.set_ylim(ax.get_ylim())
    to_data = ax.transData.inverted()
    for t, corner in leaders:
        (x, y) = to_data.transform(corner)
        ax.add_line(
            Line2D(
                [t.xy[0], x], [t.xy[1], y], color=t.get_color(), linewidth=0.4, alpha=0.7, zorder=4
            )
        )


def plot_png(result: BacktestResult) -> bytes:
    """The plot as PNG bytes (`backtest.png`)."""
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        plot_figure(result).savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _setting(key: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if key in ("scored_from", "scored_to"):
        return fmt_utc(value)
    if key == "scored_minutes":
        return fmt_duration(60 * value)
    if key.endswith("_seconds"):
        return fmt_duration(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} ×{v}" for k, v in value.items()) or "none"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return fmt_number(value)


def settings_rows(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """The settings as (label, value in human units) rows, known keys first in their order."""
    known = [k for k in SETTING_LABELS if k in settings and k != "demand_per_replica_source"]
    rows = [(SETTING_LABELS[k], _setting(k, settings[k])) for k in known]
    rows += [
        (k.removesuffix("_seconds").replace("_", " "), _setting(k, v))
        for k, v in settings.items()
        if k not in SETTING_LABELS and k != "demand_per_replica_source"
    ]
    if "demand_per_replica_source" in settings:
        rows = [
            (
                label,
                f"{value} ({settings['demand_per_replica_source']})"
                if label == SETTING_LABELS["demand_per_replica"]
                else value,
            )
            for label, value in rows
        ]
    return rows


def fmt_x(x: float | None) -> str:
    """The yardstick x for the tables: two decimals, '∞' when only static leaves demand unserved."""
    return "∞" if x is None else f"{x:.2f}"


def page_terms(data: dict[str, Any]) -> tuple[str, ...]:
    """The glossary words of the sections the page shows (`pages.glossary`)."""
    return (
        BACKTEST_TERMS
        + (DIAL_TERMS if data.get("dial") or data.get("stabilization_dial") else ())
        + (FRONTIER_TERMS if data.get("frontier") else ())
        + (PROMISE_TERMS if data.get("promise") else ())
        + (INTERRUPTION_TERMS if data.get("interruptions") else ())
        + (BURST_TERMS if data.get("burst") else ())
    )


def _verdict_notes(data: dict[str, Any]) -> list[str]:
    """Why the verdict against the user's N and the daemon's differ, where they do
    (`core.verdict.why_they_differ`)."""
    notes = []
    for e in data.get("promise") or []:
        daemon = ((e.get("daemon_now") or {}).get("promise") or {}).get("against_fixed")
        for c in data.get("current") or []:
            if note := why_they_differ(c.get("verdict") or {}, daemon):
                notes.append(note)
    return notes


def page_html(result: BacktestResult, svg: Markup | None = None) -> str:
    """The backtest as one self-contained HTML document (inline CSS and SVG, no scripts)."""
    data = result.to_dict()
    figure = (
        svg
        if svg is not None
        else figure_svg(plot_figure(result), "backtest", "unserved pod-minutes against node-hours")
    )
    return render(
        "predictive_headroom.backtest",
        "backtest.html",
        data=data,
        settings=data["settings"],
        headline=headline(result),
        promise=data.get("promise") or [],
        current=data.get("current") or [],
        verdict_notes=_verdict_notes(data),
        promise_sentences=[
            (sentence(e), e.realized_protection < e.protection - 1e-9) for e in result.promise or []
        ],
        interruptions=data.get("interruptions"),
        negative_change=NEGATIVE_CHANGE,
        component_plot=_component_plot(data.get("interruptions")),
        plot=figure,
        settings_rows=settings_rows(data["settings"]),
        words=STRATEGY_WORDS,
        fmt_x=fmt_x,
        burst=data.get("burst"),
        terms=page_terms(data),
        frontier=data.get("frontier"),
        frontier_plot=figure_svg(
            frontier_figure(
                data["frontier"],
                data.get("promise") or [],
                data.get("current") or [],
                data["settings"]["scored_minutes"] / 1440,
            ),
            "frontier-plot",
            "overhead node-hours against protection, one line per family",
        )
        if data.get("frontier")
        else None,
    )


def component_figure(component: dict[str, Any]) -> Figure:
    """The disruption component alone over the scored span: the placeholders it held (the most in
    each 5 minutes) as a step line, each interruption as a mark at the top."""
    times = np.array([np.datetime64(t.removesuffix("Z"), "ms") for t in component["times"]])
    held = np.asarray(component["placeholders"], dtype=float)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(11.2, 2.8), layout="constrained")
        ax = fig.add_subplot()
        locator = mdates.AutoDateLocator(minticks=5, maxticks=12)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.fill_between(times, held, step="post", color=_COMPONENT, alpha=0.2, linewidth=0)
        ax.step(
            times, held, where="post", color=_COMPONENT, linewidth=1.4, label="placeholders held"
        )
        top = max(float(held.max()) if held.size else 0.0, 1.0)
        hit = [np.datetime64(t.removesuffix("Z"), "ms") for t in component["interruptions"]]
        if hit:
            ax.plot(
                hit,
                [top * 1.12] * len(hit),
                linestyle="none",
                marker="v",
                color="#334155",
                markersize=6,
                label="a node interrupted (its notice)",
            )
        ax.set_ylim(0, top * 1.25 + 0.5)
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_ylabel("placeholders")
        ax.grid(True, color="#e2e8f0", linewidth=0.8)
        ax.set_axisbelow(True)
        fig.legend(loc="outside upper left", ncols=2, frameon=False, fontsize=9)
        return fig


_COMPONENT = "#db2777"
"""The disruption component's colour (the report's plan ribbon uses it too)."""


def _component_plot(interruptions: dict[str, Any] | None) -> Markup | None:
    component = (interruptions or {}).get("component")
    if not component or not component.get("times"):
        return None
    return figure_svg(
        component_figure(component),
        "component-plot",
        "placeholders the disruption component held, and the interruptions",
    )


def write_report(result: BacktestResult, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `backtest.png` and `backtest.html` into `out_dir` (created if needed); return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png_path, html_path = out / "backtest.png", out / "backtest.html"
    png_path.write_bytes(plot_png(result))
    html_path.write_text(page_html(result), encoding="utf-8")
    logger.info("wrote %s and %s", html_path, png_path)
    return html_path, png_path
