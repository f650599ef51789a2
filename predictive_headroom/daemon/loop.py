"""The daemon: refit forecasts on a schedule and reconcile every pool's target to its plan.

`Daemon` holds the loop logic and takes every collaborator from its caller in two values
(`wiring.Edges`: source, forecaster, actuator, cluster reader, leader elector, clocks, API
discovery, report writer; `wiring.DaemonOptions`: timings, dry run), so tests drive it with fakes
or with real clients. `configfile.ConfigFile` watches the policy file; `targetapis` tracks the API
each target is written through (CapacityBuffer versions). `scheduling.Runner` runs it on
APScheduler until stopped; what one reconcile did is an `outcomes.ReconcileResult`, one pool's
step is `pool_reconcile.PoolReconciler`'s, and `refit_requests.RefitRequests` says when a pool is
refitted outside the schedule. Decisions stay in the pure planner; this module reads and plans,
and `writes.TargetWriter` writes on change and remembers what it wrote.

Safety rules (the per-target ones are enforced by `writes.TargetWriter`):
- only the leader writes, and each write attempt only while its Lease has time left (the
  actuator's fence; a write abandoned for a lost Lease is a `follower` outcome); followers still
  refit and plan, so a takeover starts with warm
  forecasts and stabilisation history (no scale-down on failover);
- a target paused with the kill-switch annotation is left alone;
- a replica count changed by a person is left alone until the plan's desired value changes;
- missing inputs never lower the count: until the first refit, or when a proportional pool's
  nodes were never read, the target is not scaled below what it has;
- a failed pool is reported and the others are still served; a failed cycle is counted;
- ages (`/readyz`, the loop's `health()` the elector asks before renewing) are measured on the
  monotonic clock; the wall clock only says what time it is for the plan;
- pools are reconciled concurrently (at most `pool_workers` at once), so one slow API call
  holds one pool only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from predictive_headroom.app.fit import PoolFit, fit_one, keep_usable
from predictive_headroom.app.tuning import Tuning
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import PlanSettings, resolve_settings
from predictive_headroom.core.vocabulary import NoForecastWhy
from predictive_headroom.daemon.components import Readers, disruption_of, last_parts, watches
from predictive_headroom.daemon.configfile import ConfigFile, same_forecast
from predictive_headroom.daemon.health import LoopWatch, ReadinessLog
from predictive_headroom.daemon.inputs import Inputs
from predictive_headroom.daemon.last_run import last_run
from predictive_headroom.daemon.leadership import AlwaysLeader, Elector
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.observe import LoopObserver
from predictive_headroom.daemon.outcomes import ReconcileResult
from predictive_headroom.daemon.pool_reconcile import PoolReconciler
from predictive_headroom.daemon.refit_record import (
    Refitted,
    kept_tunings,
    plausible_max,
    record_refit,
    settled,
    write_report,
)
from predictive_headroom.daemon.refit_requests import RefitRequests
from predictive_headroom.daemon.removed import RemovedPools
from predictive_headroom.daemon.shadow import LiveReplicas, read_live, warn_adopted
from predictive_headroom.daemon.spend import SpendStore
from predictive_headroom.daemon.targetapis import TargetApiTracker
from predictive_headroom.daemon.wiring import DaemonOptions, Edges
from predictive_headroom.daemon.workers import map_bounded
from predictive_headroom.daemon.writes import TargetWriter
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import NodePodReader, TargetCondition

logger = logging.getLogger(__name__)


class Daemon:
    """Refits forecasts and reconciles targets for the policy in `config_path` (reloaded on change)."""

    # Long on purpose: the collaborators and state, one assignment each with what it holds.
    def __init__(
        self,
        config_path: str | Path,
        policy: Policy,
        edges: Edges,
        options: DaemonOptions | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        options = options or DaemonOptions()
        self.metrics = metrics or Metrics()
        self.config = ConfigFile(config_path, self.metrics)
        self.config_path = self.config.path
        self.policy = policy
        self.source, self.forecaster = edges.source, edges.forecaster
        self.actuator, self.cluster = edges.actuator, edges.cluster
        self.elector: Elector = edges.elector or AlwaysLeader()
        self.clock, self.dry_run, self.interval = edges.clock, options.dry_run, options.interval
        self.monotonic = edges.monotonic
        """Ages are measured on this clock (`watch`), never on the wall clock `clock`, which only
        says what time it is for the plan (schedules, forecasts)."""
        self.report_writer = edges.report_writer
        self.on_reload: Callable[[set[str]], None] | None = None
        """Called after a config switch with the pools whose forecast must be refitted now."""
        self.refit_soon: Callable[[list[str]], None] | None = None
        """Asked to refit these pools now (their measured lead time moved; `scheduling.Runner`)."""
        self.refit_later: Callable[[list[str], float], None] | None = None
        """Asked to refit these pools again in so many seconds (their refit failed)."""
        self.refits = RefitRequests()
        """Early refits: a pool whose settings moved, a pool whose fit failed (with backoff)."""
        self.report_error: str | None = None
        """Why the last report could not be written (None: it was, or none was due yet)."""
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._forecasts: dict[str, Forecast | NoForecast] = {
            p.name: NoForecast(NoForecastWhy.NOT_FITTED_YET)
            for p in policy.pools
            if p.forecast and p.forecast.enabled
        }
        self.inputs = Inputs(edges.source, edges.cluster, self.metrics)
        self.observer = LoopObserver(self.inputs, edges.pods, self.metrics, options.loop)
        """The closed loop: node boots, placeholder starts and preemptions; `leadTime: auto`."""
        self.components = watches(self._readers(edges))
        """What reads each registered component's inputs, by name (`daemon.components`)."""
        self.disruption = disruption_of(self.components)
        """Nodes on their way out and the room their pods need (the disruption component)."""
        self.deadline = options.reconcile_deadline()
        """Seconds a pool's reconcile waits for its optional reads (the closed loop's, the pods
        on leaving nodes) before it plans and writes without them."""
        self.removed = RemovedPools(edges.actuator, self.metrics, edges.monotonic)
        """Placeholders of pools that left the policy, scaled to 0 when due (as the leader)."""
        self.writer = TargetWriter(
            edges.actuator, dry_run=options.dry_run, is_leader=lambda: self.elector.is_leader
        )
        self.pool_reconciler = PoolReconciler(
            self.inputs,
            self.observer,
            self.components,
            self.writer,
            self.metrics,
            self.settings_for,
            self.stopping,
            edges.monotonic,
        )
        """One pool's reconcile (plan, write, failures as outcomes) and its recent plans."""
        self.target_apis = TargetApiTracker(edges.target_apis)
        self.pool_workers = options.pool_workers
        """Pools are reconciled concurrently, at most this many at a time."""
        self.last_reconcile: ReconcileResult | None = None
        self.last_success_at: float | None = None
        self.last_refit: dict[str, Any] | None = None
        self.retune_window = options.retune_window
        self.choice = options.choice
        self.warned_adoption: set[str] = set()
        """Pools told the budget their adopted Deployment's live N spends."""
        """How a refit makes `tune`'s choice for a `protection:` pool (`app.hold`)."""
        """Seconds of recent history a pool with `protection:` is re-tuned on at each refit."""
        self.tunings: dict[str, Tuning] = {}
        """Each `protection:` pool's setting chosen at its last refit (`app.tune`)."""
        self.live = LiveReplicas(options.retune_window)
        """In dry-run, each target's replicas over time (the user's N), for the shadow."""
        self.watch = LoopWatch(edges.monotonic, options.interval)
        self.readiness_log = ReadinessLog()
        self.caches = edges.caches
        """The list-and-watch caches of the cluster reads (None: they LIST every reconcile)."""

    def _readers(self, edges: Edges) -> Readers:
        """What the components' inputs are read through: the edges' node pods (when they list
        them), the Lease the day's spend is kept on (when the elector keeps one)."""
        return Readers(
            self.inputs,
            self.metrics,
            edges.pods if isinstance(edges.pods, NodePodReader) else None,
            self.observer.settings.read_node_pods,
            edges.monotonic,
            lambda: self.policy.cost,
            edges.elector if isinstance(edges.elector, SpendStore) else None,
        )

    # -- refit ---------------------------------------------------------------------------------

    def forecasts(self) -> dict[str, Forecast | NoForecast]:
        """The forecasts in use (a snapshot; refits swap in a new mapping when complete)."""
        return self._forecasts

    def refit(self, pools: Collection[str] | None = None) -> bool:
        """Fit the forecast of `pools` (default every forecasting pool) and swap them in when done.

        Returns False when the refit was abandoned because the daemon is stopping; nothing is
        swapped in then. A failed fit keeps the last good forecast until it expires.
        """
        policy, at, started = self.policy, self.clock(), time.perf_counter()
        chosen = [
            p for p in policy.pools if p.forecast is not None and (pools is None or p.name in pools)
        ]
        if not chosen:
            return True
        if self.source is None:
            raise RuntimeError(
                "pools forecast but no demand source is configured (set PH_PROMETHEUS_URL)"
            )
        if self.dry_run:  # the start-up refit comes before the first reconcile
            read_live(self.live, self.actuator, chosen, at)
        fresh: dict[str, Forecast | NoForecast] = {}
        fits: dict[str, PoolFit] = {}
        for pool in chosen:
            if self.stopping.is_set():
                logger.info("refit abandoned: the daemon is stopping")
                return False
            if self._superseded(policy, pool.name):
                continue
            fresh.update(self._fit_one(policy, pool, at, fits))
        if self.stopping.is_set():
            logger.info("refit abandoned: the daemon is stopping; its forecasts are discarded")
            return False
        with self._lock:  # reloaded meanwhile: keep the results whose spec did not change
            fresh = {n: f for n, f in fresh.items() if not self._superseded(policy, n)}
            merged = {**self._forecasts, **keep_usable(self._forecasts, fresh, at)}
            self._forecasts = merged
            tunings = kept_tunings(fits, fresh)
            self.tunings.update(tunings)
        histories = {n: f.history for n, f in fits.items() if f.history is not None}
        seconds = time.perf_counter() - started
        self.last_refit = record_refit(self.metrics, Refitted(fits, fresh, merged, tunings), at)
        self.last_refit["seconds"] = round(seconds, 3)
        if any(isinstance(fc, Forecast) for fc in fresh.values()):
            self.metrics.last_refit.set(self.clock())
        self._retry_failed(fresh)
        self._write_report(policy, merged, histories, at, settled(fits, fresh, tunings))
        return True

    def _superseded(self, policy: Policy, name: str) -> bool:
        """Whether pool `name`'s forecast spec in `policy` (the one this refit started with) is no
        longer the one in force: its fit is stale, skipped or dropped with a log line (the
        reload asked for a refit of the new spec)."""
        if self.policy is policy or same_forecast(policy, self.policy, name):
            return False
        logger.info(
            "pool %s: its config changed during this refit; the fit for the old config is dropped "
            "(the refit of the new config follows)",
            name,
        )
        return True

    def _retry_failed(self, fresh: Mapping[str, Forecast | NoForecast]) -> None:
        """Ask for another try of the pools whose fit failed (backoff); /last-run says when."""
        retry = self.refits.after_refit(fresh, self.clock())
        if self.last_refit is not None:
            self.last_refit["next_retry"] = retry.to_dict() if retry else None
        if retry is not None and self.refit_later is not None:
            self.refit_later(list(retry.pools), retry.at - self.clock())

    def _fit_one(
        self,
        policy: Policy,
        pool: Pool,
        at: float,
        fits: dict[str, PoolFit],
    ) -> dict[str, Forecast | NoForecast]:
        """Fit `pool` (its settings resolved once, `app.fit.fit_one`), keep its fit in `fits`
        and return its forecast (a failure of its own as a NoForecast)."""
        assert self.source is not None
        self.refits.fitting(pool.name)
        try:
            fit = fit_one(
                pool,
                self.source,
                at,
                self.forecaster,
                retune_window=self.retune_window,
                measured_lead=self.observer.measured_lead(pool),
                price=pool_price(pool, policy.cost),  # the node its re-tune simulates
                live=self.live.reads(pool.name) if self.dry_run else (),
                ceiling=plausible_max(self._forecasts.get(pool.name)),
                choice=self.choice,
            )
        except Exception as exc:  # a broken fit of one pool must not stop the others
            logger.exception("pool %s: forecast fit failed", pool.name)
            self.metrics.error("fit")
            return {pool.name: NoForecast(NoForecastWhy.FIT_ERROR, str(exc))}
        fits[pool.name] = fit
        for why, n in fit.dropped.items():
            self.metrics.dropped(pool.name, why, n)
        if isinstance(fit.forecast, NoForecast) and fit.forecast.why == NoForecastWhy.SOURCE_ERROR:
            logger.error("pool %s: cannot read demand history: %s", pool.name, fit.forecast.detail)
            self.metrics.error("source")
        return {pool.name: fit.forecast}

    def _write_report(
        self,
        policy: Policy,
        forecasts: Mapping[str, Forecast | NoForecast],
        histories: Mapping[str, History],
        at: float,
        settled: Mapping[str, PlanSettings],
    ) -> None:
        """Write the report after a refit, each pool's settings those its fit resolved
        (`settled`), else those the reconcile plans with now (a pool not refitted)."""
        if self.report_writer is None or not histories:
            return
        settings = {p.name: settled.get(p.name) or self.settings_for(p) for p in policy.pools}
        promises = {
            p.name: self.tunings[p.name].report(pool_price(p, policy.cost))
            for p in policy.pools
            if p.name in self.tunings
        }
        self.report_error = write_report(
            self.report_writer,
            (
                policy,
                forecasts,
                histories,
                at,
                self.observer.status(at),
                settings,
                promises,
                last_parts(self.components),
                self._target_conditions(),
            ),
            self.metrics,
        )

    def _target_conditions(self) -> dict[str, tuple[TargetCondition, ...]]:
        """Each pool's target conditions as its last reconcile read them (for the report)."""
        if self.last_reconcile is None:
            return {}
        return {o.pool: o.target_conditions for o in self.last_reconcile.pools}

    # -- reconcile -----------------------------------------------------------------------------

    def reconcile(self) -> ReconcileResult:
        """Plan every pool and, when leader, bring its target to the plan; never raises for a pool."""
        started, served = time.perf_counter(), False
        self.watch.started()
        try:
            result = self._reconcile(started)
            served = result.served
            return result
        finally:
            self.watch.ended(served)

    def _reconcile(self, started: float) -> ReconcileResult:
        self.reload_if_changed()
        at = self.clock()
        leader = bool(self.elector.is_leader)
        self.metrics.leader.set(1 if leader else 0)
        if not leader:  # whoever leads meanwhile owns the targets; start afresh on takeover
            self.writer.step_down()
        policy, forecasts = self.policy, self._forecasts
        self.target_apis.update(policy.pools)
        self.inputs.prefetch(policy.pools, forecasts, at)
        self.observer.begin()
        deadline = self.monotonic() + self.deadline
        for watch in self.components.values():
            watch.begin(deadline)
        outcomes = map_bounded(
            lambda pool: self.pool_reconciler.reconcile(
                pool, at, leader, forecasts.get(pool.name), deadline
            ),
            policy.pools,
            self.pool_workers,
            "pool",
        )
        if leader and not self.elector.is_leader:  # lost the Lease during this reconcile
            leader = False
            self.leadership_changed(False)
        if leader:
            self.removed.retire_due(self.dry_run)
        if self.dry_run:  # nothing was written: the replicas read are the user's own
            for o in outcomes:
                if o.current is not None:
                    self.live.record(o.pool, at, o.current)
        current = {o.pool: o.current for o in outcomes}
        warn_adopted(policy, current, self.warned_adoption)
        self._refit_for_new_settings(policy, forecasts)
        result = ReconcileResult(at, time.perf_counter() - started, leader, self.dry_run, outcomes)
        self.last_reconcile = result
        self.metrics.reconcile_seconds.observe(result.seconds)
        if result.served:
            self.last_success_at = at
            self.metrics.last_reconcile.set(at)
        log = logger.info if result.ok else logger.warning
        log(
            result.summary(),
            extra={
                "pools": [o.to_dict() for o in outcomes],
                "leader": leader,
                "dry_run": self.dry_run,
            },
        )
        return result

    def settings_for(self, pool: Pool) -> PlanSettings:
        """The settings `pool` plans with now: its config, the lead time the closed loop measured
        (`leadTime: auto`) and what its last re-tune chose (`protection:`); the floors are the
        pool's own."""
        tuning = self.tunings.get(pool.name)
        return resolve_settings(
            pool,
            measured_lead=self.observer.measured_lead(pool),
            tuned=None if tuning is None else tuning.tuned,
        )

    def _refit_for_new_settings(
        self, policy: Policy, forecasts: Mapping[str, Forecast | NoForecast]
    ) -> None:
        """Ask for a refit of the forecasting pools whose settings moved away from those their
        forecast was fitted for (`PlanSettings.needs_refit`: a measured lead time moving by more
        than a fifth), once per move."""
        stale = self.refits.moved(policy, forecasts, self.pool_reconciler.in_force)
        if stale and self.refit_soon is not None:
            self.refit_soon(stale)

    # -- config reload -------------------------------------------------------------------------

    def reload_if_changed(self) -> bool:
        """Switch to the config file's new content when it changed and is valid; True when switched.

        An invalid file is logged with every problem once, and the config in force stays.
        """
        changed = self.config.changed()
        if changed is None:
            return False
        refit = self._switch(changed[1])
        self.config.accept(changed[0])
        if self.on_reload is not None:
            self.on_reload(refit)
        return True

    def _switch(self, policy: Policy) -> set[str]:
        """Make `policy` the config in force; return the pools whose forecast must be fitted anew."""
        old = self.policy
        names = {p.name for p in policy.pools}
        removed = {p.name for p in old.pools} - names
        with self._lock:
            forecasts = {
                n: f
                for n, f in self._forecasts.items()
                if n in names and same_forecast(old, policy, n)
            }
            refit = {
                p.name
                for p in policy.pools
                if p.forecast and p.forecast.enabled and p.name not in forecasts
            }
            forecasts.update({n: NoForecast(NoForecastWhy.NOT_FITTED_YET) for n in refit})
            self.policy, self._forecasts = policy, forecasts
        self.writer.forget(removed)
        self.removed.removed(old, policy)
        self.pool_reconciler.forget(removed)
        self.refits.forget(removed)
        for name in removed | refit:  # a tuning holds with the forecast fitted at its quantile
            self.tunings.pop(name, None)
            self.metrics.forget_tuning(name)
        self.inputs.forget(removed)
        self.live.forget(removed)
        self.observer.forget(removed)
        for watch in self.components.values():
            watch.forget(removed)
        for name in removed:
            self.metrics.forget_pool(name)
        self.target_apis.invalidate()  # a pool may pin another CapacityBuffer version now
        logger.info(
            "config reloaded from %s: %d pool(s)%s%s",
            self.config_path,
            len(policy.pools),
            f"; removed {', '.join(sorted(removed))}" if removed else "",
            f"; refitting {', '.join(sorted(refit))}" if refit else "",
        )
        return refit

    # -- health --------------------------------------------------------------------------------

    def leadership_changed(self, leading: bool) -> None:
        """The elector's news: the leader metric follows at once, and a replica that stopped leading
        forgets what it wrote (whoever leads meanwhile owns the targets)."""
        self.metrics.leader.set(1 if leading else 0)
        if not leading:
            self.writer.step_down()

    def health(self) -> str | None:
        """None while the reconcile loop runs; else why it is stuck (the elector then lets the Lease go)."""
        return self.watch.stuck()

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): config loaded and, when leader, a reconcile served pools within 3 intervals
        (on the monotonic clock), and every cache of the cluster reads has synced. A policy file
        that cannot be used is named in `why`."""
        ready, why = self.watch.readiness(bool(self.elector.is_leader))
        if self.caches is not None:
            synced, cached = self.caches.synced()
            ready, why = ready and synced, f"{why}; {cached}"
        if self.config.error:
            why += f"; config file problem (the last good config runs): {self.config.error}"
        self.readiness_log.note(ready, why)
        return ready, why

    def status(self) -> dict[str, Any]:
        """The JSON of /last-run (`last_run.last_run`)."""
        return last_run(self)
