"""What a re-tune of a `protection:` pool chose at one refit, and how every page, command and
metric says it (`Tuning`): asked and kept, for what, what it holds, why it falls short, and
its verdict against fixed headroom. `app.tune.retune` makes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from predictive_headroom.core.price import Price
from predictive_headroom.core.series import iso_utc
from predictive_headroom.core.settings import Tuned
from predictive_headroom.core.shortfall import Shortfall, reserve_words, shortfall_cause
from predictive_headroom.core.verdict import verdict
from predictive_headroom.core.vocabulary import PlanReason, TuningStatus
from predictive_headroom.replay.fallback import FixedHold
from predictive_headroom.replay.promise_price import Level, price_of_promise
from predictive_headroom.replay.shadow import Shadow


def plural(n: int, word: str) -> str:
    """`1 day`, `2 days`."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class Tuning:
    """What a re-tune chose for one pool at one refit, and why.

    `status`: `tuned` (the rule's choice), `short` (no strictness kept the target on the days
    judged: the most protective one, with its reserve), `default` (could not tune: the pool's
    defaults, see `reason`).
    `protection` and `overhead_node_hours` are those of the chosen setting on the replayed days
    (None for `default`)."""

    pool: str
    status: TuningStatus
    burst_quantile: float
    stabilization_seconds: float
    target: float
    reason: str
    at: float
    protection: float | None = None
    overhead_node_hours: float | None = None
    days: float = 0.0
    fitted_until: float | None = None
    seconds: float = 0.0
    reserve: int = 0
    realized_protection: float | None = None
    """The protection the rule kept on the last `LOOKBACK` replayed days, each day's setting and
    reserve chosen on the days before it (None: not tuned, or nothing waited then)."""
    strictness: float | None = None
    kept_overhead_node_hours: float | None = None
    """Overhead node-hours over no headroom of the choices that kept `realized_protection`, on
    the same `kept_days` days."""
    kept_days: int = 0
    retunes_from: float | None = None
    """For `default` on too short a history: when the history will be long enough to tune."""
    levels: tuple[Level, ...] = ()
    """The frontier on the judged days (`replay.promise_price`): asked, kept, cost a day, and
    static headroom in hindsight for the same."""
    short_days: int = 0
    """Days read on which no candidate kept the target."""
    capped_days: int = 0
    """Days read on which the held candidate sat at `maxReplicas` while pods waited."""
    max_replicas: int | None = None
    cap_name: str = "maxReplicas"
    """The cap `max_replicas` is (`core.components.static_cap_name`)."""
    fixed: tuple[int, float] | None = None
    """The fewest fixed placeholders that kept the target over the days read, and what they kept."""
    node_slots: int | None = None
    """Placeholders a simulated node held in the replay (the node priced; None: not replayed)."""
    fixed_hold: FixedHold | None = None
    """Held instead of the forecast (status `fixed`, `protectionFallback: fixed`), and why."""
    shadow: Shadow | None = None
    """In dry-run: the user's live N beside the plan over the days judged (`replay.shadow`)."""
    weeks: dict[str, Any] | None = None
    """How sure the promise is: what `tune`'s rule kept on every unseen week of the history the
    choice read, each chosen on the days before it, as `/last-run` and the report show it (the
    choice's `Recommendation.weeks.to_dict()`, `backtest.weeks`, made by the caller above this
    layer; None: not judged by week)."""

    choice: dict[str, Any] | None = None
    """`tune`'s choice this refit held (`app.choice.TuneChoice.to_dict`; None: not made)."""
    read: str | None = None
    """The history `tune`'s choice read, in words (`app.choice.read_words`)."""

    def cause(self) -> Shortfall | None:
        """Why it keeps less than asked (`core.shortfall`, the one function `tune`, the backtest
        and the report share), None when it does not fall short."""
        if self.status == TuningStatus.DEFAULT and self.retunes_from is not None:
            return shortfall_cause(self.target, retunes_from=self.retunes_from)
        if not self.shortfall and self.status != TuningStatus.SHORT:
            return None
        return shortfall_cause(
            self.target,
            short_days=self.short_days,
            of_days=max(1, round(self.days)),
            capped_days=self.capped_days,
            max_replicas=self.max_replicas,
            fixed=self.fixed,
            cap_name=self.cap_name,
        )

    def against_fixed(self) -> dict[str, Any] | None:
        """Whether the forecast beat fixed headroom over the days judged (`core.verdict`, the one
        verdict every command and page says): its cost a day against static headroom's at the
        protection it kept (`levels` at the target), naming the fewest fixed placeholders that
        kept the target over the days read. None: no figure. With `tune`'s choice made (`choice`),
        its verdict: the same function on the same days `tune` judges
        (`backtest.pasted.verdict_on`)."""
        if self.choice and self.choice.get("verdict"):
            return dict(self.choice["verdict"])
        days = f"the last {plural(self.kept_days, 'day')}" if self.kept_days else "the days"
        over = f"over {days} judged to {iso_utc(self.at)}"
        hold = self.fixed_hold
        level = next((lv for lv in self.levels if abs(lv.asked - self.target) < 1e-9), None)
        if (level is None or level.kept is None) and hold is not None:
            # A fixed N held instead (tune's choice): the forecast's figures it was judged on.
            return verdict(
                hold.forecast_kept,
                hold.forecast_per_day,
                hold.static_per_day,
                fixed_replicas=hold.replicas,
                over=over,
            ).to_dict()
        if level is None or level.kept is None:
            return None
        judged = verdict(
            level.kept,
            level.per_day,
            level.static_per_day,
            fixed_replicas=None if self.fixed is None else self.fixed[0],
            over=over,
        )
        return judged.to_dict()

    @property
    def overhead_per_day(self) -> float | None:
        """The overhead node-hours a day of what kept `realized_protection` (None: no figure)."""
        if self.kept_overhead_node_hours is None or not self.kept_days:
            return None
        return self.kept_overhead_node_hours / self.kept_days

    @property
    def tuned(self) -> Tuned:
        """What `core.settings.resolve_settings` takes from this re-tune: the chosen quantile,
        window and reserve, or nothing when it could not tune (`default`: the pool's own settings
        stand)."""
        if self.status == TuningStatus.DEFAULT:
            return Tuned()
        if self.fixed_hold is not None:
            return Tuned(
                self.burst_quantile, self.stabilization_seconds, 0, self.fixed_hold.replicas
            )
        return Tuned(self.burst_quantile, self.stabilization_seconds, self.reserve)

    def says(self) -> str:
        """ "asked 95%, last week 96.1%" (or why there is no figure)."""
        asked = f"asked {100 * self.target:g}%"
        if self.realized_protection is None:
            if self.status == TuningStatus.DEFAULT:
                return f"{asked}, last week: no figure (not tuned yet)"
            return f"{asked}, last week: no figure (nothing waited for a node)"
        return f"{asked}, last week {100 * self.realized_protection:.1f}%"

    def says_with_cost(self, price: Price | None = None) -> str:
        """ "asked 95%, last week 96.1% for 12.3 overhead node-hours a day (9.84 USD)" (or why
        there is no figure)."""
        asked = f"asked {100 * self.target:g}%"
        if self.realized_protection is None:
            if self.status == TuningStatus.DEFAULT:
                return f"{asked}, last week: no figure (not tuned yet: {self.holding()})"
            return f"{asked}, last week: no figure (nothing waited for a node)"
        text = f"{asked}, last week {100 * self.realized_protection:.1f}%"
        per_day = self.overhead_per_day
        if per_day is not None:
            money = price.text(per_day) if price is not None else ""
            text += f" for {per_day:,.1f} overhead node-hours a day" + (
                f" ({money})" if money else ""
            )
        return text

    def holding(self) -> str:
        """What the daemon holds: `burstQuantile 0.99, scaleDownStabilization 5m and a reserve of
        3 placeholders`, with the day it starts re-tuning when it cannot yet; `40 fixed
        placeholders (fixed-headroom: the forecast set aside)` while the fallback holds."""
        if self.fixed_hold is not None:
            return (
                f"{plural(self.fixed_hold.replicas, 'fixed placeholder')} "
                f"({PlanReason.FIXED_HEADROOM}: the forecast set aside)"
            )
        text = (
            f"burstQuantile {self.burst_quantile:g}, scaleDownStabilization "
            f"{self.stabilization_seconds / 60:g}m"
        )
        if self.reserve:
            text += f" and {reserve_words(self.reserve, self.max_replicas, self.cap_name)}"
        if self.retunes_from is not None:
            text += (
                f" until {iso_utc(self.retunes_from)}, when the history is long enough to re-tune"
            )
        return text

    def report(self, price: Price | None = None) -> dict[str, Any]:
        """What the report, `plan` and `tune` show of the promise: asked, kept over the last days
        judged and for what (node-hours and money a day, priced by `price`), what it holds, `says`,
        `short` (a shortfall: a warning) and the `reason`."""
        per_day = self.overhead_per_day
        money = None if price is None or per_day is None else price.money(per_day)
        return {
            "asked": self.target,
            "kept": None
            if self.realized_protection is None
            else round(self.realized_protection, 4),
            "days_judged": self.kept_days,
            "overhead_node_hours_per_day": None if per_day is None else round(per_day, 3),
            "money_per_day": None if money is None else round(money, 2),
            "currency": None if price is None else price.currency,
            "price_assumed": None if price is None else price.assumed,
            "status": self.status,
            "burst_quantile": self.burst_quantile,
            "scale_down_stabilization_seconds": self.stabilization_seconds,
            "reserve": self.reserve,
            "holding": self.holding(),
            "retunes_from": None if self.retunes_from is None else iso_utc(self.retunes_from),
            "says": self.says(),
            "in_full": self.says_with_cost(price),
            "short": self.shortfall,
            "reason": self.reason,
            "price": price_of_promise(self.levels, self.target, price) if self.levels else None,
            "cause": _dict_or_none(self.cause()),
            "against_fixed": self.against_fixed(),
            "node_slots": self.node_slots,
            **self._fallback_and_shadow(),
        }

    def _fallback_and_shadow(self) -> dict[str, Any]:
        """`fixed_headroom` (the N held instead of the forecast, and why; None: the forecast
        plans) and `shadow` (the user's live N beside the plan; None: not in dry-run)."""
        hold = self.fixed_hold
        return {
            "fixed_headroom": None
            if hold is None
            else {
                "replicas": hold.replicas,
                "kept": round(hold.kept, 4),
                "why": str(hold.why),
                "says": hold.says(self.target),
            },
            "shadow": None if self.shadow is None else self.shadow.to_dict(),
            "unseen_weeks": self.weeks,
            "choice": self.choice,
            "history_read": self.read,
        }

    @property
    def shortfall(self) -> bool:
        """The last week kept less than asked."""
        return (
            self.realized_protection is not None and self.realized_protection < self.target - 1e-9
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "burst_quantile": self.burst_quantile,
            "scale_down_stabilization_seconds": self.stabilization_seconds,
            "protection_target": self.target,
            "protection_reached": None if self.protection is None else round(self.protection, 4),
            "overhead_node_hours": None
            if self.overhead_node_hours is None
            else round(self.overhead_node_hours, 2),
            "days": round(self.days, 2),
            "fitted_until": self.fitted_until,
            "at": self.at,
            "seconds": round(self.seconds, 2),
            "reserve": self.reserve,
            "realized_protection": None
            if self.realized_protection is None
            else round(self.realized_protection, 4),
            "strictness": self.strictness,
            "kept_overhead_node_hours": None
            if self.kept_overhead_node_hours is None
            else round(self.kept_overhead_node_hours, 3),
            "kept_days": self.kept_days,
            "retunes_from": None if self.retunes_from is None else iso_utc(self.retunes_from),
            "says": self.says(),
            "reason": self.reason,
            "cause": _dict_or_none(self.cause()),
            "against_fixed": self.against_fixed(),
            "node_slots": self.node_slots,
            **self._fallback_and_shadow(),
        }


def _dict_or_none(cause: Shortfall | None) -> dict[str, Any] | None:
    return None if cause is None else cause.to_dict()
