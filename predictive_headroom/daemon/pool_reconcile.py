"""One pool's reconcile: read what the plan needs, plan at this instant, and (as the leader) write.

`PoolReconciler` is the per-pool step of `loop.Daemon.reconcile`, which runs it for every pool
concurrently. It keeps what a pool's next plan depends on (the stabilisation history of recent
plans) and maps each kind of failure to the pool's outcome, so a failed pool never stops the
others: a lost Lease is a `follower` outcome, an API error an `error` outcome with its message.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from predictive_headroom.app.inputs import plan_inputs
from predictive_headroom.core.engine import plan_over_time
from predictive_headroom.core.planner import Plan, PlanRecord
from predictive_headroom.core.series import Forecast, NoForecast
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.vocabulary import MissingInput, NoForecastWhy, PoolAction
from predictive_headroom.daemon.components import Watches, parts_of, planned
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.observe import LoopObserver
from predictive_headroom.daemon.outcomes import PoolOutcome
from predictive_headroom.daemon.workers import SingleFlight
from predictive_headroom.daemon.writes import TargetWriter
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ActuatorError, ClusterState, LeaseLost

logger = logging.getLogger("predictive_headroom.daemon.loop")
"""The daemon's logger: these lines were always the loop's, and log filters select them by name."""


@dataclass
class PoolReconciler:
    """Plans one pool at an instant and brings its target to the plan; never raises for a pool."""

    inputs: Inputs
    observer: LoopObserver
    components: Watches
    """What reads each registered component's inputs, by name (`daemon.components`)."""
    writer: TargetWriter
    metrics: Metrics
    settings_for: Callable[[Pool], PlanSettings]
    """The settings a pool plans with now (`Daemon.settings_for`)."""
    stopping: threading.Event
    monotonic: Callable[[], float]
    recent: dict[str, list[PlanRecord]] = field(default_factory=dict)
    """Each pool's recent plans, which the scale-down stabilisation window reads."""
    observing: SingleFlight = field(default_factory=SingleFlight)
    """The closed loop's reads in flight, at most one per pool."""
    in_force: dict[str, PlanSettings] = field(default_factory=dict)
    """The settings each pool planned with at its last reconcile, resolved once a cycle: the
    refit requests read these (`RefitRequests.moved`) instead of resolving them again."""

    # Long on purpose: one pool's reconcile in order (plan, write, each failure kind mapped to its outcome).
    def reconcile(
        self,
        pool: Pool,
        at: float,
        leader: bool,
        forecast: Forecast | NoForecast | None,
        deadline: float = math.inf,
    ) -> PoolOutcome:
        """Plan `pool` at `at` with `forecast` and, when `leader`, write the plan to its target;
        the optional reads (the closed loop's) are waited for until `deadline` (monotonic)."""
        if self.stopping.is_set():  # leave the remaining pools as they are
            return PoolOutcome(pool.name, PoolAction.ERROR, error="skipped: the daemon is stopping")
        plan: Plan | None = None
        try:
            # measures its lead time (leadTime: auto); an optional read, waited for until the
            # deadline, and not started again while the last one still runs
            self.observing.run(
                pool.name,
                lambda: self.observer.observe(pool, at),
                max(0.0, deadline - self.monotonic()),
            )
            settings = self.in_force[pool.name] = self.settings_for(pool)
            cluster, cluster_note = self.inputs.cluster_state(pool)
            observed = self.inputs.observed(pool, forecast, at)
            parts = parts_of(self.components, pool, at, settings)
            inputs = plan_inputs(
                pool, settings, forecast=forecast, observed=observed, cluster=cluster, parts=parts
            )
            timeline = plan_over_time(pool, [at], inputs, self.recent.get(pool.name, ()))
            plan, self.recent[pool.name] = timeline.plans[0], list(timeline.recent)
            planned(self.components, pool, at, plan.desired)  # what the pool holds from now
            plan = self._with_lead_time(pool.name, plan)
            self.metrics.record_plan(plan)
            self.metrics.record_forecast(pool.name, forecast, at + settings.lead)
            failed = [cluster_note] if cluster_note and cluster is not None else []
            if not leader:
                return PoolOutcome(pool.name, PoolAction.FOLLOWER, plan, failed_reads=failed)
            outcome = self.writer.write(pool, plan, missing_input(pool, forecast, cluster))
            self.metrics.record_ownership(pool.name, outcome.action == PoolAction.REFUSED)
            if outcome.plan is not None and outcome.plan is not plan:  # held up for a missing input
                self.metrics.record_plan(outcome.plan)
            if outcome.current is not None and outcome.action != PoolAction.REFUSED:
                applied = (
                    outcome.plan.desired
                    if outcome.action == PoolAction.SCALED and outcome.plan
                    else outcome.current
                )
                self.metrics.applied.labels(pool=pool.name).set(applied)
            outcome.failed_reads.extend(failed)  # planned with the last count
            if cluster_note and cluster is None and outcome.error is None:
                outcome.error = cluster_note
            return outcome
        except LeaseLost as exc:
            logger.warning("%s", exc)
            return PoolOutcome(pool.name, PoolAction.FOLLOWER, plan)
        except ActuatorError as exc:
            logger.error("%s", exc)
            self.metrics.error("actuator")
            return PoolOutcome(pool.name, PoolAction.ERROR, plan, error=str(exc))
        except Exception as exc:
            logger.exception("pool %s: reconcile failed", pool.name)
            self.metrics.error("internal")
            return PoolOutcome(
                pool.name,
                PoolAction.ERROR,
                plan,
                error=f"pool {pool.name}: {type(exc).__name__}: {exc}",
            )

    def _with_lead_time(self, name: str, plan: Plan) -> Plan:
        """`plan` with the lead time the closed loop has for the pool (and where it came from)."""
        lead = self.observer.lead_times.get(name)
        if lead is None:
            return plan
        details = {
            **plan.details,
            "lead_time_seconds": lead.seconds,
            "lead_time_source": lead.source,
        }
        return dataclasses.replace(plan, details=details)

    def forget(self, removed: Collection[str]) -> None:
        """Drop the recent plans of pools that left the config."""
        for name in removed:
            self.recent.pop(name, None)
            self.in_force.pop(name, None)


def missing_input(
    pool: Pool, forecast: Forecast | NoForecast | None, cluster: ClusterState | None
) -> MissingInput | None:
    """Why the plan lacks an input it will have later (then the target is not scaled down)."""
    if isinstance(forecast, NoForecast) and forecast.why == NoForecastWhy.NOT_FITTED_YET:
        return MissingInput.NOT_FITTED_YET
    if pool.proportional is not None and cluster is None:
        return MissingInput.NO_CLUSTER_STATE
    return None
