"""Prometheus metrics of the daemon, held in one registry per daemon (no global registry).

Each daemon (and each test) owns a `Metrics`; the HTTP server exposes its `registry`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from predictive_headroom.core.components import REGISTRY
from predictive_headroom.core.planner import Plan
from predictive_headroom.core.series import Forecast, NoForecast
from predictive_headroom.core.settings import SettingSource
from predictive_headroom.core.vocabulary import BurstSource, Component, DroppedWhy

if TYPE_CHECKING:
    from predictive_headroom.app.tuning import Tuning
    from predictive_headroom.replay.shadow import Shadow

PREFIX = "predictive_headroom"
ERROR_KINDS = (
    "source",
    "fresh-read",
    "fit",
    "cluster",
    "observe",
    "actuator",
    "config",
    "report",
    "internal",
    "lease",
    "ownership",
)
"""Every kind of error the daemon counts; each starts at 0 so rates work from the first scrape."""
BOOT_BUCKETS = (15, 30, 45, 60, 90, 120, 150, 180, 240, 300, 420, 600, 900, 1200, 1800, 3600)
"""Seconds: node boots take about 2 min (Karpenter) to 5 min (an auto-scaling group)."""
START_BUCKETS = (1, 2, 5, 10, 15, 30, 60, 90, 120, 180, 300, 600)
RECONCILE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60)
"""Seconds: a reconcile from watched caches takes tens of milliseconds; listing the cluster every
reconcile, seconds at a few thousand nodes; the interval (60 s by default) bounds it."""
SHADOW_SIDES = ("yours", "plan")
"""The `who` label of the shadow pair: the target's live replicas, and the plan."""
LEAD_SOURCES = (SettingSource.MEASURED, SettingSource.CONFIGURED)
"""Where a lead time in use comes from (the `source` label of `lead_time_seconds`)."""


