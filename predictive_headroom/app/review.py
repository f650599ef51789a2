"""What the daemon would do for one pool at one instant, for the commands that review it.

`plan`, `report` and `forecast` fit every pool through `app.fit.fit_pools` with the daemon's
re-tune window; `tune` and `backtest --protection` end with `daemon_now`: the same fit
(`app.fit.fit_one`: the re-tune a `protection:` pool runs at a refit, then the fit at the setting
it chose) and the same plan (`core.engine.plan_over_time`, the reserve added by the planner), so
every command names the same setting, reserve, protection kept and placeholder count for the
same data and instant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from predictive_headroom.app.fit import fit_one
from predictive_headroom.app.hold import ChoiceOptions
from predictive_headroom.app.inputs import plan_inputs
from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import Part
from predictive_headroom.core.engine import plan_over_time
from predictive_headroom.core.planner import Plan
from predictive_headroom.core.price import Price
from predictive_headroom.core.series import iso_utc
from predictive_headroom.core.settings import Given, PlanSettings
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster, Source

PartsReader = Callable[[PlanSettings], Mapping[str, Part]]
"""Every registered component of a pool at the instant planned, for the settings in force."""


@dataclass(frozen=True)
class DaemonNow:
    """The plan the daemon would write for a pool at `at`, and what its re-tune says of the
    promise (None for a pool without `protection:`)."""

    pool: str
    at: float
    plan: Plan
    promise: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": iso_utc(self.at),
            "replicas": self.plan.desired,
            "reason": self.plan.reason,
            "components": dict(self.plan.components),
            "promise": self.promise,
            "sentence": self.sentence(),
        }

    def sentence(self) -> str:
        """`the daemon at T: 40 placeholders (max); protection asked 95%, last week ...; holding
        ...; the forecast beat fixed headroom over ...` in one line."""
        text = f"the daemon at {iso_utc(self.at)}: {self.plan.desired} placeholders ({self.plan.reason})"
        if self.promise is not None:
            text += f"; protection {self.promise['in_full']}; holding {self.promise['holding']}"
            against = self.promise.get("against_fixed")
            if against:  # the one verdict (`core.verdict`), as the report says it
                text += f"; {against['says']}"
        return text


def daemon_now(
    pool: Pool,
    source: Source,
    at: float,
    forecaster: Forecaster,
    price: Price,
    *,
    retune_window: float,
    cluster: ClusterState | None = None,
    given: Given | None = None,
    parts: PartsReader | None = None,
    choice: ChoiceOptions | None = None,
) -> DaemonNow:
    """Fit `pool` at `at` as the daemon's refit does (re-tuned on `retune_window` seconds when it
    has `protection:`, or is given one: `given`, a what-if through the resolver, simulating the
    node `price` prices) and plan that instant as its reconcile does, from the same `PlanInputs`:
    the forecast, the latest observations, `cluster` and every registered component `parts`
    reads for the settings in force (`replay.planner.replay_parts` in a replay, as the daemon's
    `daemon.components.parts_of`); `price` prices the promise's cost a day; `choice`: how the
    refit makes `tune`'s choice (`app.hold`; None: the re-tune alone)."""
    fit = fit_one(
        pool,
        source,
        at,
        forecaster,
        observe=True,
        retune_window=retune_window,
        given=given,
        price=price,
        choice=choice,
    )
    assert fit.settings is not None  # a pool with a forecast section is always resolved
    found = {} if parts is None else dict(parts(fit.settings))
    inputs = plan_inputs(
        pool,
        fit.settings,
        forecast=fit.forecast,
        observed=fit.observed,
        cluster=cluster,
        parts=found,
    )
    plan = plan_over_time(pool, [at], inputs).plans[0]
    promise = None if fit.tuning is None else fit.tuning.report(price)
    return DaemonNow(pool.name, at, plan, promise)
