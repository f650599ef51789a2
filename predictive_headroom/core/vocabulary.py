"""The words plans and allowances are made of, named once.

Every member is a `str`, so JSON output, log lines and metric labels show the same text as
before (`"model"`, `"stale-observations"`, ...); code compares against the members.
"""

from __future__ import annotations

from enum import StrEnum


class BurstSource(StrEnum):
    """Where a burst allowance came from."""

    MODEL = "model"
    """The conditional burst model, evaluated on the observations known at the instant."""
    PROFILE = "profile"
    """The refit-time table by time of day and week (no model, or the model could not be used)."""


class BurstFallback(StrEnum):
    """Why the burst model was not used although the forecast carries one."""

    NOT_OBSERVED = "not-observed"
    """No observations were passed to the planner."""
    NO_RECENT_SAMPLES = "no-recent-samples"
    """No sample at or before the instant minus the observation delay."""
    STALE_OBSERVATIONS = "stale-observations"
    """The newest known sample is older than the model accepts (two data steps)."""
    NO_SOURCE = "no-source"
    """The daemon has no demand source to read observations from."""
    FRESH_READ_FAILED = "fresh-read-failed"
    """Reading the latest observations failed (the detail follows after a colon)."""


class DroppedWhy(StrEnum):
    """Why a demand sample was dropped before fitting or planning (`core.screen`; the `reason`
    label of `predictive_headroom_samples_dropped_total`)."""

    NEGATIVE = "negative"
    """Below zero: a demand count never is."""
    FAR_ABOVE = "far-above-range"
    """Far above everything the series itself shows (`core.screen.FAR`)."""


class BurstFit(StrEnum):
    """Which fit a last-day burst view reads (the report and the backtest page read different ones)."""

    CURRENT = "current"
    """The fit the plan uses now, read back over the last day of its own training data (report)."""
    WALK_FORWARD = "walk-forward"
    """The refits the replay had in force, each fitted only on data before it (backtest page)."""


class ForecastStatus(StrEnum):
    """The state of a pool's forecast component at one instant (besides a `NoForecast.why`)."""

    OK = "ok"
    NO_HISTORY = "no-history"
    EXPIRED = "forecast-expired"
    DISABLED = "disabled"
    NOT_CONFIGURED = "not-configured"
    NOT_FITTED = "not-fitted"
    """The report of a forecasting pool given no forecast at all."""
    WARMUP = "warmup"
    """The backtest before its first refit."""
    FIXED = "fixed-headroom"
    """Set aside by the re-tune for a fixed N of placeholders (`PlanSettings.fixed`): the
    component is that N (`PlanReason.FIXED_HEADROOM` when it sets the plan)."""


class NoForecastWhy(StrEnum):
    """Why a pool has no forecast (`NoForecast.why`) when the fit path says so."""

    SOURCE_ERROR = "source-error"
    """The history could not be read (or is empty up to the instant asked)."""
    INSUFFICIENT_HISTORY = "insufficient-history"
    """Under a day of history: no forecaster can fit."""
    FIT_ERROR = "fit-error"
    """The forecaster raised (the daemon's refit)."""
    DISABLED = ForecastStatus.DISABLED.value
    EXPIRED = ForecastStatus.EXPIRED.value
    """The last good forecast ran out while refits kept failing."""
    NOT_FITTED_YET = "not-fitted-yet"
    """The daemon before a pool's first refit (or after a config change asked for a new fit)."""
    IMPLAUSIBLE_INPUT = "implausible-input"
    """Most of the history's samples were far outside its own range or negative (`core.screen`):
    the refit keeps the last good forecast rather than fit on what is left."""


class MissingInput(StrEnum):
    """An input a daemon's plan lacks for now (the target is then not scaled down: `hold:<it>`)."""

    NOT_FITTED_YET = NoForecastWhy.NOT_FITTED_YET.value
    """The forecast is not fitted yet."""
    NO_CLUSTER_STATE = "no-cluster-state"
    """A proportional pool whose nodes were never read (also the plan's `proportional_status`)."""


class PoolAction(StrEnum):
    """What one reconcile did with one pool's target (`daemon.outcomes.PoolOutcome.action`)."""

    SCALED = "scaled"
    UNCHANGED = "unchanged"
    PAUSED = "paused"
    """The kill-switch annotation is set: left alone."""
    MANUAL_OVERRIDE = "manual-override"
    """A person changed the count while the plan did not: left alone."""
    DRY_RUN = "dry-run"
    REFUSED = "refused"
    """The target lacks the label `predictive-headroom.io/pool: <pool>`: not the pool's own, never written."""
    FOLLOWER = "follower"
    """Not the leader (or the Lease was lost during the write): planned, not written."""
    ERROR = "error"


class TuningStatus(StrEnum):
    """What a re-tune of a `protection:` pool came to (`app.tuning.Tuning.status`)."""

    TUNED = "tuned"
    """The rule's choice: the cheapest strictness that kept the target."""
    SHORT = "short"
    """No strictness kept the target: the most protective one, with its reserve."""
    DEFAULT = "default"
    """Could not tune: the pool's own settings stand (the reason says why)."""
    FIXED = "fixed"
    """The ledger says the forecast did not keep the target, or did not beat a fixed N, over the
    days judged: the pool holds the fewest fixed placeholders that kept it over the days read
    (`replay.fallback`; `protectionFallback: fixed`), until the forecast keeps it again."""


class Kind(StrEnum):
    """What a registered component does to the plan (`core.components.Registration.kind`)."""

    FLOOR = "floor"
    """The plan takes the largest of the floors."""
    CAP = "cap"
    """The plan is at most the smallest of the caps (after the floors and the reserve, before
    the scale-down stabilisation, which a cap also limits)."""


