"""The backtest's cost/protection plot: a PNG and a self-contained HTML page embedding it."""

from __future__ import annotations

import base64
import html
import io
import logging
from datetime import timedelta
from pathlib import Path

from predictive_headroom.backtest.results import BacktestResult, headline
from predictive_headroom.backtest.text import (
    format_dial,
    format_stabilization_dial,
    format_table,
)
from predictive_headroom.policy.durations import format_duration

logger = logging.getLogger(__name__)

_COLOURS = {
    "reactive": "#7f7f7f", "proportional": "#9467bd", "schedule": "#8c564b",
    "forecast": "#d62728", "naive": "#ff7f0e", "oracle": "#2ca02c",
}


def plot_png(result: BacktestResult) -> bytes:
    """PNG bytes: unserved pod-minutes against node-hours, the static curve as a line, strategies as points."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    try:
        nh = [m.node_hours for _, m in result.static_curve]
        un = [m.unserved_pod_minutes for _, m in result.static_curve]
        ax.plot(nh, un, "-o", color="#1f77b4", markersize=3, label="static N placeholders")
        for n, m in result.static_curve[:: max(1, len(result.static_curve) // 8)]:
            ax.annotate(f"N={n}", (m.node_hours, m.unserved_pod_minutes), fontsize=7, xytext=(3, 3), textcoords="offset points")
        for name, s in result.strategies.items():
            marker = "*" if name == "oracle" else "o"
            size = 160 if name in ("oracle", "forecast") else 60
            ax.scatter([s.metrics.node_hours], [s.metrics.unserved_pod_minutes], s=size, marker=marker,
                       color=_COLOURS.get(name, "black"), label=name, zorder=3, edgecolors="black", linewidths=0.5)
        for name, style in (("forecast", "-"), ("naive", "--")):
            points = [(p.quantile, getattr(p, name).metrics) for p in result.dial]
            if not points:
                continue
            ax.plot([m.node_hours for _, m in points], [m.unserved_pod_minutes for _, m in points], style, marker="d",
                    markersize=4, color=_COLOURS[name], alpha=0.8, label=f"{name}, burst quantile dial")
            for q, m in points:
                ax.annotate(f"q={q:g}", (m.node_hours, m.unserved_pod_minutes), fontsize=7, color=_COLOURS[name],
                            xytext=(3, -9), textcoords="offset points")
        for name, style in (("forecast", ":"), ("naive", ":")):
            windows = [(w.stabilization_seconds, getattr(w, name).metrics) for w in result.stabilization_dial]
            if not windows:
                continue
            ax.plot([m.node_hours for _, m in windows], [m.unserved_pod_minutes for _, m in windows], style, marker="s",
                    markersize=4, color=_COLOURS[name], alpha=0.8, label=f"{name}, stabilisation window dial")
            for w, m in windows:
                ax.annotate(f"w={format_duration(timedelta(seconds=w))}", (m.node_hours, m.unserved_pod_minutes), fontsize=7,
                            color=_COLOURS[name], xytext=(3, 4), textcoords="offset points")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xlabel("node-hours (cost)")
        ax.set_ylabel("unserved pod-minutes (lower is better)")
        ax.set_title("Cost vs protection: each strategy against static headroom")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def page_html(result: BacktestResult, png: bytes) -> str:
    """A self-contained HTML page: headline, the plot (base64 PNG), the strategy table and settings."""
    data = base64.b64encode(png).decode("ascii")
    settings = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in result.settings.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>predictive-headroom backtest</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
pre{{background:#f6f6f6;padding:1rem;overflow:auto}}th{{text-align:left;padding-right:1rem}}img{{max-width:100%}}</style>
</head><body>
<h1>Backtest: {html.escape(str(result.settings.get("data", "")))}</h1>
<p id="headline"><strong>{html.escape(headline(result))}</strong></p>
<img id="plot" alt="unserved pod-minutes against node-hours for static headroom and each strategy" src="data:image/png;base64,{data}">
<h2>Strategies</h2>
<pre id="table">{html.escape(format_table(result))}</pre>
<p>x = unserved pod-minutes of static headroom at the same node-hours (linear between static points)
divided by the strategy's own; higher is better.</p>
{_dial_section(result)}<h2>Settings</h2>
<table id="settings">{settings}</table>
</body></html>
"""


def _dial_section(result: BacktestResult) -> str:
    out = ""
    if result.dial:
        out += f"""<h2>Burst quantile dial</h2>
<p>The forecast and the naive baseline replayed at each burst quantile, from the same refits: what more
protection costs.</p>
<pre id="dial">{html.escape(format_dial(result))}</pre>
"""
    if result.stabilization_dial:
        out += f"""<h2>Scale-down stabilisation dial</h2>
<p>The same, replayed with each scale-down stabilisation window: how long placeholders stay up after the
last plan that needed them, and what that costs.</p>
<pre id="stabilization-dial">{html.escape(format_stabilization_dial(result))}</pre>
"""
    return out


def write_report(result: BacktestResult, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `backtest.png` and `backtest.html` into `out_dir` (created if needed); return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = plot_png(result)
    png_path, html_path = out / "backtest.png", out / "backtest.html"
    png_path.write_bytes(png)
    html_path.write_text(page_html(result, png), encoding="utf-8")
    logger.info("wrote %s and %s", html_path, png_path)
    return html_path, png_path
