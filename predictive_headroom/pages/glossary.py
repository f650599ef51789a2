"""The words the pages use that a new reader may not know, defined once: the legend at the foot of
each page and the hover title of the headers and cells that show them.

The words are the CLI's: "overhead node-hours" (the CLI's `overhead node-h`), "choose" (the column
`backtest` prints for the setting `tune` would choose).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GLOSSARY: dict[str, str] = {
    "overhead node-hours": "node-hours a strategy costs beyond no headroom (reactive) over the "
    "replayed span: what the spare room cost",
    "unserved pod-minutes": "application pods left waiting for a node, summed over the minutes "
    "they waited (lower is better)",
    "cold starts": "minutes in which at least one application pod waited for a node to boot",
    "naive": "the same planner with a model-free burst table (the quantile of past growth by time "
    "of day) and no ramp: the baseline the forecast has to beat",
    "oracle": "perfect foresight: exactly the growth of the next node lag, never more; the best "
    "any strategy could do",
    "x vs static": "static headroom's unserved pod-minutes at the same node-hours divided by the "
    "strategy's own: 2 is half the unserved demand for the same cost, 1 a tie",
    "choose": "the setting `tune` would choose on this whole history for that protection: the "
    "cheapest one reaching it (the same column `backtest` prints)",
    "q=0.95": "the burst quantile (burstQuantile): the allowance covers the growth beyond the "
    "ramp that q of past lead-time windows stayed under; q=0.95 leaves 1 window in 20 short",
    "score drop when shuffled": "permutation importance: how much worse the burst model's "
    "quantile score gets when one feature's values are shuffled; the larger, the more the "
    "allowance leans on that feature",
    "time of day (sin)/(cos)": "the time of day as a point on a circle (the sine and cosine of "
    "the hour's angle), so 23:55 and 00:05 are neighbours; day of week the same way",
    "MASE": "mean absolute scaled error: the forecast's error over that of repeating the same "
    "time last week, or yesterday with less than a week of history (seasonal naive); below 1 "
    "beats it",
    "coverage": "the share of held-back actuals that fell inside the forecast's band",
}

BACKTEST_TERMS = (
    "unserved pod-minutes",
    "overhead node-hours",
    "cold starts",
    "x vs static",
    "naive",
    "oracle",
    "choose",
)
BURST_TERMS = ("q=0.95", "score drop when shuffled", "time of day (sin)/(cos)")
REPORT_TERMS = ("MASE", "coverage")


def term_title(text: object) -> str:
    """The definition of the word `text` shows (a header, a feature, a strategy), or ""."""
    word = str(text)
    if word in GLOSSARY:
        return GLOSSARY[word]
    if re.search(r"\((sin|cos)\)$", word):
        return GLOSSARY["time of day (sin)/(cos)"]
    if re.fullmatch(r"q=[0-9.]+", word):
        return GLOSSARY["q=0.95"]
    if word.startswith("MASE"):
        return GLOSSARY["MASE"]
    if word.endswith("unserved pod-minutes"):
        return GLOSSARY["unserved pod-minutes"]
    return ""


def glossary(terms: Iterable[str]) -> list[tuple[str, str]]:
    """(word, definition) rows for the legend of a page, in the order given."""
    return [(term, GLOSSARY[term]) for term in terms]
