"""Fixed headroom when the forecast does not pay: the rule a pool with `protection:` and
`protectionFallback: fixed` follows at each choice (docs/promise.md, "Fixed headroom when the
forecast does not pay").

The promise rule's ledger (`replay.promise`) already says, over the days it judged its strictness
on, what the forecast's walk-forward choices kept and for how much, and what static headroom
(a fixed N of placeholders held all along) would have needed for the same protection. When that
ledger says the forecast did not keep the target, or kept it for more than static headroom would
have cost, the pool holds the fewest fixed placeholders that kept the target over every day read
(`hold_fixed`); when the ledger says the forecast keeps it again (and pays), it returns to the
forecast. The ledger replays every candidate whatever was held, so the return is judged on the
same footing as the fallback.

The daemon's re-tune (`app.tune`) and `backtest --protection` (`replay.promise.walk_forward`,
through `fixed_override`) call the same function on the same kind of ledger. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from predictive_headroom.replay.promise import LOOKBACK, WINDOW, Candidate, Choice, Ledger, Status
from predictive_headroom.replay.promise_price import static_in_hindsight

DEARER_MARGIN = 1.10
"""The forecast counts as dearer than static headroom above this many times its cost at the
protection kept: `tune`'s own margin (`backtest.choice.RULE.margin`), the measure's tolerance."""


class Why(StrEnum):
    """Why the forecast was set aside."""

    SHORT = "short"
    """It kept less than the target over the days judged."""
    DEARER = "dearer"
    """It kept the target, but static headroom would have kept as much for less."""


@dataclass(frozen=True)
class FixedHold:
    """The fixed N held instead of the forecast, what it kept over the days read, and why."""

    replicas: int
    kept: float
    why: Why
    forecast_kept: float
    forecast_per_day: float
    static_per_day: float | None
    """Static headroom in hindsight a day at the protection the forecast kept (None: no N did)."""

    def says(self, target: float) -> str:
        """ "the forecast kept 84.1% over the days judged, short of 95%; holding 40 fixed
        placeholders, which kept 95.6% over the days read, ..." (or dearer than static
        headroom)."""
        if self.why == Why.SHORT:
            verdict = (
                f"the forecast kept {100 * self.forecast_kept:.1f}% over the days judged, short "
                f"of {100 * target:g}%"
            )
        else:
            verdict = (
                f"the forecast kept {100 * self.forecast_kept:.1f}% over the days judged for "
                f"{self.forecast_per_day:,.1f} overhead node-hours a day, more than static "
                f"headroom's {self.static_per_day or 0.0:,.1f} for the same"
            )
        return (
            f"{verdict}; holding {self.replicas} fixed placeholders, which kept "
            f"{100 * self.kept:.1f}% over the days read, until the forecast keeps "
            f"{100 * target:g}% again for no more than a fixed N"
        )


def fewest_fixed(static: Ledger, target: float) -> tuple[int, float] | None:
    """The fewest fixed placeholders of `static` that kept `target` over all its periods, and
    what they kept (None: none did, or nothing waited)."""
    waited = float(static.reactive.sum())
    if waited <= 0:
        return None
    for i in np.argsort([c.reserve for c in static.candidates]):
        kept = 1.0 - float(static.unserved[i].sum()) / waited
        if kept >= target - 1e-9:
            return static.candidates[i].reserve, kept
    return None


def hold_fixed(
    choice: Choice, static: Ledger, target: float, margin: float = DEARER_MARGIN
) -> FixedHold | None:
    """The fixed N to hold instead of `choice` (the promise rule's, made on the periods of
    `static`, static headroom's ledger over the same periods), or None to keep the forecast:
    nothing waited on the days judged, the forecast kept `target` for at most `margin` times
    static headroom in hindsight at the protection it kept, or no fixed N kept `target` over the
    days read."""
    if choice.kept is None or not choice.kept_periods:
        return None
    n = static.periods
    first = max(1, n - LOOKBACK)
    per_day = choice.kept_overhead_node_hours / choice.kept_periods
    static_cost = static_in_hindsight(static, choice.kept, first, n)
    static_per_day = None if static_cost is None else static_cost / max(1, n - first)
    if choice.kept < target - 1e-9:
        why = Why.SHORT
    elif static_per_day is not None and per_day > margin * static_per_day + 1e-9:
        why = Why.DEARER
    else:
        return None
    fixed = fewest_fixed(static, target)
    if fixed is None:
        return None
    return FixedHold(fixed[0], fixed[1], why, choice.kept, per_day, static_per_day)


def fixed_override(
    static: Ledger,
    target: float,
    sizes: Callable[[int], Sequence[int]] | None = None,
    margin: float = DEARER_MARGIN,
) -> Callable[[int, Choice], Choice]:
    """For `replay.promise.walk_forward(override=...)`: period k's choice, or a fixed N
    (`Status.FIXED`, `Candidate(None, N)`) when `hold_fixed` says so on the periods the promise
    rule read (`WINDOW + LOOKBACK` before k) of `static` (static headroom summed on the same
    periods as the walk's ledger). `sizes(k)`: the fixed N tried at period k (default all)."""

    def override(k: int, choice: Choice) -> Choice:
        window = static.cut(max(0, k - WINDOW - LOOKBACK), k)
        if sizes is not None:
            window = window.among(sizes(k))
        hold = hold_fixed(choice, window, target, margin)
        if hold is None:
            return choice
        return replace(choice, candidate=Candidate(None, hold.replicas), status=Status.FIXED)

    return override
