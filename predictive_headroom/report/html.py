"""Render a Report as one self-contained HTML page: inline CSS, plots as inline SVG, no scripts.

Plots use matplotlib's object API (`matplotlib.figure.Figure`), so no pyplot state or global
backend is touched. Numbers are formatted by the `fmt_*` functions below, the same ones a reader
of report.json can use to find a figure on the page.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable
from datetime import datetime

import matplotlib
import numpy as np
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from predictive_headroom.core.series import from_epoch
from predictive_headroom.report.analysis import Peak
from predictive_headroom.report.build import PoolReport, Report

# Reason groups of the plan and their colours (schedule windows share the schedule colour).
REASON_COLOURS = {
    "schedule": "#7c3aed",
    "forecast": "#2563eb",
    "proportional": "#059669",
    "min": "#64748b",
    "max": "#dc2626",
    "hold": "#d97706",
}
_RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 10, "axes.spines.top": False, "axes.spines.right": False}


def fmt_number(x: float | None) -> str:
    """A demand or cost figure for people: 16,778 / 123.4 / 0.48 ('n/a' when missing)."""
    if x is None:
        return "n/a"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.2f}"


def fmt_share(x: float | None) -> str:
    """A share 0..1 as a percentage, e.g. 0.83 -> '83 %'."""
    return "n/a" if x is None else f"{100 * x:.0f} %"


def fmt_percent(x: float | None) -> str:
    """A figure already in percent, e.g. MAPE 8.123 -> '8.1 %'."""
    return "n/a" if x is None else f"{x:.1f} %"


def fmt_ratio(x: float | None) -> str:
    """A ratio such as MASE, two decimals."""
    return "n/a" if x is None else f"{x:.2f}"


def fmt_time(seconds: float) -> str:
    """A UTC instant for people, e.g. 'Tue 15 Jul 2014 18:00 UTC'."""
    return from_epoch(seconds).strftime("%a %d %b %Y %H:%M UTC")


def fmt_money(x: float | None, currency: str | None) -> str:
    """Money with two decimals and the currency code."""
    return "n/a" if x is None else f"{x:,.2f} {currency or ''}".strip()


def reason_group(reason: str) -> str:
    """The plot colour group of a plan reason (`schedule:biz` -> `schedule`)."""
    return reason.split(":", 1)[0]


def _dates(seconds: np.ndarray | Iterable[float]) -> np.ndarray:
    return (np.asarray(seconds, dtype=float) * 1000).astype("datetime64[ms]")


def _compact(value: float, _pos: int | None = None) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def _axes(fig: Figure):
    ax = fig.add_subplot()
    locator = mdates.AutoDateLocator(minticks=5, maxticks=12)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.grid(True, color="#e2e8f0", linewidth=0.8)
    ax.set_axisbelow(True)
    return ax


def _svg(fig: Figure, salt: str, label: str) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', rf'<svg\1 role="img" aria-label="{html.escape(label)}"', text, count=1)


def demand_svg(r: PoolReport, at: float) -> str:
    """History of the last days, the forecast with its band, the peaks and a 'now' line."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(11.2, 3.4), layout="constrained")
        ax = _axes(fig)
        if r.recent is not None and len(r.recent):
            ax.plot(_dates(r.recent.times), r.recent.values, color="#334155", linewidth=0.9, label="actual")
        f = r.forecast
        if f is not None:
            width = r.pool.forecast.interval_width if r.pool.forecast else 0.8
            ax.fill_between(_dates(f.times), f.lower, f.upper, color="#93c5fd", alpha=0.45, linewidth=0, label=f"{width:.0%} interval")
            ax.plot(_dates(f.times), f.yhat, color="#2563eb", linewidth=1.5, label="forecast")
        for n, p in enumerate(r.peaks, 1):
            ax.plot(_dates([p.at]), [p.demand], marker="v", color="#dc2626", markersize=7, linestyle="none", label="next peaks" if n == 1 else None)
            ax.annotate(str(n), (_dates([p.at])[0], p.demand), textcoords="offset points", xytext=(0, 8), ha="center", color="#dc2626", fontweight="bold")
        ax.axvline(_dates([at])[0], color="#dc2626", linestyle="--", linewidth=1.2)
        ax.annotate("now", (_dates([at])[0], 1.0), xycoords=("data", "axes fraction"), xytext=(4, -12), textcoords="offset points", color="#dc2626")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(_compact))
        ax.set_ylabel("demand")
        shown = [a for a in (r.recent.values if r.recent is not None else [], f.lower if f is not None else []) if len(a)]
        if shown and min(float(np.min(a)) for a in shown) < 0.3 * max(float(np.max(a)) for a in shown):
            ax.set_ylim(bottom=0)
        fig.legend(loc="outside upper left", ncols=5, frameon=False, fontsize=9)
        return _svg(fig, f"demand-{r.pool.name}", f"demand and forecast for pool {r.pool.name}")


