"""Render a Report as one self-contained HTML page from `templates/report.html`: inline CSS, plots as inline SVG, no scripts.

Plots use matplotlib's object API (`matplotlib.figure.Figure`), so no pyplot state or global
backend is touched. Numbers are formatted by the `fmt_*` functions of `pages.format` (re-exported
here), the same ones a reader of report.json can use to find a figure on the page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from markupsafe import Markup
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from predictive_headroom.core.components import ORDER, registration, static_binding
from predictive_headroom.core.vocabulary import DisruptionSource
from predictive_headroom.pages.format import (
    fmt_compact,
    fmt_duration,
    fmt_lead,
    fmt_money,
    fmt_number,
    fmt_percent,
    fmt_ratio,
    fmt_share,
    fmt_time,
    forecast_sentence,
    mase_words,
)
from predictive_headroom.pages.glossary import BURST_TERMS, REPORT_TERMS
from predictive_headroom.pages.render import render
from predictive_headroom.pages.svg import RC as _RC
from predictive_headroom.pages.svg import figure_svg
from predictive_headroom.policy.echo import cut
from predictive_headroom.report.loop import lead_sentence, loop_rows, loop_sentence
from predictive_headroom.report.model import PoolReport, Report

logger = logging.getLogger(__name__)

__all__ = [
    "fmt_lead",
    "fmt_money",
    "fmt_number",
    "fmt_percent",
    "fmt_ratio",
    "fmt_share",
    "fmt_time",
    "render_html",
]

# Reason groups of the plan and their colours: each registered component's own
# (`core.components.REGISTRY`, in the order that names the reason), then the reasons that are not
# a component's name (schedule windows share the schedule colour).
REASON_COLOURS = {
    **{str(name): registration(name).colour for name in ORDER},
    "hold": "#d97706",
    "fixed-headroom": "#475569",
}


def reason_group(reason: str) -> str:
    """The plot colour group of a plan reason (`schedule:biz` -> `schedule`)."""
    return reason.split(":", 1)[0]


def _dates(seconds: np.ndarray | Iterable[float]) -> np.ndarray:
    return (np.asarray(seconds, dtype=float) * 1000).astype("datetime64[ms]")


def _axes(fig: Figure):
    ax = fig.add_subplot()
    locator = mdates.AutoDateLocator(minticks=5, maxticks=12)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.grid(True, color="#e2e8f0", linewidth=0.8)
    ax.set_axisbelow(True)
    return ax


def demand_svg(r: PoolReport, at: float) -> Markup:
    """History of the last days, the forecast with its band, the peaks and a 'now' line."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(11.2, 3.4), layout="constrained")
        ax = _axes(fig)
        if r.recent is not None and len(r.recent):
            ax.plot(
                _dates(r.recent.times),
                r.recent.values,
                color="#334155",
                linewidth=0.9,
                label="actual",
            )
        f = r.forecast
        if f is not None:
            width = r.pool.forecast.interval_width if r.pool.forecast else 0.8
            ax.fill_between(
                _dates(f.times),
                f.lower,
                f.upper,
                color="#93c5fd",
                alpha=0.45,
                linewidth=0,
                label=f"{width:.0%} interval",
            )
            ax.plot(_dates(f.times), f.yhat, color="#2563eb", linewidth=1.5, label="forecast")
        _draw_peaks(ax, r.peaks)
        ax.axvline(_dates([at])[0], color="#dc2626", linestyle="--", linewidth=1.2)
        ax.annotate(
            "now",
            (_dates([at])[0], 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            color="#dc2626",
        )
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(fmt_compact))
        ax.set_ylabel("demand")
        shown = [
            a
            for a in (
                r.recent.values if r.recent is not None else [],
                f.lower if f is not None else [],
            )
            if len(a)
        ]
        if shown and min(float(np.min(a)) for a in shown) < 0.3 * max(
            float(np.max(a)) for a in shown
        ):
            ax.set_ylim(bottom=0)
        fig.legend(loc="outside upper left", ncols=5, frameon=False, fontsize=9)
        return figure_svg(
            fig, f"demand-{r.pool.name}", f"demand and forecast for pool {r.pool.name}"
        )


