"""Numbers, times and durations for people, the same on every page.

A reader of report.json or the backtest JSON can apply these to find a figure on the page.
"""

from __future__ import annotations

import math
from datetime import datetime

from predictive_headroom.core.series import from_epoch
from predictive_headroom.core.vocabulary import BurstFallback, BurstSource


def _missing(x: float | None) -> bool:
    """None, NaN and infinities are shown as 'n/a'."""
    return x is None or not math.isfinite(x)


def fmt_number(x: float | None) -> str:
    """A demand or cost figure for people: 16,778 / 123.4 / 0.48 ('n/a' when missing or not finite)."""
    if _missing(x):
        return "n/a"
    assert x is not None
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.2f}"


def fmt_worth(demand: float, demand_per_replica: float) -> str:
    """Demand in placeholders, as the terminal and the pages both print it: 73.008 at 200 a
    placeholder -> "0.37 placeholders' worth" (rounded once, from the unrounded figures)."""
    return f"{demand / demand_per_replica:.2f} placeholders' worth"


def fmt_compact(x: float | None, _pos: int | None = None) -> str:
    """An axis tick in human units, short enough for a narrow margin: 1,200,000 -> '1.2M',
    350,000 -> '350k', 2,500 -> '2.5k', 42 -> '42', 0.25 -> '0.25' ('n/a' when missing). The
    unused second argument lets matplotlib's FuncFormatter call it."""
    if _missing(x):
        return "n/a"
    assert x is not None
    for size, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def fmt_share(x: float | None) -> str:
    """A share 0..1 as a percentage, e.g. 0.83 -> '83 %'."""
    return "n/a" if _missing(x) else f"{100 * x:.0f} %"


def fmt_percent(x: float | None) -> str:
    """A figure already in percent, e.g. MAPE 8.123 -> '8.1 %'."""
    return "n/a" if _missing(x) else f"{x:.1f} %"


def fmt_ratio(x: float | None) -> str:
    """A ratio such as MASE, two decimals."""
    return "n/a" if _missing(x) else f"{x:.2f}"


def fmt_money(x: float | None, currency: str | None) -> str:
    """Money with two decimals and the currency code."""
    return "n/a" if _missing(x) else f"{x:,.2f} {currency or ''}".strip()


def _instant(value: float | str) -> datetime:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return from_epoch(value)


def fmt_time(value: float | str) -> str:
    """A UTC instant (POSIX seconds or ISO-8601 text) with its weekday, e.g. 'Tue 15 Jul 2014 18:00 UTC'."""
    return _instant(value).strftime("%a %d %b %Y %H:%M UTC")


def fmt_utc(value: float | str) -> str:
    """A UTC instant (POSIX seconds or ISO-8601 text) as '2014-11-24 00:00 UTC'."""
    return _instant(value).strftime("%Y-%m-%d %H:%M UTC")


def fmt_clock(value: float | str) -> str:
    """The UTC time of day of an instant, e.g. '18:40'."""
    return _instant(value).strftime("%H:%M")


def fmt_lead(seconds: float) -> str:
    """A lead time: '45 min' below two hours, else '14.8 h'."""
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def fmt_duration(seconds: float | None) -> str:
    """A duration in its two largest units, rounded to the smaller one: 180 -> '3 min',
    5400 -> '1 h 30 min', 1209600 -> '14 d', 86399 -> '1 d' (not '23 h 59 min')."""
    if seconds is None:
        return "n/a"
    if 0 < abs(seconds) < 1:
        return f"{seconds:.2g} s"
    sign, left = ("-" if seconds < 0 else ""), abs(round(float(seconds)))
    if left == 0:
        return "0 s"
    for _ in range(2):  # rounding may carry into a larger unit (59 min 59 s -> 1 h)
        top = next(i for i, (_, size) in enumerate(_UNITS) if left >= size)
        step = _UNITS[min(top + 1, len(_UNITS) - 1)][1]
        left = round(left / step) * step
    (unit, size), (small, step) = _UNITS[top], _UNITS[min(top + 1, len(_UNITS) - 1)]
    text = f"{left // size} {unit}"
    if size != step and left % size:
        text += f" {left % size // step} {small}"
    return sign + text


_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def fmt_signed(x: float | None, digits: int = 0) -> str:
    """A change with its sign, '+12' / '-30' / '+0.4' ('0' when it rounds to zero, never '-0';
    'n/a' when missing)."""
    if _missing(x):
        return "n/a"
    assert x is not None
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


