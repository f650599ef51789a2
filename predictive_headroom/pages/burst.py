"""The burst allowance of the last day as the `burst_section` macro draws it: chart geometry and the sentence's facts.

Input is the burst dict both pages may carry: {"pool", "quantile", "lead_seconds", "model"
("quantile" or "profile"), "times" (ISO-8601 UTC), "demand", "allowance" (asked for above demand,
in demand units), "importance" ([{"feature", "drop"}], largest first, may be empty), "fit" (which
fit the allowance was read from, `core.series.burst_chart_data`; may be absent)}.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from predictive_headroom.core.vocabulary import BurstFit
from predictive_headroom.pages.format import (
    fmt_clock,
    fmt_compact,
    fmt_lead,
    fmt_number,
    fmt_utc,
)

WIDTH, HEIGHT = 1100.0, 290.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 24.0, 10.0, 24.0
"""The chart is drawn at about the width of a page's card (1,100 units), so it fills its card at
text size. Margins: RIGHT leaves half a centred clock label ("00:00" at 11 px) inside the chart, so a tick
at the day's last instant is not clipped."""
PANEL_GAP, LOWER_HEIGHT = 26.0, 70.0
"""The lower panel draws the allowance alone on its own scale, so an allowance of 1 % of demand is
not a flat line at the bottom of the demand panel."""
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


def fit_words(fit: Any) -> str:
    """Which fit the allowance was read from, in words (the two pages read different fits)."""
    if not isinstance(fit, dict) or not fit.get("history_end"):
        return ""
    end = fmt_utc(fit["history_end"])
    if fit.get("kind") == BurstFit.WALK_FORWARD:
        many = fit.get("fits", 1)
        return (
            f"Read from the walk-forward refits the replay had in force ({many} over this day, each "
            f"fitted only on data before it; the newest on history to {end}). The report reads the "
            "fit it plans with now back over its own training data, so its figures for the same "
            "day differ."
        )
    return (
        f"Read from the fit the plan uses now (history to {end}), back over the last day, which "
        "that fit also learned from. The backtest page shows the walk-forward refits instead, each "
        "fitted only on earlier data, so its figures for the same day differ."
    )


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
    return _chart(t, demand, allowance) | _facts(burst, t, allowance)


def _chart(t: list[float], demand: list[float], allowance: list[float]) -> dict[str, Any]:
    """The two panels' geometry in SVG units: demand and demand + allowance above, the allowance
    alone below, with their ticks. `t` (epoch seconds, ascending), `demand` and `allowance` are
    finite and of one non-zero length."""
    asked = [d + a for d, a in zip(demand, allowance, strict=False)]
    top = _nice_top(max(asked + demand))
    span = (t[-1] - t[0]) or 1.0
    low_top = _nice_top(max(allowance))
    plot_w = WIDTH - LEFT - RIGHT
    low_bottom = HEIGHT - BOTTOM
    low_upper = low_bottom - LOWER_HEIGHT
    plot_h = low_upper - PANEL_GAP - TOP
    xs = [LEFT + plot_w * (s - t[0]) / span for s in t]

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    def y_low(value: float) -> float:
        return low_upper + LOWER_HEIGHT * (1 - max(0.0, value) / low_top)

    hours = 6 * 3600
    first_tick = math.ceil(t[0] / hours) * hours
    x_ticks = [
        {"x": LEFT + plot_w * (s - t[0]) / span, "label": fmt_clock(s)}
        for s in range(int(first_tick), int(t[-1]) + 1, hours)
    ]
    y_ticks = [{"y": y(top * k / 4), "label": fmt_compact(top * k / 4)} for k in range(5)]
    low_ticks = [
        {"y": y_low(low_top * k / 2), "label": fmt_compact(low_top * k / 2)} for k in range(3)
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "bottom": HEIGHT - BOTTOM,
        "top": TOP,
        "upper_bottom": TOP + plot_h,
        "lower_top": low_upper,
        "allowance_points": _points(xs, [y_low(v) for v in allowance]),
        "lower_ticks": low_ticks,
        "demand_points": _points(xs, [y(v) for v in demand]),
        "asked_points": _points(xs, [y(v) for v in asked]),
        "band_points": _points(xs + xs[::-1], [y(v) for v in asked] + [y(v) for v in demand[::-1]]),
        "x_ticks": x_ticks,
        "y_ticks": y_ticks,
    }


def _facts(burst: dict[str, Any], t: list[float], allowance: list[float]) -> dict[str, Any]:
    """The sentence's and the table's words: quantile, lead time, which model, the largest
    allowance and when, the features that matter most and which fit it was read from."""
    peak = max(range(len(allowance)), key=allowance.__getitem__)
    features = [row["feature"] for row in burst.get("importance") or [] if row.get("drop", 0) > 0][
        :TOP_FEATURES
    ]
    return {
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
        "fit": fit_words(burst.get("fit")),
        "from": burst["times"][0],
        "to": burst["times"][-1],
    }