def _draw_peaks(ax: Any, peaks: Sequence[Any]) -> None:
    """Mark each coming peak on `ax` with a red triangle numbered from 1 (the peaks table's order)."""
    for n, p in enumerate(peaks, 1):
        ax.plot(
            _dates([p.at]),
            [p.demand],
            marker="v",
            color="#dc2626",
            markersize=7,
            linestyle="none",
            label="next peaks" if n == 1 else None,
        )
        ax.annotate(
            str(n),
            (_dates([p.at])[0], p.demand),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            color="#dc2626",
            fontweight="bold",
        )


def _runs(groups: list[str]) -> list[tuple[int, int, str]]:
    """(first, last index exclusive, group) of each stretch with the same reason group."""
    runs, first = [], 0
    for k in range(1, len(groups) + 1):
        if k == len(groups) or groups[k] != groups[first]:
            runs.append((first, k, groups[first]))
            first = k
    return runs


def plan_svg(r: PoolReport) -> Markup:
    """Planned placeholder pods over the horizon as a step line, with a ribbon of the winning reason."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(11.2, 3.3), layout="constrained")
        ax, ribbon = fig.subplots(2, 1, sharex=True, height_ratios=[8, 1])
        for a in (ax, ribbon):
            locator = mdates.AutoDateLocator(minticks=5, maxticks=12)
            a.xaxis.set_major_locator(locator)
            a.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.grid(True, color="#e2e8f0", linewidth=0.8)
        ax.set_axisbelow(True)
        t, d = r.plan_times, r.plan_desired
        end = t[-1] + (r.step_seconds or 0.0)
        _draw_windows(ax, r.windows)
        xs, ys = _dates(np.append(t, end)), np.append(d, d[-1:])
        ax.fill_between(xs, ys, step="post", color="#94a3b8", alpha=0.25, linewidth=0)
        ax.step(xs, ys, where="post", color="#1e293b", linewidth=1.6)
        groups = [reason_group(x) for x in r.plan_reasons]
        for first, last, group in _runs(groups):
            stop = t[last] if last < t.size else end
            ribbon.axvspan(
                _dates([t[first]])[0],
                _dates([stop])[0],
                color=REASON_COLOURS.get(group, "#334155"),
                linewidth=0,
            )
        ribbon.set_yticks([])
        ribbon.set_ylabel("why", rotation=0, ha="right", va="center")
        for side in ("left", "top", "right"):
            ribbon.spines[side].set_visible(False)
        top = max(float(d.max()) if d.size else 0.0, 1.0)
        top = _draw_cap(ax, *static_binding(r.pool), top)
        for p in r.peaks:
            ax.axvline(_dates([p.at])[0], color="#dc2626", linestyle=":", linewidth=0.9)
        handles = [Patch(color=REASON_COLOURS[g], label=g) for g in REASON_COLOURS if g in groups]
        if r.windows:
            handles.append(
                Patch(color=REASON_COLOURS["schedule"], alpha=0.15, label="schedule window open")
            )
        fig.legend(
            handles=handles, loc="outside lower left", ncols=len(handles), frameon=False, fontsize=9
        )
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_ylim(0, top * 1.2 + 0.5)
        ax.set_ylabel("placeholder pods")
        ax.tick_params(labelbottom=False)
        return figure_svg(
            fig, f"plan-{r.pool.name}", f"planned placeholder pods for pool {r.pool.name}"
        )


def _draw_windows(ax: Any, windows: Sequence[tuple[str, float, float]]) -> None:
    """Shade each open schedule window (name, from, to) on `ax` and label it with its name."""
    for name, a, b in windows:
        ax.axvspan(
            _dates([a])[0],
            _dates([b])[0],
            color=REASON_COLOURS["schedule"],
            alpha=0.08,
            linewidth=0,
        )
        ax.annotate(
            name,
            (_dates([a])[0], 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -11),
            textcoords="offset points",
            color=REASON_COLOURS["schedule"],
            fontsize=8,
        )


def _draw_cap(ax: Any, name: str, cap: int, top: float) -> float:
    """Draw the pool's smallest cap known from its fields (`name`: maxReplicas, or limits when
    they allow fewer) at `cap` as a dotted line when it is near the plan's `top`, else note it is
    off the chart; returns the top the y axis must reach."""
    words = "maxReplicas" if name == "max" else name
    colour = REASON_COLOURS.get(name, REASON_COLOURS["max"])
    if cap <= 1.5 * top + 2:
        top = max(top, cap)
        ax.axhline(cap, color=colour, linestyle=":", linewidth=1)
        ax.annotate(
            f"{words} {cap}",
            (1.0, cap),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            color=colour,
            fontsize=8,
        )
    else:
        ax.annotate(
            f"{words} {cap} (off the chart)",
            (1.0, 1.0),
            xycoords="axes fraction",
            xytext=(-4, -11),
            textcoords="offset points",
            ha="right",
            color=colour,
            fontsize=8,
        )
    return top


def past_svg(r: PoolReport) -> Markup:
    """Earlier forecasts against what really happened."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(11.2, 2.9), layout="constrained")
        ax = _axes(fig)
        times = np.concatenate([p.times for p in r.past])
        actual = np.concatenate([p.actual for p in r.past])
        order = np.unique(times, return_index=True)[1]
        ax.plot(_dates(times[order]), actual[order], color="#334155", linewidth=1, label="actual")
        shades = ["#bfdbfe", "#93c5fd", "#60a5fa", "#3b82f6", "#1d4ed8"][-len(r.past) :]
        for p, colour in zip(r.past, shades, strict=False):
            ax.plot(
                _dates(p.times),
                p.yhat,
                color=colour,
                linewidth=1.4,
                label=f"made {fmt_time(p.made_at)}",
            )
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(fmt_compact))
        ax.set_ylabel("demand")
        fig.legend(loc="outside lower left", ncols=len(r.past) + 1, frameon=False, fontsize=8)
        return figure_svg(
            fig,
            f"past-{r.pool.name}",
            f"past forecasts against actual demand for pool {r.pool.name}",
        )


