"""One measured promise (`backtest.promise_measure.measure`): what `protection: P` kept walk-forward
and for how much, as a typed value `tune`, the backtest (text, page, JSON) and the bench read by
attribute. `to_dict` is the JSON of the `promise` key; `from_dict` reads it back at an edge (a
printed `tune --output json`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from predictive_headroom.core.shortfall import Cause, Shortfall


@dataclass(frozen=True)
class PromiseEntry:
    """The promise at one protection asked (see the module docstring); node-hours are overhead
    over no headroom."""

    protection: float
    realized_protection: float
    unserved_pod_minutes: float
    reactive_unserved_pod_minutes: float
    overhead_node_hours: float
    overhead_node_hours_per_day: float | None
    days: float
    reserve_walk_forward_overhead_node_hours: float | None
    """A fixed reserve re-chosen daily, at the protection kept (None: it never kept it)."""
    reserve_walk_forward_best_protection: float
    static_hindsight_overhead_node_hours: float | None
    """Static headroom with N chosen in hindsight, at the protection kept."""
    reserve_ratio: float | None
    static_ratio: float | None
    kept: bool
    short_days: int
    few_events: bool
    choices: tuple[dict[str, Any], ...] = ()
    cause: Shortfall | None = None
    now: dict[str, Any] = field(default_factory=dict)
    """What the rule holds after the last replayed day."""
    price_per_node_hour: float | None = None
    currency: str | None = None
    price_assumed: str | None = None
    daemon_now: dict[str, Any] | None = None
    """What the daemon would hold at the end of the data when asked this protection."""
    daemon_walk: dict[str, Any] | None = None
    """The daemon walked forward day by day, each day `tune`'s choice on the days before it
    (`backtest.daemon_walk`)."""

    def to_dict(self) -> dict[str, Any]:
        """The `promise` JSON entry."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["ratios"] = {
            "reserve/promise": out.pop("reserve_ratio"),
            "static_hindsight/promise": out.pop("static_ratio"),
        }
        out["choices"] = list(self.choices)
        out["cause"] = None if self.cause is None else self.cause.to_dict()
        for key in (
            "price_per_node_hour",
            "currency",
            "price_assumed",
            "daemon_now",
            "daemon_walk",
        ):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromiseEntry:
        """The entry `to_dict` wrote (missing optional keys: their defaults)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        ratios = data.get("ratios") or {}
        values["reserve_ratio"] = ratios.get("reserve/promise")
        values["static_ratio"] = ratios.get("static_hindsight/promise")
        values["choices"] = tuple(data.get("choices") or ())
        values["cause"] = _cause(data.get("cause"), data["protection"])
        for name in ("kept", "short_days", "few_events"):
            values.setdefault(name, _defaults(data)[name])
        values.setdefault("now", {})
        return cls(**values)


def _cause(data: dict[str, Any] | None, asked: float) -> Shortfall | None:
    if not data:
        return None
    names = {f.name for f in fields(Shortfall)}
    values = {k: v for k, v in data.items() if k in names}
    values["cause"] = Cause(data["cause"])
    values["asked"] = asked
    values["retunes_from"] = None  # text in JSON; the sentence is carried in `says`
    return Shortfall(**values)


def _defaults(data: dict[str, Any]) -> dict[str, Any]:
    kept = data["realized_protection"] >= data["protection"] - 1e-9
    return {"kept": kept, "short_days": 0, "few_events": False}
