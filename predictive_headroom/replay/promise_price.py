"""The price of a promise: what keeping each protection cost walk-forward against static headroom
chosen in hindsight, and the highest protection the history kept, with its price.

`tune` reads its levels from the backtest's walk-forward (`backtest.recommend`), the daemon's
re-tune from its own ledger (`app.tune`); both say it with `price_of_promise`, priced by
`core.price`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from predictive_headroom.core.curve import Point, cost_at
from predictive_headroom.core.price import Price
from predictive_headroom.core.verdict import verdict
from predictive_headroom.replay.promise import Ledger

FRONTIER_LEVELS = (0.8, 0.9, 0.95, 0.99)
"""The protections the frontier is read at (the one asked is added)."""


@dataclass(frozen=True)
class Level:
    """What asking `asked` kept walk-forward (None: nothing waited) for `per_day` overhead
    node-hours a day, and what static headroom chosen in hindsight needed a day for the same
    protection (None: no static N reached it)."""

    asked: float
    kept: float | None
    per_day: float
    static_per_day: float | None

    @property
    def held(self) -> bool:
        """It kept what was asked (nothing waiting counts as kept)."""
        return self.kept is None or self.kept >= self.asked - 1e-9

    def to_dict(self, price: Price | None) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "kept": None if self.kept is None else round(self.kept, 4),
            "held": self.held,
            "overhead_node_hours_per_day": round(self.per_day, 3),
            "money_per_day": _money(price, self.per_day),
            "static_hindsight_node_hours_per_day": None
            if self.static_per_day is None
            else round(self.static_per_day, 3),
            "static_hindsight_money_per_day": _money(price, self.static_per_day),
        }


def _money(price: Price | None, node_hours: float | None) -> float | None:
    money = None if price is None or node_hours is None else price.money(node_hours)
    return None if money is None else round(money, 2)


def _figure(node_hours: float, price: Price | None) -> str:
    """`12.3 overhead node-hours a day (9.84 USD)`."""
    money = price.text(node_hours) if price is not None else ""
    return f"{node_hours:,.1f} overhead node-hours a day" + (f" ({money})" if money else "")


def price_of_promise(
    levels: Sequence[Level], target: float, price: Price | None = None
) -> dict[str, Any]:
    """The frontier (`levels`, asked ascending), whether keeping `target` cost more than static
    headroom in hindsight (`dearer_than_static`, both figures), the highest level kept (`offer`)
    and the sentence saying it (`says`, empty when the promise was not dearer)."""
    levels = sorted(levels, key=lambda lv: lv.asked)
    asked = next((lv for lv in levels if abs(lv.asked - target) < 1e-9), None)
    kept = [lv for lv in levels if lv.held]
    offer = kept[-1] if kept else None
    dearer = (  # the one verdict against fixed headroom (`core.verdict`), at the level asked
        asked is not None
        and not verdict(
            1.0 if asked.kept is None else asked.kept, asked.per_day, asked.static_per_day
        ).forecast_better
    )
    says = ""
    if dearer and asked is not None and asked.static_per_day is not None:
        protection = "nothing waiting" if asked.kept is None else f"{100 * asked.kept:.1f}%"
        says = (
            f"keeping {100 * target:g}% cost {_figure(asked.per_day, price)} walk-forward; static "
            f"headroom chosen in hindsight would have absorbed the same {protection} for "
            f"{_figure(asked.static_per_day, price)}"
        )
        if offer is None:
            says += "; the history kept none of " + ", ".join(
                f"{100 * lv.asked:g}%" for lv in levels
            )
        elif offer.asked < target - 1e-9:
            says += (
                f"; the history kept {100 * offer.asked:g}% (kept {_pct(offer.kept)}) for "
                f"{_figure(offer.per_day, price)}"
            )
    return {
        "asked": target,
        "dearer_than_static": dearer,
        "frontier": [lv.to_dict(price) for lv in levels],
        "offer": None if offer is None else offer.to_dict(price),
        "says": says,
    }


def _pct(kept: float | None) -> str:
    return "nothing waiting" if kept is None else f"{100 * kept:.1f}%"


def static_in_hindsight(static: Ledger, kept: float | None, first: int, stop: int) -> float | None:
    """Overhead node-hours over periods [first, stop) of static headroom at protection `kept`:
    the static curve (the candidates of `static`, summed there) read at `kept` by the one
    interpolation every command uses (`core.curve.cost_at`; None: no N kept as much; `kept` None:
    nothing waited, so none are needed: 0)."""
    if kept is None:
        return 0.0
    r = float(static.reactive[first:stop].sum())
    reactive_nh = float(static.reactive_node_hours[first:stop].sum())
    points = [
        Point(
            float(static.node_hours[i, first:stop].sum()) - reactive_nh,
            float(static.unserved[i, first:stop].sum()),
            f"N={c.reserve}",
        )
        for i, c in enumerate(static.candidates)
    ]
    return cost_at(points, r, kept).cost