def _when(iso_text: object) -> str:
    try:
        return fmt_time(str(iso_text))
    except ValueError:
        return str(iso_text)


def _chart(draw: Callable[..., Markup], r: PoolReport, *args: Any) -> Markup:
    """`draw(r, *args)`, or a line saying why the chart is left out when its values cannot be
    drawn (overflowing or non-finite values); a chart never stops the report."""
    try:
        with np.errstate(all="ignore"):
            return draw(r, *args)
    except (ValueError, OverflowError, FloatingPointError, ZeroDivisionError) as exc:
        logger.warning("pool %s: %s left out of the report: %s", r.pool.name, draw.__name__, exc)
        return Markup(
            '<p class="muted">chart left out: its values cannot be drawn ({})</p>'
        ).format(cut(exc))


def _cost_rows(r: PoolReport) -> list[list[str]]:
    """The cost table of one pool: requests, horizon, pod/CPU/GiB-hours, peak pods (and money
    when the policy prices a pod)."""
    c = r.cost
    cost_rows = [
        ["placeholder pod requests", f"{r.pool.placeholder.cpu} CPU, {r.pool.placeholder.memory}"],
        ["horizon", f"{c.hours:.0f} h"],
        ["pod-hours", fmt_number(c.replica_hours)],
        ["CPU-hours", fmt_number(c.cpu_hours)],
        ["GiB-hours", fmt_number(c.gib_hours)],
        ["peak pods", str(c.peak_replicas)],
        ["pod-hours if the peak count were kept all the time", fmt_number(c.static_replica_hours)],
    ]
    if c.money is not None:
        cost_rows.append(["cost", fmt_money(c.money, c.currency)])
        cost_rows.append(["priced as", c.assumed])
    return cost_rows


def _pool_view(r: PoolReport, at: float) -> dict[str, Any]:
    """The figures and table rows of one pool; the template lays them out."""
    acc = r.accuracy or {}
    has_demand = r.forecast is not None or (r.recent is not None and len(r.recent) > 0)
    return {
        "r": r,
        "demand_svg": _chart(demand_svg, r, at) if has_demand else None,
        "shown_days": min(r.history_seconds, 7 * 86400) / 86400,
        "plan_svg": _chart(plan_svg, r),
        "past_svg": _chart(past_svg, r) if r.past else None,
        "peak_rows": [
            [
                str(n),
                fmt_time(p.at),
                fmt_number(p.demand),
                fmt_number(p.upper),
                str(p.warm_replicas),
                fmt_time(p.warm_from),
                fmt_lead(p.lead_seconds),
            ]
            for n, p in enumerate(r.peaks, 1)
        ],
        "cost_rows": _cost_rows(r),
        "held_back": f"{acc['points']} points from {_when(acc['holdout_start'])}"
        if "points" in acc and "holdout_start" in acc
        else "",
        "past_rows": [
            [fmt_time(p.made_at), str(p.times.size), fmt_percent(p.mape), fmt_share(p.coverage)]
            for p in r.past
        ],
        "changes": [
            [fmt_time(t), str(int(d)), why]
            for k, (t, d, why) in enumerate(
                zip(r.plan_times, r.plan_desired, r.plan_reasons, strict=False)
            )
            if k == 0 or (d, why) != (r.plan_desired[k - 1], r.plan_reasons[k - 1])
        ],
        "burst": r.burst,  # the burst allowance of the last day, when the report carries one
        "loop": {
            "sentence": loop_sentence(r.loop, at),
            "lead": lead_sentence(r.loop),
            "rows": loop_rows(r.loop),
        }
        if r.loop is not None
        else None,
        "target_conditions": [[c.type, c.status, c.reason, c.message] for c in r.target_conditions],
        "promise": promise_view(r.promise),
        "accuracy_words": mase_words(acc) if acc else "",
        "disruption_now": disruption_sentence(r.now.details, r.now.components.get("disruption")),
        "forecast_now": forecast_sentence(
            r.now.details,
            r.now.components.get("forecast"),
            r.demand_per_replica,
            fmt_lead(r.lead_seconds),
        ),
    }