def _runs(groups: list[str]) -> list[tuple[int, int, str]]:
    """(first, last index exclusive, group) of each stretch with the same reason group."""
    runs, first = [], 0
    for k in range(1, len(groups) + 1):
        if k == len(groups) or groups[k] != groups[first]:
            runs.append((first, k, groups[first]))
            first = k
    return runs


def plan_svg(r: PoolReport) -> str:
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
        for name, a, b in r.windows:
            ax.axvspan(_dates([a])[0], _dates([b])[0], color=REASON_COLOURS["schedule"], alpha=0.08, linewidth=0)
            ax.annotate(name, (_dates([a])[0], 1.0), xycoords=("data", "axes fraction"), xytext=(3, -11), textcoords="offset points", color=REASON_COLOURS["schedule"], fontsize=8)
        xs, ys = _dates(np.append(t, end)), np.append(d, d[-1:])
        ax.fill_between(xs, ys, step="post", color="#94a3b8", alpha=0.25, linewidth=0)
        ax.step(xs, ys, where="post", color="#1e293b", linewidth=1.6)
        groups = [reason_group(x) for x in r.plan_reasons]
        for first, last, group in _runs(groups):
            stop = t[last] if last < t.size else end
            ribbon.axvspan(_dates([t[first]])[0], _dates([stop])[0], color=REASON_COLOURS.get(group, "#334155"), linewidth=0)
        ribbon.set_yticks([])
        ribbon.set_ylabel("why", rotation=0, ha="right", va="center")
        for side in ("left", "top", "right"):
            ribbon.spines[side].set_visible(False)
        top = max(float(d.max()) if d.size else 0.0, 1.0)
        cap = r.pool.max_replicas
        if cap <= 1.5 * top + 2:
            top = max(top, cap)
            ax.axhline(cap, color=REASON_COLOURS["max"], linestyle=":", linewidth=1)
            ax.annotate(f"maxReplicas {cap}", (1.0, cap), xycoords=("axes fraction", "data"), xytext=(-4, 3), textcoords="offset points", ha="right", color=REASON_COLOURS["max"], fontsize=8)
        else:
            ax.annotate(f"maxReplicas {cap} (off the chart)", (1.0, 1.0), xycoords="axes fraction", xytext=(-4, -11), textcoords="offset points", ha="right", color=REASON_COLOURS["max"], fontsize=8)
        for p in r.peaks:
            ax.axvline(_dates([p.at])[0], color="#dc2626", linestyle=":", linewidth=0.9)
        handles = [Patch(color=REASON_COLOURS[g], label=g) for g in REASON_COLOURS if g in groups]
        if r.windows:
            handles.append(Patch(color=REASON_COLOURS["schedule"], alpha=0.15, label="schedule window open"))
        fig.legend(handles=handles, loc="outside lower left", ncols=len(handles), frameon=False, fontsize=9)
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_ylim(0, top * 1.2 + 0.5)
        ax.set_ylabel("placeholder pods")
        ax.tick_params(labelbottom=False)
        return _svg(fig, f"plan-{r.pool.name}", f"planned placeholder pods for pool {r.pool.name}")


