"""The one verdict against fixed headroom: at the protection compared, on the days judged, did the
forecast cost no more than a fixed number of placeholders (docs/promise.md, "Against fixed
headroom").

A fixed N is either the static curve read at the protection the forecast kept (the daemon's
re-tune: `app.tuning.Tuning.against_fixed`) or the user's own N (`--current`: the promise's curve
read at the protection their N kept, `backtest.against_fixed.CurrentReplay`). Every command and
page that states the verdict (`tune`, `backtest` and its page, `plan`, `report` and its page, the
daemon's `/last-run` and `forecast_beats_fixed` metric) takes it from `verdict` and words it with
`Verdict.says`, so on the same days the same figures give the same answer; the days judged are
part of the sentence. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from predictive_headroom.core.vocabulary import Better

TOLERANCE = 1e-9
"""Node-hours a day within which the two costs count as equal (a tie goes to the forecast)."""


@dataclass(frozen=True)
class Verdict:
    """Which did better at protection `kept`: the forecast (its cost a day `forecast_per_day`;
    None: it never kept that protection) or a fixed N (`fixed_per_day`; None: no fixed N kept
    it), on the days `over` names."""

    better: Better
    kept: float
    forecast_per_day: float | None
    fixed_per_day: float | None
    fixed_replicas: int | None = None
    yours: bool = False
    """The fixed N is the user's own (`--current`), not the static curve's."""
    over: str = "over the days judged"

    @property
    def forecast_better(self) -> bool:
        """The forecast cost no more than the fixed N at that protection."""
        return self.better == Better.FORECAST

    def says(self) -> str:
        """The verdict in one sentence, with both costs and the days judged."""
        kept = f"{100 * self.kept:.1f}%"
        fixed, ours = self.fixed_per_day, self.forecast_per_day
        if self.yours:
            n = self.fixed_replicas
            if self.forecast_better:
                return f"predictive headroom beat your fixed {n} {self.over}"
            return f"your fixed {n} did better {self.over}"
        if self.forecast_better:
            static = (
                "no fixed N kept that"
                if fixed is None
                else f"static headroom needed {fixed:,.1f} for the same"
            )
            return (
                f"the forecast beat fixed headroom {self.over}: it kept {kept} for "
                f"{_nh(ours)} overhead node-hours a day, {static}"
            )
        n = self.fixed_replicas
        return (
            f"the forecast did not beat a fixed N {self.over}: static headroom kept {kept} for "
            f"{_nh(fixed)} overhead node-hours a day, the forecast for {_nh(ours)}"
            + ("" if n is None else f" (fixed headroom: minReplicas: {n}, forecast off)")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "better": str(self.better),
            "forecast_beats_fixed": self.forecast_better,
            "kept": round(self.kept, 4),
            "forecast_node_hours_per_day": _round(self.forecast_per_day),
            "fixed_node_hours_per_day": _round(self.fixed_per_day),
            "fixed_replicas": self.fixed_replicas,
            "yours": self.yours,
            "over": self.over,
            "says": self.says(),
        }


def verdict(
    kept: float,
    forecast_per_day: float | None,
    fixed_per_day: float | None,
    *,
    fixed_replicas: int | None = None,
    yours: bool = False,
    over: str = "over the days judged",
) -> Verdict:
    """The forecast did better when it kept protection `kept` (its cost a day not None) for no
    more than the fixed N's cost a day at the same protection (or no fixed N kept it); else the
    fixed N did."""
    better = (
        Better.FORECAST
        if forecast_per_day is not None
        and (fixed_per_day is None or forecast_per_day <= fixed_per_day + TOLERANCE)
        else Better.FIXED
    )
    return Verdict(better, kept, forecast_per_day, fixed_per_day, fixed_replicas, yours, over)


def _nh(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def why_they_differ(yours: Mapping[str, Any], daemon: Mapping[str, Any] | None) -> str:
    """Why two verdicts (`Verdict.to_dict`) shown together disagree: the one against the user's N
    at the protection it kept over the whole history, and the daemon's against the static curve
    at the protection the forecast kept over the days its re-tune judged ('' when they agree or
    either is missing)."""
    if not daemon or not yours or yours.get("better") == daemon.get("better"):
        return ""
    return (
        "the two verdicts differ because they compare different things: your fixed "
        f"{yours.get('fixed_replicas')} at the {_pct(yours.get('kept'))} it kept "
        f"{yours.get('over')}, and the static curve at the {_pct(daemon.get('kept'))} the "
        f"forecast kept {daemon.get('over')} (what the daemon would hold now)"
    )


def _pct(share: object) -> str:
    return f"{100 * share:.1f}%" if isinstance(share, int | float) else "protection"