def promise_view(promise: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the page says of a `protection:` pool's re-tune (report.json's `promise`): what it
    kept, what it holds and why, and whether it fell short (a warning). Keys the re-tune does not
    give are left out of the words."""
    if not promise:
        return None
    asked, kept = promise.get("asked"), promise.get("kept")
    if promise.get("in_full"):
        said = str(promise["in_full"])
    elif asked is not None:
        days = promise.get("days_judged")
        over = (
            f"kept {100 * kept:.1f}% over the last {f'{days:g} days' if days else 'week'}"
            if kept is not None
            else "not measured yet (no week replayed)"
        )
        said = f"Protection asked {100 * asked:g}%, {over}"
    else:
        said = str(promise.get("says") or "")
    status = promise.get("status")
    if status and status not in said:
        said += f" ({status})"
    return {
        "kept": said[:1].upper() + said[1:] + ("" if said.endswith(".") else "."),
        "holding": promise.get("holding") or _holding(promise),
        "reason": promise.get("reason") or "",
        "short": bool(promise.get("short")),
        "price": (promise.get("price") or {}).get("says") or "",
        "cause": (promise.get("cause") or {}).get("says") or "",
        "against_fixed": (promise.get("against_fixed") or {}).get("says") or "",
        "shadow": (promise.get("shadow") or {}).get("says") or "",
        "unseen_weeks": (promise.get("unseen_weeks") or {}).get("says") or "",
    }


def _holding(promise: Mapping[str, Any]) -> str:
    """The setting and reserve a re-tuned pool plans with, in words ('' when not given)."""
    parts = []
    if promise.get("burst_quantile") is not None:
        parts.append(f"burst quantile {promise['burst_quantile']:g}")
    window = promise.get("scale_down_stabilization_seconds")
    if window is not None:
        parts.append(f"scale-down stabilisation {fmt_duration(window)}")
    reserve = promise.get("reserve")
    if reserve is not None:
        parts.append(f"a reserve of {reserve} placeholder{'s' if reserve != 1 else ''}")
    return ", ".join(parts)


def disruption_sentence(details: Mapping[str, Any], value: int | None) -> str:
    """The disruption component now in plain words ('' when it is off or holds nothing)."""
    if not value:
        return ""
    parts = []
    room, leaving = details.get("disruption_room", 0), details.get("nodes_leaving", 0)
    if room:
        how = (
            "estimated from their allocatable (pods are not read)"
            if details.get("disruption_source") == DisruptionSource.ESTIMATE
            else "their pods' requests"
        )
        parts.append(
            f"{room} placeholder{'s' if room != 1 else ''} for the pods of {leaving} node"
            f"{'s' if leaving != 1 else ''} on their way out ({how})"
        )
    reserve = details.get("spot_reserve", 0)
    if reserve:
        parts.append(f"{reserve} as a spot reserve for interruptions within the lead time")
    return f"Disruption: {' and '.join(parts)}."


def render_html(report: Report) -> str:
    """The whole report as one HTML document with everything inline (no network needed to view)."""
    pools = [_pool_view(r, report.at) for r in report.pools]
    return render(
        "predictive_headroom.report",
        "report.html",
        report=report,
        pools=pools,
        warnings=sum(len(r.notices) for r in report.pools),
        terms=REPORT_TERMS + (BURST_TERMS if any(r.burst for r in report.pools) else ()),
    )