def past_svg(r: PoolReport) -> str:
    """Earlier forecasts against what really happened."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(11.2, 2.9), layout="constrained")
        ax = _axes(fig)
        times = np.concatenate([p.times for p in r.past])
        actual = np.concatenate([p.actual for p in r.past])
        order = np.unique(times, return_index=True)[1]
        ax.plot(_dates(times[order]), actual[order], color="#334155", linewidth=1, label="actual")
        shades = ["#bfdbfe", "#93c5fd", "#60a5fa", "#3b82f6", "#1d4ed8"][-len(r.past) :]
        for p, colour in zip(r.past, shades):
            ax.plot(_dates(p.times), p.yhat, color=colour, linewidth=1.4, label=f"made {fmt_time(p.made_at)}")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(_compact))
        ax.set_ylabel("demand")
        fig.legend(loc="outside lower left", ncols=len(r.past) + 1, frameon=False, fontsize=8)
        return _svg(fig, f"past-{r.pool.name}", f"past forecasts against actual demand for pool {r.pool.name}")


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}">{head}<tbody>{body}</tbody></table>'


def _card(title: str, value: str, sub: str, cls: str = "") -> str:
    return f'<div class="card {cls}"><div class="k">{html.escape(title)}</div><div class="v">{html.escape(value)}</div><div class="s">{html.escape(sub)}</div></div>'


def fmt_lead(seconds: float) -> str:
    """A lead time: '45 min' below two hours, else '14.8 h'."""
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _when(iso_text: object) -> str:
    try:
        return fmt_time(datetime.fromisoformat(str(iso_text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return str(iso_text)


def _peak_sentence(p: Peak) -> str:
    return f"{p.warm_replicas} pod(s) warm from {fmt_time(p.warm_from)}, {fmt_lead(p.lead_seconds)} ahead"


def _pool_html(r: PoolReport, report: Report) -> str:
    c, pool, acc = r.cost, r.pool, r.accuracy or {}
    horizon = f"next {c.hours:.0f} h"
    cost_value = fmt_money(c.money, c.currency) if c.money is not None else f"{fmt_number(c.replica_hours)} pod-hours"
    detail = f"{fmt_number(c.cpu_hours)} CPU-hours, {fmt_number(c.gib_hours)} GiB-hours"
    if c.money is not None:
        detail = f"{fmt_number(c.replica_hours)} pod-hours, " + detail
    cards = [
        _card("Placeholder pods now", str(r.now.desired), f"reason: {r.now.reason}"),
        _card("Next peak", fmt_number(r.peaks[0].demand), f"{fmt_time(r.peaks[0].at)}; {_peak_sentence(r.peaks[0])}")
        if r.peaks else _card("Next peak", "none", f"forecast: {r.forecast_status}"),
        _card(f"Headroom cost, {horizon}", cost_value, detail),
        _card("Forecast error (MAPE)", fmt_percent(acc.get("mape")), f"MASE {fmt_ratio(acc.get('mase'))}, coverage {fmt_share(acc.get('coverage'))}")
        if acc else _card("Forecast error", "n/a", "no hold-out accuracy"),
    ]
    warn = (
        '<div class="warnings"><h3>Warnings</h3><ul>' + "".join(f'<li data-code="{n.code}">{html.escape(n.message)}</li>' for n in r.notices) + "</ul></div>"
        if r.notices else '<div class="ok">No warnings.</div>'
    )
    has_demand = r.forecast is not None or (r.recent is not None and len(r.recent) > 0)
    figures = [
        f'<figure>{demand_svg(r, report.at)}<figcaption>Demand: the last {min(r.history_seconds, 7 * 86400) / 86400:.1f} days of history, the forecast ({r.forecast.model if r.forecast else r.forecast_status}) with its band, and the next peaks.</figcaption></figure>'
        if has_demand else f'<p class="nodemand">No demand to show (forecast: {html.escape(r.forecast_status)}); schedules, the proportional rule and minReplicas size this pool.</p>',
        f'<figure>{plan_svg(r)}<figcaption>Planned placeholder pods at every {r.step_seconds / 60:.0f} min over the horizon; the ribbon below shows the rule that set them, shaded spans are open schedule windows (lead time included), dotted red lines the next peaks.</figcaption></figure>',
    ]
    if r.past:
        figures.append(f'<figure>{past_svg(r)}<figcaption>Earlier forecasts against what really happened.</figcaption></figure>')
    peaks = _table(
        ["#", "when", "demand", "upper band", "pods warm", "warm from", "lead"],
        [[str(n), fmt_time(p.at), fmt_number(p.demand), fmt_number(p.upper), str(p.warm_replicas), fmt_time(p.warm_from), fmt_lead(p.lead_seconds)] for n, p in enumerate(r.peaks, 1)],
        "peaks",
    ) if r.peaks else "<p>No peak in the forecast horizon.</p>"
    accuracy = _table(
        ["model", "MAPE", "sMAPE", "MASE (vs seasonal naive)", "coverage", "band", "held back"],
        [[str(acc.get("model", "")), fmt_percent(acc.get("mape")), fmt_percent(acc.get("smape")), fmt_ratio(acc.get("mase")),
          fmt_share(acc.get("coverage")), fmt_share(acc.get("interval_width")), f"{acc['points']} points from {_when(acc['holdout_start'])}" if "points" in acc and "holdout_start" in acc else ""]],
        "accuracy",
    ) if acc else "<p>No hold-out accuracy (too little history or no forecast).</p>"
    cost_rows = [["placeholder pod requests", f"{pool.placeholder.cpu} CPU, {pool.placeholder.memory}"], ["horizon", f"{c.hours:.0f} h"],
                 ["pod-hours", fmt_number(c.replica_hours)], ["CPU-hours", fmt_number(c.cpu_hours)], ["GiB-hours", fmt_number(c.gib_hours)],
                 ["peak pods", str(c.peak_replicas)], ["pod-hours if the peak count were kept all the time", fmt_number(c.static_replica_hours)]]
    if c.money is not None:
        cost_rows.append(["cost", fmt_money(c.money, c.currency)])
    past = _table(["made", "points compared", "MAPE", "coverage"], [[fmt_time(p.made_at), str(p.times.size), fmt_percent(p.mape), fmt_share(p.coverage)] for p in r.past], "past") if r.past else ""
    changes = [[fmt_time(t), str(int(d)), why] for k, (t, d, why) in enumerate(zip(r.plan_times, r.plan_desired, r.plan_reasons))
               if k == 0 or (d, why) != (r.plan_desired[k - 1], r.plan_reasons[k - 1])]
    return f"""<section class="pool" id="pool-{html.escape(pool.name)}">
