"""The backtest page (`templates/backtest.html`): the settings in human units, the tables, the
verdict notes, the disruption component's plot and the cost/protection plot (`backtest.plot`).

The page is rendered from the result's JSON (`BacktestResult.to_dict()`), so every number on it
is one a reader of `backtest --output json` can find, formatted by `pages.format`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from markupsafe import Markup
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.figure import Figure

from predictive_headroom.backtest.frontier_plot import frontier_figure
from predictive_headroom.backtest.plot import plot_figure, plot_png
from predictive_headroom.backtest.promise_measure import sentence
from predictive_headroom.backtest.results import NEGATIVE_CHANGE, BacktestResult, headline
from predictive_headroom.core.verdict import why_they_differ
from predictive_headroom.pages.format import fmt_duration, fmt_number, fmt_utc
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

logger = logging.getLogger(__name__)

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