FILTERS = {
    "number": fmt_number,
    "compact": fmt_compact,
    "share": fmt_share,
    "percent": fmt_percent,
    "ratio": fmt_ratio,
    "money": fmt_money,
    "time": fmt_time,
    "utc": fmt_utc,
    "clock": fmt_clock,
    "lead": fmt_lead,
    "duration": fmt_duration,
    "signed": fmt_signed,
}
"""The formatters as Jinja2 filters, e.g. `{{ cost.replica_hours|number }}`."""


FALLBACK_WORDS = {
    BurstFallback.NOT_OBSERVED: "no recent observations were given to the planner",
    BurstFallback.NO_RECENT_SAMPLES: "no sample was known before the observation delay",
    BurstFallback.STALE_OBSERVATIONS: "the newest known sample was too old (more than two data steps)",
    BurstFallback.NO_SOURCE: "the daemon has no demand source to read observations from",
    BurstFallback.FRESH_READ_FAILED: "reading the latest observations failed",
}


def fallback_words(why: str) -> str:
    """Why the burst model was not used, for people: 'fresh-read-failed: timeout' ->
    'reading the latest observations failed (timeout)'."""
    code, _, detail = why.partition(": ")
    words = FALLBACK_WORDS.get(code, code)  # type: ignore[call-overload]
    return f"{words} ({detail})" if detail else words


def forecast_sentence(
    details: dict, replicas: int | None, demand_per_replica: float, lead: str
) -> str | None:
    """What the forecast component asks for now, in words: what placeholders cover, the ramp and
    the burst allowance in demand units and in placeholders, and where the allowance came from
    (saying so when it fell back to the table). None without a usable forecast."""
    if details.get("forecast_status") != "ok" or replicas is None:
        return None
    ramp, burst = float(details.get("ramp", 0.0)), float(details.get("burst", 0.0))
    total = max(0.0, ramp + burst)
    text = (
        f"The forecast asks for {replicas} placeholder pod(s) now. Placeholders cover the rise in "
        f"demand expected within the {lead} lead time, not the peak level (running pods serve "
        f"today's demand): a predictable ramp of {fmt_number(ramp)} plus a burst allowance of "
        f"{fmt_number(burst)} makes {fmt_number(total)} demand units, "
        f"{fmt_worth(total, demand_per_replica)} at {fmt_number(demand_per_replica)} a placeholder."
    )
    why = details.get("burst_fallback")
    if why:
        return (
            f"{text} The burst allowance fell back to the refit-time table: {fallback_words(why)}."
        )
    if details.get("burst_source") == BurstSource.MODEL:
        return f"{text} The burst allowance comes from the burst model on the latest observations."
    return f"{text} The burst allowance comes from the refit-time table by time of day."


MAPE_HIGH = 50.0
"""A MAPE (%) from which, next to a MASE below 1, the two scores tell different stories."""


def accuracy_comment(mape: float | None, mase: float | None) -> str | None:
    """A line explaining MAPE and MASE when they disagree (None when they do not): a large MAPE
    with a MASE below 1 comes from demand near zero, where every small miss is a large
    percentage; MASE compares with repeating the last season and is the one to read."""
    if mape is None or mase is None:
        return None
    if mape >= MAPE_HIGH and mase < 1:
        return (
            f"MAPE {mape:.0f}% and MASE {mase:.2f} disagree: MAPE divides each miss by the demand "
            "at that point, so near-zero demand (nights, quiet hours) inflates it; MASE, against "
            "repeating the last season, says this forecast beats that baseline. Read MASE."
        )
    if mape < 10 and mase >= 1:
        return (
            f"MAPE {mape:.1f}% looks small but MASE {mase:.2f} is not below 1: the series is "
            "regular, and repeating the last season would have done as well or better."
        )
    return None


def mase_words(accuracy: dict) -> str:
    """The scale-free accuracy headline in words (MASE against repeating the last season, which
    stays meaningful when demand comes near zero, unlike MAPE), with MAPE and coverage after it,
    and why the two disagree when they do (`accuracy_comment`: a large MAPE from near-zero demand
    next to a forecast that beats repeating the last season)."""
    mase, period = accuracy.get("mase"), accuracy.get("seasonal_period_seconds")
    season = "last week" if period and period >= 6 * 86400 else "the last day"
    if mase is None:
        verdict = "no comparison with repeating " + season
    elif mase < 1:
        verdict = f"beats repeating {season} ({1 - mase:.0%} less error)"
    elif mase > 1:
        verdict = f"worse than repeating {season} ({mase - 1:.0%} more error)"
    else:
        verdict = f"as good as repeating {season}"
    text = (
        f"{verdict}; MAPE {fmt_percent(accuracy.get('mape'))}, "
        f"coverage {fmt_share(accuracy.get('coverage'))}"
    )
    comment = accuracy_comment(accuracy.get("mape"), mase)
    return f"{text}. {comment}" if comment else text