<h2>Pool {html.escape(pool.name)} <span class="target">{pool.target.kind} {html.escape(pool.target.namespace)}/{html.escape(pool.target.name)} · {pool.min_replicas}–{pool.max_replicas} pods · lead time {pool.lead_time.total_seconds() / 60:.0f} min</span></h2>
<div class="cards">{''.join(cards)}</div>
{warn}
{''.join(figures)}
<div class="grid"><div><h3>Next peaks</h3>{peaks}</div><div><h3>Cost of headroom ({horizon})</h3>{_table(["", ""], cost_rows, "cost")}</div></div>
<h3>Forecast accuracy on held-back recent data</h3>{accuracy}
{'<h3>Past forecasts against what happened</h3>' + past if past else ''}
<details><summary>Plan changes ({len(changes)})</summary>{_table(["from", "pods", "reason"], changes, "changes")}</details>
</section>"""


_CSS = """
*{box-sizing:border-box}body{margin:0;background:#f8fafc;color:#0f172a;font:15px/1.5 "DejaVu Sans","Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 32px 48px}h1{font-size:26px;margin:0 0 4px}
.meta{color:#475569;margin:0 0 16px}h2{font-size:21px;margin:28px 0 12px;border-bottom:2px solid #e2e8f0;padding-bottom:6px}
h2 .target{font-size:13px;font-weight:normal;color:#64748b;margin-left:8px}h3{font-size:16px;margin:20px 0 8px}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px}.card{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:12px 14px}
.card .k{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#64748b}.card .v{font-size:28px;font-weight:bold;margin:2px 0}
.card .s{font-size:13px;color:#475569}.warnings{background:#fffbeb;border:1px solid #f59e0b;border-left:6px solid #f59e0b;border-radius:8px;padding:4px 16px;margin:14px 0}
.warnings h3{margin:8px 0 4px;color:#92400e}.warnings li{margin:4px 0}.ok{background:#f0fdf4;border:1px solid #86efac;border-radius:8px;padding:8px 16px;margin:14px 0;color:#166534}
figure{margin:14px 0;background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:8px}figure svg{width:100%;height:auto;display:block}
figcaption{font-size:13px;color:#475569;padding:4px 8px}.grid{display:grid;grid-template-columns:3fr 2fr;gap:20px}
table{border-collapse:collapse;background:#fff;width:100%;font-size:14px}th,td{border:1px solid #e2e8f0;padding:5px 9px;text-align:left}
th{background:#f1f5f9;font-weight:600}td{font-variant-numeric:tabular-nums}details{margin:16px 0}summary{cursor:pointer;font-weight:600}
.cost td:last-child,.peaks td:nth-child(n+3):not(:nth-child(6)){white-space:nowrap}nav a{margin-right:14px}.nodemand{color:#475569;font-style:italic}footer{color:#64748b;font-size:12px;margin-top:32px}
"""


def render_html(report: Report) -> str:
    """The whole report as one HTML document with everything inline (no network needed to view)."""
    nav = " ".join(f'<a href="#pool-{html.escape(r.pool.name)}">{html.escape(r.pool.name)}</a>' for r in report.pools)
    notes = sum(len(r.notices) for r in report.pools)
    body = "".join(_pool_html(r, report) for r in report.pools)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Headroom report {html.escape(fmt_time(report.at))}</title><style>{_CSS}</style></head>
<body><main><h1>Headroom report</h1>
<p class="meta">As of {html.escape(fmt_time(report.at))} · {len(report.pools)} pool(s) · {notes} warning(s){' · data: ' + html.escape(report.source) if report.source else ''}</p>
{'<nav>' + nav + '</nav>' if len(report.pools) > 1 else ''}
{body}
<footer>predictive-headroom report; the same facts are in report.json next to this page. Times are UTC.</footer>
</main></body></html>
"""
