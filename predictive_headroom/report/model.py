"""The report's values: one `PoolReport` per pool in a `Report`, with the `Notice`s a reviewer
must see. `build.build_report` makes them, `notices` adds the warnings, and `html` and
`build.report_to_json` show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from predictive_headroom.core.engine import HORIZON_STEP_SECONDS
from predictive_headroom.core.planner import Plan
from predictive_headroom.core.series import Forecast, History
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import ForecastStatus
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import TargetCondition
from predictive_headroom.report.analysis import HeadroomCost, PastForecast, Peak


@dataclass(frozen=True)
class Notice:
    """A warning a reviewer must see: `code` is stable for machines, `message` is for people."""

    code: str
    message: str


@dataclass(frozen=True)
class PoolReport:
    """Everything the report shows for one pool."""

    pool: Pool
    recent: History | None
    history_points: int
    history_seconds: float
    forecast: Forecast | None
    forecast_status: ForecastStatus | str
    """`ForecastStatus`, or the `NoForecast.why` of a pool without a forecast."""
    forecast_detail: str
    now: Plan
    plan_times: np.ndarray
    plan_desired: np.ndarray
    plan_reasons: tuple[str, ...]
    windows: tuple[tuple[str, float, float], ...]
    peaks: tuple[Peak, ...]
    accuracy: dict[str, Any] | None
    past: tuple[PastForecast, ...]
    cost: HeadroomCost
    notices: tuple[Notice, ...]
    settings: PlanSettings
    """The settings the pool was planned with."""
    burst: dict[str, Any] | None = None
    """The burst model's allowance over the last day before now, next to demand (`burst_chart_data`)."""
    loop: Mapping[str, Any] | None = None
    """What the daemon measured in the cluster (`LoopObserver.status`); None outside the daemon."""
    step_seconds: float = HORIZON_STEP_SECONDS
    """The row grid of the plan; the rows also include every instant the plan changes."""
    promise: Mapping[str, Any] | None = None
    """What the daemon's re-tune says of the protection kept (`Tuning.report`); None otherwise."""
    target_conditions: tuple[TargetCondition, ...] = ()
    """The target's status conditions at the daemon's last reconcile (a CapacityBuffer's, as its
    autoscaler reports them); empty outside the daemon and for a Deployment."""

    @property
    def lead_seconds(self) -> float:
        """The lead time the pool plans with (measured with `leadTime: auto` in the daemon)."""
        return self.settings.lead

    @property
    def demand_per_replica(self) -> float:
        """The demand one placeholder serves (1 for a pool without a forecast section)."""
        per_replica = self.settings.demand_per_replica
        return per_replica.value if per_replica is not None else 1.0


@dataclass(frozen=True)
class Report:
    """The whole report: one PoolReport per pool, made at `at` (POSIX seconds)."""

    at: float
    pools: tuple[PoolReport, ...]
    source: str = ""