class Metrics:
    """The daemon's gauges and counters, registered in their own CollectorRegistry."""

    def __init__(self) -> None:
        """Declare every metric in `registry`, in exposition order, each error kind at 0."""
        self.registry = CollectorRegistry(auto_describe=True)
        self._plan_metrics(self.registry)
        self._refit_metrics(self.registry)
        self._retune_metrics(self.registry)
        self._health_metrics(self.registry)
        self._closed_loop_metrics(self.registry)
        self._disruption_metrics(self.registry)
        for kind in ERROR_KINDS:
            self.errors.labels(kind=kind)
        self._reasons: dict[str, str] = {}

    def _plan_metrics(self, r: CollectorRegistry) -> None:
        """The plan and its inputs: desired/applied replicas, components, reason, forecast, demand, burst."""
        self.desired = Gauge(
            f"{PREFIX}_desired_replicas",
            "Placeholder pod replicas the plan asks for.",
            ["pool"],
            registry=r,
        )
        self.applied = Gauge(
            f"{PREFIX}_applied_replicas",
            "Replicas the target had after the last reconcile.",
            ["pool"],
            registry=r,
        )
        self.component = Gauge(
            f"{PREFIX}_component_replicas",
            f"Replicas each plan component asks for ({', '.join(r.name for r in REGISTRY)}).",
            ["pool", "component"],
            registry=r,
        )
        self.reason = Gauge(
            f"{PREFIX}_plan_reason_info",
            "The reason of the current plan (value 1).",
            ["pool", "reason"],
            registry=r,
        )
        self.forecast_demand = Gauge(
            f"{PREFIX}_forecast_demand",
            "Forecast demand at now + leadTime: yhat and the interval bounds lower/upper.",
            ["pool", "bound"],
            registry=r,
        )
        self.observed_demand = Gauge(
            f"{PREFIX}_observed_demand",
            "The latest demand sample read (at the last refit or reconcile).",
            ["pool"],
            registry=r,
        )
        self.burst_allowance = Gauge(
            f"{PREFIX}_burst_allowance",
            "Demand the forecast component keeps warm for bursts within the lead time, and where it came from "
            "(source=model: the burst model on the latest observations; profile: the refit-time table).",
            ["pool", "source"],
            registry=r,
        )
        self.fresh_read_failures = Counter(
            f"{PREFIX}_fresh_read_failures",
            "Reconciles whose read of the latest observations failed (the burst table stood in).",
            ["pool"],
            registry=r,
        )

    def _refit_metrics(self, r: CollectorRegistry) -> None:
        """When the loop last refitted and reconciled, and how long the last fit took."""
        self.last_refit = Gauge(
            f"{PREFIX}_last_refit_timestamp_seconds",
            "When the last refit that fitted a forecast completed (POSIX seconds).",
            registry=r,
        )
        self.last_reconcile = Gauge(
            f"{PREFIX}_last_reconcile_timestamp_seconds",
            "When the last successful reconcile completed (POSIX seconds).",
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_seconds",
            "Wall time of each reconcile, served or not (the `N ms` of its log line).",
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.fit_seconds = Gauge(
            f"{PREFIX}_fit_seconds", "Seconds the last forecast fit took.", ["pool"], registry=r
        )
        self.samples_dropped = Counter(
            f"{PREFIX}_samples_dropped",
            "Demand samples dropped before fitting or planning because they cannot be real "
            "(reason=negative, or far-above-range: far above the series' own range).",
            ["pool", "reason"],
            registry=r,
        )

    def dropped(self, pool: str, reason: str, count: int) -> None:
        """Count `count` demand samples of `pool` dropped for `reason` (`core.screen`)."""
        self.samples_dropped.labels(pool=pool, reason=reason).inc(count)

    def _retune_metrics(self, r: CollectorRegistry) -> None:
        """What a pool with `protection:` chose at its last refit and the protection it reached."""
        self.tuned_quantile = Gauge(
            f"{PREFIX}_tuned_burst_quantile",
            "The burst quantile a pool with protection chose at its last refit.",
            ["pool"],
            registry=r,
        )
        self.tuned_window = Gauge(
            f"{PREFIX}_tuned_stabilization_seconds",
            "The scale-down stabilisation window a pool with protection chose at its last refit.",
            ["pool"],
            registry=r,
        )
        self.tuned_protection = Gauge(
            f"{PREFIX}_tuned_protection_ratio",
            "The protection the chosen setting reached on the recent history (NaN: not tuned).",
            ["pool"],
            registry=r,
        )
        self.realized_protection = Gauge(
            f"{PREFIX}_realized_protection_ratio",
            "The protection a pool with protection kept on the last week replayed at its last "
            "refit, each day's setting and reserve chosen on the days before it (NaN: no figure).",
            ["pool"],
            registry=r,
        )
        self.beats_fixed = Gauge(
            f"{PREFIX}_forecast_beats_fixed",
            "1 when a pool's forecast cost no more than static headroom at the protection it kept "
            "over the days its last re-tune judged, 0 when a fixed N did better (NaN: no figure).",
            ["pool"],
            registry=r,
        )
        self.tuned_reserve = Gauge(
            f"{PREFIX}_tuned_reserve_replicas",
            "Placeholders a pool with protection holds on top of its plan, chosen at its last refit.",
            ["pool"],
            registry=r,
        )
        self.shadow_kept = Gauge(
            f"{PREFIX}_shadow_kept",
            "In dry-run: the protection the target's live replicas (who=yours) and the plan "
            "(who=plan) kept over the days the last re-tune judged (NaN: nothing waited).",
            ["pool", "who"],
            registry=r,
        )
        self.shadow_node_hours = Gauge(
            f"{PREFIX}_shadow_node_hours_per_day",
            "In dry-run: the overhead node-hours a day of the target's live replicas (who=yours) "
            "and of the plan (who=plan) over the days the last re-tune judged.",
            ["pool", "who"],
            registry=r,
        )

    def _health_metrics(self, r: CollectorRegistry) -> None:
        """Errors by kind and whether this replica leads."""
        self.errors = Counter(f"{PREFIX}_errors", "Errors by kind.", ["kind"], registry=r)
        self.tls_expiry = Gauge(
            f"{PREFIX}_tls_certificate_expiry_timestamp_seconds",
            "When the certificate the main port serves expires (POSIX seconds; absent without TLS).",
            registry=r,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader", "1 when this replica holds the leader Lease.", registry=r
        )
        self.refused = Gauge(
            f"{PREFIX}_target_refused",
            "1 while the pool's target is refused and never written: it lacks the label "
            "predictive-headroom.io/pool=<pool> (each refusing reconcile also counts an "
            "errors{kind=ownership}); 0 while it is the pool's own.",
            ["pool"],
            registry=r,
        )
        self.removed_pools = Counter(
            f"{PREFIX}_removed_pool_placeholders",
            "Placeholders of pools that left the policy, by what was done (scaled-to-zero, kept, "
            "left: not the daemon's placeholder, paused or gone).",
            ["action"],
            registry=r,
        )
        self.watch_relists = Counter(
            f"{PREFIX}_watch_relists",
            "Lists of a watched cache, by resource and reason (start; gone: 410; unknown-version: "
            "a version the server does not know; retry-watch: the watch was refused; failed).",
            ["resource", "reason"],
            registry=r,
        )

        self.watch_backoff = Counter(
            f"{PREFIX}_watch_backoff",
            "Backoff waits of a watched cache before its next list or watch, by cache (its query) "
            "and reason (list-failed; watch-failed: an error answer; broken: no answer or a stream "
            "broken before it was healthy; short: a watch that ended at once; gone: before a re-list).",
            ["cache", "reason"],
            registry=r,
        )

    def watch_relisted(self, resource: str, reason: str) -> None:
        """Count one list of a watched cache (`kube.informer`)."""
        self.watch_relists.labels(resource=resource, reason=reason).inc()

    def watch_backed_off(self, cache: str, reason: str) -> None:
        """Count one backoff wait of a watched cache (`kube.informer`)."""
        self.watch_backoff.labels(cache=cache, reason=reason).inc()

    def _closed_loop_metrics(self, r: CollectorRegistry) -> None:
        """The closed loop: node boots, placeholder starts, pod waits, preemptions, lead time."""
        self.node_ready = Histogram(
            f"{PREFIX}_node_ready_seconds",
            "Creation to first Ready of the pool's nodes that appeared recently (each node once).",
            ["pool"],
            buckets=BOOT_BUCKETS,
            registry=r,
        )
        self.placeholder_start = Histogram(
            f"{PREFIX}_placeholder_start_seconds",
            "Scheduled to Ready of the pool's placeholder pods (each pod once).",
            ["pool"],
            buckets=START_BUCKETS,
            registry=r,
        )
        self.pod_wait = Histogram(
            f"{PREFIX}_pod_wait_seconds",
            "Creation to scheduled of workload pods that waited for a node of the pool (opt-in).",
            ["pool"],
            buckets=BOOT_BUCKETS,
            registry=r,
        )
        self.headroom_used = Counter(
            f"{PREFIX}_headroom_used",
            "Placeholder pods the scheduler preempted to place a workload pod (warm capacity used).",
            ["pool"],
            registry=r,
        )
        self.headroom_last_used = Gauge(
            f"{PREFIX}_headroom_last_used_timestamp_seconds",
            "When a placeholder of the pool was last preempted (POSIX seconds).",
            ["pool"],
            registry=r,
        )
        self.lead_time = Gauge(
            f"{PREFIX}_lead_time_seconds",
            "The lead time the pool plans with; source=measured (leadTime: auto) or configured.",
            ["pool", "source"],
            registry=r,
        )

    def _disruption_metrics(self, r: CollectorRegistry) -> None:
        """Nodes on their way out (the disruption component's count)."""
        self.nodes_leaving = Gauge(
            f"{PREFIX}_nodes_leaving",
            "Nodes of the pool on their way out (cordoned or tainted for removal); the room their "
            "pods need is the component=disruption value.",
            ["pool"],
            registry=r,
        )

    def error(self, kind: str) -> None:
        """Count one error of `kind` (one of ERROR_KINDS)."""
        self.errors.labels(kind=kind).inc()

    def record_ownership(self, pool: str, refused: bool) -> None:
        """Whether `pool`'s target was refused at this reconcile (counted as an ownership error)."""
        self.refused.labels(pool=pool).set(1 if refused else 0)
        if refused:
            self.error("ownership")

    def record_plan(self, plan: Plan) -> None:
        """Desired replicas, components and reason of one pool's plan."""
        self.desired.labels(pool=plan.pool).set(plan.desired)
        for name, value in plan.components.items():
            if value is None:
                self._drop(self.component, plan.pool, name)
            else:
                self.component.labels(pool=plan.pool, component=name).set(value)
        old = self._reasons.get(plan.pool)
        if old is not None and old != plan.reason:
            self.reason.remove(plan.pool, old)
        self.reason.labels(pool=plan.pool, reason=plan.reason).set(1)
        self._reasons[plan.pool] = plan.reason
        source = plan.details.get("burst_source")
        for other in BurstSource:
            if other != source:
                self._drop(self.burst_allowance, plan.pool, other)
        if source is not None:
            self.burst_allowance.labels(pool=plan.pool, source=source).set(
                float(plan.details.get("burst", 0.0))
            )

    def record_forecast(self, pool: str, forecast: Forecast | NoForecast | None, at: float) -> None:
        """Forecast yhat/lower/upper at `at` (now + leadTime); removed when there is no usable forecast."""
        if isinstance(forecast, Forecast) and forecast.covers(at):
            for bound, values in (
                ("yhat", forecast.yhat),
                ("lower", forecast.lower),
                ("upper", forecast.upper),
            ):
                self.forecast_demand.labels(pool=pool, bound=bound).set(
                    float(np.interp(at, forecast.times, values))
                )
        else:
            for bound in ("yhat", "lower", "upper"):
                self._drop(self.forecast_demand, pool, bound)

    def record_tuning(self, tuning: Tuning) -> None:
        """The setting a pool's re-tune chose (`app.tuning.Tuning`)."""
        self.tuned_quantile.labels(pool=tuning.pool).set(tuning.burst_quantile)
        self.tuned_window.labels(pool=tuning.pool).set(tuning.stabilization_seconds)
        reached = tuning.protection
        self.tuned_protection.labels(pool=tuning.pool).set(
            float("nan") if reached is None else reached
        )
        kept = tuning.realized_protection
        self.realized_protection.labels(pool=tuning.pool).set(
            float("nan") if kept is None else kept
        )
        self.tuned_reserve.labels(pool=tuning.pool).set(tuning.reserve)
        against = tuning.against_fixed()
        self.beats_fixed.labels(pool=tuning.pool).set(
            float("nan") if against is None else float(against["forecast_beats_fixed"])
        )
        self.record_shadow(tuning.pool, tuning.shadow)

    def record_shadow(self, pool: str, shadow: Shadow | None) -> None:
        """The shadow pair of `pool` (a Tuning's, or a pool's without `protection:`), removed when
        it has none."""
        for who in SHADOW_SIDES:
            side = None if shadow is None else getattr(shadow, who)
            if side is None:
                self._drop(self.shadow_kept, pool, who)
                self._drop(self.shadow_node_hours, pool, who)
                continue
            kept = float("nan") if side.kept is None else side.kept
            self.shadow_kept.labels(pool=pool, who=who).set(kept)
            self.shadow_node_hours.labels(pool=pool, who=who).set(side.per_day)

    def forget_tuning(self, pool: str) -> None:
        """Remove a pool's tuned_* series (its tuning no longer holds)."""
        for gauge in (
            self.tuned_quantile,
            self.tuned_window,
            self.tuned_protection,
            self.realized_protection,
            self.tuned_reserve,
            self.beats_fixed,
        ):
            self._drop(gauge, pool)
        for who in SHADOW_SIDES:
            self._drop(self.shadow_kept, pool, who)
            self._drop(self.shadow_node_hours, pool, who)

    def record_lead_time(self, pool: str, source: str, seconds: float) -> None:
        """The lead time `pool` plans with and its source (measured | configured)."""
        for other in LEAD_SOURCES:
            if other != source:
                self._drop(self.lead_time, pool, other)
        self.lead_time.labels(pool=pool, source=source).set(seconds)

    def forget_nodes_leaving(self, pool: str) -> None:
        """Remove the leaving-nodes gauge of a pool."""
        self._drop(self.nodes_leaving, pool)

    def forget_pool(self, pool: str) -> None:
        """Remove every series of a pool that left the config."""
        for gauge in (
            self.desired,
            self.applied,
            self.observed_demand,
            self.fit_seconds,
            self.tuned_quantile,
            self.tuned_window,
            self.tuned_protection,
            self.realized_protection,
            self.tuned_reserve,
            self.refused,
            self.beats_fixed,
        ):
            self._drop(gauge, pool)
        for name in Component:
            self._drop(self.component, pool, name)
        for who in SHADOW_SIDES:
            self._drop(self.shadow_kept, pool, who)
            self._drop(self.shadow_node_hours, pool, who)
        self._drop(self.nodes_leaving, pool)
        for bound in ("yhat", "lower", "upper"):
            self._drop(self.forecast_demand, pool, bound)
        for source in BurstSource:
            self._drop(self.burst_allowance, pool, source)
        self._drop(self.fresh_read_failures, pool)
        for why in DroppedWhy:
            self._drop(self.samples_dropped, pool, why)
        for metric in (
            self.node_ready,
            self.placeholder_start,
            self.pod_wait,
            self.headroom_used,
            self.headroom_last_used,
        ):
            self._drop(metric, pool)
        for source in LEAD_SOURCES:
            self._drop(self.lead_time, pool, source)
        reason = self._reasons.pop(pool, None)
        if reason is not None:
            self._drop(self.reason, pool, reason)

    @staticmethod
    def _drop(metric: Gauge | Counter | Histogram, *labels: str) -> None:
        with contextlib.suppress(KeyError):
            metric.remove(*labels)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
