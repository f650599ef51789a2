"""The burst allowance of the last day as the `burst_section` macro draws it: chart geometry and the sentence's facts.

Input is the burst dict both pages may carry: {"pool", "quantile", "lead_seconds", "model"
("quantile" or "profile"), "times" (ISO-8601 UTC), "demand", "allowance" (asked for above demand,
in demand units), "importance" ([{"feature", "drop"}], largest first, may be empty)}.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from predictive_headroom.pages.format import fmt_clock, fmt_lead, fmt_number

WIDTH, HEIGHT = 720.0, 200.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 12.0, 10.0, 24.0
TOP_FEATURES = 3


def _seconds(iso_text: str) -> float:
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()


def _nice_top(value: float) -> float:
    if value <= 0:
        return 1.0
    size = 10 ** math.floor(math.log10(value))
    return next(k * size for k in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if k * size >= value)


def _points(xs: list[float], ys: list[float]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=False))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _drop(value: float) -> str:
    return fmt_number(value) if abs(value) >= 10 else f"{value:.3g}"


def burst_view(burst: Any) -> dict[str, Any] | None:
    """What the chart, the sentence and the table need; None when there is no burst to show."""
    if not isinstance(burst, dict) or not burst.get("times"):
        return None
    known = [  # a point without a finite demand or allowance (null in JSON) is left out
        (_seconds(s), float(d), float(a))
        for s, d, a in zip(burst["times"], burst["demand"], burst["allowance"], strict=False)
        if _finite(d) and _finite(a)
    ]
    if not known:
        return None
    t, demand, allowance = (list(column) for column in zip(*known, strict=True))
    asked = [d + a for d, a in zip(demand, allowance, strict=False)]
    top = _nice_top(max(asked + demand))
    span = (t[-1] - t[0]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    xs = [LEFT + plot_w * (s - t[0]) / span for s in t]

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    hours = 6 * 3600
    first_tick = math.ceil(t[0] / hours) * hours
    x_ticks = [
        {"x": LEFT + plot_w * (s - t[0]) / span, "label": fmt_clock(s)}
        for s in range(int(first_tick), int(t[-1]) + 1, hours)
    ]
    y_ticks = [{"y": y(top * k / 4), "label": fmt_number(top * k / 4)} for k in range(5)]
    peak = max(range(len(allowance)), key=allowance.__getitem__)
    features = [row["feature"] for row in burst.get("importance") or [] if row.get("drop", 0) > 0][
        :TOP_FEATURES
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "bottom": HEIGHT - BOTTOM,
        "top": TOP,
        "demand_points": _points(xs, [y(v) for v in demand]),
        "asked_points": _points(xs, [y(v) for v in asked]),
        "band_points": _points(xs + xs[::-1], [y(v) for v in asked] + [y(v) for v in demand[::-1]]),
        "x_ticks": x_ticks,
        "y_ticks": y_ticks,
        "quantile": f"{float(burst['quantile']):g}",
        "lead": fmt_lead(float(burst["lead_seconds"])),
        "who": "the time-of-day burst profile"
        if burst.get("model") == "profile"
        else "the burst model",
        "most": fmt_number(allowance[peak]),
        "most_at": fmt_clock(t[peak]),
        "features": features,
        "importance": [
            (row["feature"], _drop(row["drop"])) for row in burst.get("importance") or []
        ],
        "from": burst["times"][0],
        "to": burst["times"][-1],
    }
