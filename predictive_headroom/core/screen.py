"""Demand samples that cannot be real, screened out before anything is fitted or planned from them.

A demand series counts something (requests, pods, cores), so a negative sample is never real, and
a sample far above everything the series itself shows is a broken exporter or a bad join, not a
burst: left in, one such sample makes the refit-time burst table ask for `maxReplicas`.
`screen` drops, and counts by reason (`vocabulary.DroppedWhy`):

- `negative`: below zero;
- `far-above-range`: above `q75 + FAR x scale`, where `q75` is the series' own 75th percentile and
  `scale` the larger of its interquartile range and the median of its positive samples (so a
  flat or mostly-zero series still has a scale). Quartiles and the median ignore up to a quarter
  of the samples being garbage, however large. `FAR` is wide on purpose: real bursts (a news day,
  a match) stay far below it (`docs/benchmarks.md`: nothing dropped on any shipped or shared
  series, the largest real sample at 88 scales).

With under `MIN_SAMPLES` non-negative samples the series is too short to have a range of its own
and only negatives are dropped. A bound from a longer series (the refit's history) can be passed
for a short one (the reconcile's latest observations: `screen(recent, above=bound)`), so a burst
starting in the last hour is judged against the weeks of history, not against the quiet hour
before it. Quartiles cannot see garbage that fills most of a window (an exporter that went wrong
for days), so the daemon also caps each refit's bound at its last good fit's (`ceiling`): what
the series showed before stays the judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from predictive_headroom.core.series import History
from predictive_headroom.core.vocabulary import DroppedWhy

FAR = 250.0
"""How many of the series' own scales above its 75th percentile a sample may be."""
MIN_SAMPLES = 48
"""Non-negative samples needed before the series' range is judged (four hours at five minutes)."""
MOSTLY = 0.5
"""A share of dropped samples above this means the inputs are broken, not the few samples: the
refit keeps its last good model (`app.fit`)."""


@dataclass(frozen=True)
class Screened:
    """A series with its implausible samples dropped: what is left (`history`), how many were
    dropped by reason, out of how many, and the upper bound used (None: not judged)."""

    history: History
    dropped: Mapping[str, int] = field(default_factory=dict)
    total: int = 0
    above: float | None = None

    @property
    def count(self) -> int:
        """Samples dropped, all reasons."""
        return sum(self.dropped.values())

    @property
    def mostly_dropped(self) -> bool:
        """True when more than `MOSTLY` of the samples were dropped."""
        return self.total > 0 and self.count > MOSTLY * self.total

    def describe(self) -> str:
        """One line saying what was dropped and why, for logs and warnings ('' when nothing)."""
        if not self.count:
            return ""
        parts = []
        for why, n in sorted(self.dropped.items()):
            what = "negative" if why == DroppedWhy.NEGATIVE else f"above {self.above:.6g}"
            parts.append(f"{n} {what}")
        return (
            f"dropped {self.count} of {self.total} demand sample(s) that cannot be real "
            f"({', '.join(parts)}): a demand count is never negative, and no real burst is "
            f"{FAR:g} times the series' spread above its upper quartile; check the query or its "
            "exporter"
        )


def reach(values: np.ndarray) -> tuple[float, float] | None:
    """(q75, scale) of a series with `values` (finite, non-negative), as the module docstring says;
    None when there are too few to judge or all are zero. A sample `x` lies `(x - q75) / scale`
    scales above the upper quartile."""
    if values.size < MIN_SAMPLES:
        return None
    q25, q75 = np.quantile(values, [0.25, 0.75])
    positive = values[values > 0]
    level = float(np.median(positive)) if positive.size else 0.0
    scale = max(float(q75 - q25), level)
    return (float(q75), scale) if scale > 0 else None


def upper_bound(values: np.ndarray) -> float | None:
    """The highest plausible sample of a series with `values` (finite, non-negative): `FAR`
    scales above its upper quartile; None when there are too few to judge."""
    got = reach(values)
    return None if got is None else got[0] + FAR * got[1]


def screen(
    history: History, *, above: float | None = None, ceiling: float | None = None
) -> Screened:
    """`history` without its negative samples and those above its plausible bound (the series'
    own, or `above` when given; never over `ceiling`, the bound of an earlier, longer history),
    with the counts by reason. Non-finite samples are left to the sources, which drop or refuse
    them at read."""
    values = history.values
    negative = values < 0
    bound = upper_bound(values[~negative & np.isfinite(values)]) if above is None else above
    if ceiling is not None:
        bound = ceiling if bound is None else min(bound, ceiling)
    high = values > bound if bound is not None else np.zeros(values.size, dtype=bool)
    drop = negative | high
    dropped = {
        str(why): int(n)
        for why, n in ((DroppedWhy.NEGATIVE, negative.sum()), (DroppedWhy.FAR_ABOVE, high.sum()))
        if n
    }
    kept = (
        history if not drop.any() else History(history.times[~drop], values[~drop], history.source)
    )
    return Screened(kept, dropped, len(history), bound)