class Feed(StrEnum):
    """Where a registered component's value comes from (`core.components.Registration.feed`)."""

    POOL = "pool"
    """The pool's own fields alone (minReplicas, maxReplicas, limits:)."""
    ENGINE = "engine"
    """The engine, from the forecast, the schedule windows and the cluster (`core.engine`)."""
    CONTEXT = "context"
    """Read at each instant from the inputs it declares (`Input`), which every shell gives in
    its `core.context.Context`, by the registration's own pure `read`."""


class Input(StrEnum):
    """What a component read at each instant reads from its shell's `core.context.Context`
    (`core.components.Registration.inputs`); each shell implements each input once."""

    TIME = "time"
    """The instant (`Context.at`)."""
    PRICE = "price"
    """The node the pool is priced on (`Context.price`)."""
    HELD = "held"
    """What the pool's placeholders held so far (`Context.held`), told plan by plan."""
    REQUESTS = "requests"
    """What the pool's pods request (`Context.requests`)."""
    LEAVING = "leaving"
    """The pool's nodes on their way out and the spot reserve's inputs (`Context.leaving`)."""
    QUOTAS = "quotas"
    """The namespace's ResourceQuotas and what the pool's own placeholders use of them
    (`Context.quotas`)."""


class Component(StrEnum):
    """The components of a plan, in the order that names the reason among equal values
    (`core.components.ORDER`), the floors first, then the caps; each is registered in
    `core.components.REGISTRY`."""

    SCHEDULE = "schedule"
    PROPORTIONAL = "proportional"
    FORECAST = "forecast"
    DISRUPTION = "disruption"
    """Room for the pods of nodes on their way out, plus the spot reserve (`core.disruption`)."""
    SHARE = "share"
    """A share of what the pool's pods request, in placeholders (`core.share`)."""
    MIN = "min"
    MAX = "max"
    """maxReplicas, the first cap (its reason word is `PlanReason.MAX`)."""
    LIMITS = "limits"
    """The placeholders' total requests within the pool's `limits:` (`core.limits`)."""
    BUDGET = "budget"
    """The overhead node-hours a day within the pool's `budget:` (`core.budget`)."""
    QUOTA = "quota"
    """The room the namespace's ResourceQuotas leave the placeholders (`core.quota`)."""


class DisruptionSource(StrEnum):
    """Where the disruption component's room for leaving nodes came from."""

    NONE = "none"
    """No node of the pool is leaving."""
    PODS = "pods"
    """The summed requests of the pods on the leaving nodes (`list pods` cluster-wide)."""
    ESTIMATE = "allocatable-estimate"
    """Without the pods: each leaving node's allocatable in placeholders, as if it were full."""
    SIMULATED = "simulated"
    """The backtest's simulated cluster."""


class PlanReason(StrEnum):
    """The reasons a plan can give that are not a component's name (see `Component`)."""

    MAX = "max"
    HOLD_STABILIZATION = "hold:scale-down-stabilization"
    HOLD_TAKEOVER = "hold:takeover"
    """A placeholder adopted as it is (`placeholder.existing`): the count the daemon found when it
    took the Deployment over is not lowered for the pool's scaleDownStabilization
    (`daemon/writes.py`)."""
    MIN_PREFIX = "min:"
    """Followed by the forecast status when `minReplicas` wins because the forecast is missing
    (e.g. `min:insufficient-history`): the value is `minReplicas`, and this says why no forecast
    competed. (`hold:<why>` is kept for the daemon holding the current replicas, `daemon/writes.py`.)"""
    SCHEDULE_PREFIX = "schedule:"
    """Followed by the name of the window that sets the floor."""
    FIXED_HEADROOM = "fixed-headroom"
    """The re-tune set the forecast aside for a fixed N of placeholders (`TuningStatus.FIXED`),
    and that N sets the plan."""


class BufferCondition(StrEnum):
    """The status conditions an autoscaler reports on a CapacityBuffer (`autoscaling.x-k8s.io`
    v1beta1, as Karpenter 1.14 and Cluster Autoscaler 1.35 set them); shown on /last-run."""

    READY_FOR_PROVISIONING = "ReadyForProvisioning"
    """True once the autoscaler resolved the buffer's pod template and replica count."""
    PROVISIONING = "Provisioning"
    """True while the autoscaler keeps the buffer's capacity (reason: fits existing capacity, or
    requires new capacity)."""
    LIMITED_BY_QUOTAS = "LimitedByQuotas"
    """True when a quota or limit caps the buffer below its replicas."""


class Better(StrEnum):
    """Which did better against the other at the same protection (`core.verdict`)."""

    FORECAST = "forecast"
    """The forecast cost no more than the fixed N (or no fixed N kept that protection)."""
    FIXED = "fixed"
    """The fixed N cost less (or the forecast never kept its protection)."""


AT_ONCE = "at_once"
"""A log record's `extra` key (`extra={AT_ONCE: True}`): a command writes this warning when it
comes, not held with the others until its output is out (a long replay's projection, said before
the replay runs)."""


class CurveRefit(StrEnum):
    """How a walk-forward replay refits the forecast's curve (Prophet) between cuts
    (`replay.walkforward`, `--curve-refit`); the burst models are refitted at every cut."""

    DAILY = "daily"
    """A fresh fit at every cut (what the daemon does)."""
    WARM = "warm"
    """A fit at every cut, started from the previous cut's fitted parameters (a cold one each
    week)."""
    WEEKLY = "weekly"
    """A fit at the first cut of each week, reused as it is (predicting the days since) at the
    other cuts of that week."""
