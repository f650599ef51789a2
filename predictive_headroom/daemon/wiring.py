"""The parts a `loop.Daemon` is built from: its edges (what it reads and writes through) and its
options (how often, how long, whether it writes at all).

The shell (`commands/run.py`) builds both once, from the environment and the Kubernetes client;
tests build them with fakes. The daemon holds no client it did not get here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from predictive_headroom.app.hold import ChoiceOptions
from predictive_headroom.app.tune import RETUNE_WINDOW
from predictive_headroom.core.components import Part
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.leadership import Elector
from predictive_headroom.policy.config import Policy
from predictive_headroom.protocols import (
    Actuator,
    Caches,
    ClusterReader,
    Forecaster,
    PodReader,
    Source,
    TargetApis,
    TargetCondition,
)

POOL_WORKERS = 8
"""How many pools one reconcile serves at a time: a slow API call holds one pool, not all."""

ReportWriter = Callable[
    [
        Policy,
        Mapping[str, Forecast | NoForecast],
        Mapping[str, History],
        float,
        Mapping[str, Mapping[str, Any]],
        Mapping[str, PlanSettings],
        Mapping[str, Mapping[str, Any]],
        Mapping[str, Mapping[str, Part]],
        Mapping[str, Sequence[TargetCondition]],
    ],
    Any,
]
"""Writes the report after a refit: (policy, forecasts, histories, at, closed loop per pool,
settings per pool, the last registered components per pool by name, the targets' conditions
per pool) -> anything (e.g. its path). The
settings are those the reconcile plans with (measured lead time, tuned quantile and window)."""


@dataclass(frozen=True)
class Edges:
    """Everything the daemon reads from or writes to, passed in (no module-level clients)."""

    forecaster: Forecaster
    actuator: Actuator
    """Writes a target's `/scale` (the Deployment or CapacityBuffer)."""
    cluster: ClusterReader
    """Lists the nodes (proportional rule, closed loop, leaving nodes)."""
    source: Source | None = None
    """Demand history and the latest observations; None when no pool forecasts."""
    elector: Elector | None = None
    """Who leads; None: always the leader (one replica, `--once`)."""
    pods: PodReader | None = None
    """Pod reads of the closed loop and of the pods on leaving nodes; None: not read."""
    caches: Caches | None = None
    """The list-and-watch caches `cluster` and `pods` read from: readiness waits for them and
    /last-run shows them; None: the reads LIST every reconcile."""
    target_apis: TargetApis | None = None
    """Which CapacityBuffer API versions the cluster serves; None: not asked."""
    report_writer: ReportWriter | None = None
    """Called after each refit with what the report needs; None: no report is written."""
    clock: Callable[[], float] = time.time
    """What time it is for the plan (schedules, forecasts)."""
    monotonic: Callable[[], float] = time.monotonic
    """The clock ages are measured on (`/readyz`, the watchdog), never the wall clock."""


@dataclass(frozen=True)
class DaemonOptions:
    """How the daemon runs: its timings and whether it writes."""

    dry_run: bool = False
    """Log `DRY-RUN would scale ...` and send writes with dryRun=All."""
    interval: float = 60.0
    """Seconds between reconciles (the health watchdog allows 3 of them)."""
    deadline: float | None = None
    """Seconds a pool's reconcile waits for its optional reads; None: `default_deadline`."""
    pool_workers: int = POOL_WORKERS
    """Pools are reconciled concurrently, at most this many at a time."""
    retune_window: float = RETUNE_WINDOW
    """Seconds of recent history a pool with `protection:` is re-tuned on at each refit."""
    choice: ChoiceOptions = field(default_factory=ChoiceOptions)
    """How a refit makes `tune`'s choice for a `protection:` pool (`app.hold`): the history it
    reads at most, the refits it keeps."""
    loop: LoopSettings | None = None
    """The closed loop's settings (node boots, placeholder starts); None: the defaults."""

    def reconcile_deadline(self) -> float:
        """`deadline`, or `default_deadline(interval)` when none was set."""
        return default_deadline(self.interval) if self.deadline is None else self.deadline


def default_deadline(interval: float) -> float:
    """Half the interval, at most 20 s: well inside the health watchdog's 3 intervals, and long
    enough for one list of a large cluster's pods."""
    return min(interval / 2, 20.0)
