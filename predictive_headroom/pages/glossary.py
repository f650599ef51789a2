"""The words the pages use that a new reader may not know, defined once: the legend at the foot of
each page and the hover title of the headers and cells that show them.

The words are the CLI's: "overhead node-hours" (the CLI's `overhead node-h`), "choose" (the column
`backtest` prints for the setting `tune` would choose), "change in waiting" (the interrupted
cluster's table). Every column header and card title of both pages is defined here (a test
checks it in Chromium); a page lists the words of the sections it shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from predictive_headroom.core.components import READ, REGISTRY
from predictive_headroom.core.vocabulary import Component, Feed, Kind

GLOSSARY: dict[str, str] = {
    # The backtest's measures.
    "overhead node-hours": "node-hours a strategy costs beyond no headroom (reactive) over the "
    "replayed span: what the spare room cost",
    "node-hours": "the simulated nodes' running time over the scored span, summed: what the "
    "cluster cost with this strategy",
    "unserved pod-minutes": "application pods left waiting for a node, summed over the minutes "
    "they waited (lower is better)",
    "cold starts": "minutes in which at least one application pod waited for a node to boot",
    "strategy": "a way of keeping warm capacity, replayed on the same demand and the same "
    "simulated cluster",
    "placeholders": "static headroom: this many placeholders all the time (the static curve's N)",
    "reactive": "no placeholders: nodes are added only when pods already wait (the cost floor)",
    "static": "static headroom: N placeholders all the time, N chosen in hindsight (the cheapest "
    "that reaches the protection)",
    "proportional": "the pool's cluster-proportional rule; a pool without one is replayed with "
    "CPA's linear nodesPerReplica 1 (one placeholder per node, always: a common setting, not "
    "tuned to the traffic)",
    "schedule": "the pool's cron windows (a daytime window by default)",
    "forecast": "the whole planner with the forecast, refitted on only the past, at the setting "
    "the pool gives (in the cost table: the best fixed setting of the grid)",
    "naive": "the same planner with a model-free burst table (the quantile of past growth by time "
    "of day) and no ramp: the baseline the forecast has to beat",
    "oracle": "perfect foresight: exactly the growth of the next node lag, never more; the best "
    "any strategy could do",
    "x vs static": "static headroom's unserved pod-minutes at the same node-hours divided by the "
    "strategy's own: 2 is half the unserved demand for the same cost, 1 a tie, ∞ none left where "
    "static leaves some",
    "scored": "the span the measures count, after the warm-up the first fits learn from",
    # The dials and the cost at equal protection.
    "burst quantile": "the burst quantile (burstQuantile) the same refits were replayed at",
    "window": "the scale-down stabilisation window (scaleDownStabilization) the same refits were "
    "replayed with",
    "protection": "the share of the pod-minutes that would wait for a node without headroom "
    "(reactive) that a strategy absorbs",
    "naive tuned": "the naive baseline with each day's setting chosen walk-forward, on the days "
    "before it only",
    "forecast tuned": "the forecast with each day's setting chosen walk-forward, on the days "
    "before it only",
    "static ÷ forecast": "static headroom's overhead node-hours over the forecast's at the same "
    "protection: 2 means static costs twice as much",
    "naive ÷ forecast": "the naive baseline's overhead node-hours over the forecast's at the same "
    "protection",
    "forecast ÷ oracle": "the forecast's overhead node-hours over perfect foresight's at the same "
    "protection: how far from the best possible",
    "choose": "the setting `tune` would choose on this whole history for that protection: the "
    "cheapest one reaching it (the same column `backtest` prints)",
    # The promise.
    "asked": "the protection asked for (protection: P on the pool)",
    "kept": "the protection the rule kept walk-forward, each day's setting and reserve chosen on "
    "the days before it, as the daemon re-tunes",
    "a day": "the promise's overhead node-hours per scored day",
    "daily reserve": "the overhead node-hours of a fixed reserve of placeholders re-chosen each "
    "day on the week before it, at the protection the promise kept",
    "static in hindsight": "the overhead node-hours of static headroom with N chosen knowing the "
    "whole history, at the protection the promise kept (an ideal no causal rule reaches)",
    "reserve ÷ promise": "the daily reserve's overhead node-hours over the promise's: above 1 the "
    "promise is cheaper",
    "static ÷ promise": "static headroom in hindsight's overhead node-hours over the promise's: "
    "below 1 static headroom chosen in hindsight was cheaper, above 1 the promise is",
    # Nodes interrupted at random.
    "without interruptions": "the same strategy's unserved pod-minutes on the calm cluster",
    "change in waiting": "unserved pod-minutes with the interruptions minus without them; below "
    "0 when the disruption component's placeholders also absorbed ordinary bursts",
    "node-hours change": "node-hours with the interruptions minus without them",
    "interruptions": "nodes interrupted (given notice) over the scored span",
    # The burst model.
    "q=0.95": "the burst quantile (burstQuantile): the allowance covers the growth beyond the "
    "ramp that q of past lead-time windows stayed under; q=0.95 leaves 1 window in 20 short",
    "feature": "an input of the burst model at an instant, read only from what was known then",
    "score drop when shuffled": "permutation importance: how much worse the burst model's "
    "quantile score gets when one feature's values are shuffled; the larger, the more the "
    "allowance leans on that feature",
    "time of day (sin)/(cos)": "the time of day as a point on a circle (the sine and cosine of "
    "the hour's angle), so 23:55 and 00:05 are neighbours; day of week the same way",
    # The report.
    "placeholder pods now": "the plan at the report's instant: placeholder pods the daemon would "
    "hold, and the rule that set the count",
    "next peak": "the highest forecast demand within 6 hours either side, next after now, with "
    "the pods warm for it",
    "headroom cost": "what the planned placeholders reserve over the forecast horizon: "
    "pod-hours, CPU-hours and GiB-hours, in money when the policy has cost:",
    "forecast error": "the forecast's error on held-back recent days against repeating the last "
    "season (MASE), with MAPE and the band's coverage",
    "#": "the peak's number, as marked on the demand chart",
    "when": "the instant of the peak (UTC)",
    "demand": "the forecast's demand at the peak, in the query's units",
    "upper band": "the top of the forecast's band at the peak (intervalWidth)",
    "pods warm": "the most placeholder pods planned within the lead time before the peak",
    "warm from": "when that many pods are first planned without a drop before the peak",
    "warm ahead of peak": "how long before the peak that many pods are warm (warm from to the "
    "peak); not the pool's lead time, which is node boot plus pod start",
    "model": "the forecaster fitted (prophet, or seasonal naive with too little history)",
    "MAPE": "mean absolute percentage error: each miss over the demand at that point, so "
    "near-zero demand (nights) makes it large even for a good forecast; read MASE first",
    "sMAPE": "symmetric MAPE: each miss over the mean of forecast and actual, less inflated "
    "near zero than MAPE",
    "MASE": "mean absolute scaled error: the forecast's error over that of repeating the same "
    "time last week, or yesterday with less than a week of history (seasonal naive); below 1 "
    "beats it",
    "coverage": "the share of held-back actuals that fell inside the forecast's band",
    "band": "the forecast band's width (intervalWidth): the share of actuals it should hold",
    "held back": "the recent points the accuracy was measured on, left out of the fit",
    "made": "when an earlier forecast was made (a report the daemon kept)",
    "points compared": "the actual samples that have arrived since that forecast was made",
    "from": "the instant the plan changes to this count and reason",
    "pods": "the placeholder pods planned from then",
    "reason": "the rule that set the count: schedule:<window>, proportional, forecast, "
    f"{', '.join(r.name for r in READ)}, min, max, "
    f"{''.join(f'{r.name}, ' for r in REGISTRY if r.kind == Kind.CAP and r.feed == Feed.POOL and r.name != Component.MAX)}"
    "min:<why no forecast>, "
    "hold:<what holds it>, fixed-headroom (a fixed N held instead of the forecast: "
    "protectionFallback: fixed)",
    # The registered components (`core.components.REGISTRY`), each in its own words.
    **{str(r.name): r.glossary for r in REGISTRY if r.glossary},
}

ALIASES = {
    "forecast: unserved pod-minutes": "unserved pod-minutes",
    "naive: unserved pod-minutes": "unserved pod-minutes",
    "forecast x vs static": "x vs static",
    "forecast: overhead node-hours": "overhead node-hours",
    "forecast (best fixed setting)": "forecast",
    "mase (vs seasonal naive)": "MASE",
    "forecast error (mase)": "forecast error",
    "lead": "warm ahead of peak",
}
"""Words shown on the pages (lower case) that another word of the glossary defines."""

STRATEGY_TERMS = ("reactive", "proportional", "schedule", "forecast", "naive", "oracle")
BACKTEST_TERMS = (
    "scored",
    "strategy",
    "unserved pod-minutes",
    "node-hours",
    "overhead node-hours",
    "cold starts",
    "x vs static",
    *STRATEGY_TERMS,
    "placeholders",
)
DIAL_TERMS = ("burst quantile", "window")
FRONTIER_TERMS = (
    "protection",
    "static",
    "naive tuned",
    "forecast tuned",
    "static ÷ forecast",
    "naive ÷ forecast",
    "forecast ÷ oracle",
    "choose",
)
PROMISE_TERMS = (
    "asked",
    "kept",
    "a day",
    "daily reserve",
    "static in hindsight",
    "reserve ÷ promise",
    "static ÷ promise",
)
INTERRUPTION_TERMS = (
    "without interruptions",
    "change in waiting",
    "node-hours change",
    "interruptions",
)
BURST_TERMS = ("q=0.95", "feature", "score drop when shuffled", "time of day (sin)/(cos)")
REPORT_TERMS = (
    "placeholder pods now",
    "next peak",
    "headroom cost",
    "forecast error",
    "#",
    "when",
    "demand",
    "upper band",
    "pods warm",
    "warm from",
    "warm ahead of peak",
    "model",
    "MAPE",
    "sMAPE",
    "MASE",
    "coverage",
    "band",
    "held back",
    "made",
    "points compared",
    "from",
    "pods",
    "reason",
)


def term_of(text: object) -> str | None:
    """The glossary word that defines `text` (a header, a card's title, a feature), or None."""
    word = str(text).strip()
    lower = word.lower()
    if word in GLOSSARY:
        return word
    if lower in GLOSSARY:
        return lower
    if lower in ALIASES:
        return ALIASES[lower]
    if re.search(r"\((sin|cos)\)$", word):
        return "time of day (sin)/(cos)"
    if re.fullmatch(r"q=[0-9.]+", word):
        return "q=0.95"
    if lower.startswith("headroom cost"):
        return "headroom cost"
    if word.startswith("MASE"):
        return "MASE"
    if word.endswith("unserved pod-minutes"):
        return "unserved pod-minutes"
    return None


def term_title(text: object) -> str:
    """The definition of the word `text` shows (a header, a feature, a strategy), or ""."""
    term = term_of(text)
    return GLOSSARY[term] if term else ""


def glossary(terms: Iterable[str]) -> list[tuple[str, str]]:
    """(word, definition) rows for the legend of a page, in the order given."""
    return [(term, GLOSSARY[term]) for term in terms]
