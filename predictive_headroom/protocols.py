"""The narrow interfaces between the pure core and the outside world.

Implementations are passed in (never created inside the logic); tests use hand-written fakes.
`ClusterState` lives in `core.cluster` (the core reads it) and is named here for the readers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.policy.adopt import PodTemplate
from predictive_headroom.policy.config import ForecastSpec, Pool

__all__ = [
    "Actuator",
    "ActuatorError",
    "ClusterReader",
    "ClusterState",
    "Forecaster",
    "LeaseLost",
    "NodeList",
    "NodeReader",
    "NodeSeen",
    "PodReader",
    "PodSeen",
    "Preemption",
    "Source",
    "SourceError",
    "TargetApis",
    "TargetState",
]


class Source(Protocol):
    """Where demand history comes from (Prometheus, a CSV file)."""

    def history(self, spec: ForecastSpec, end: float) -> History:
        """Return the series for `spec.query` over `spec.history` up to `end` (POSIX seconds).

        Raises SourceError with a message fit for users when no usable series can be had.
        """
        ...

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        """Return `spec.query` over the last `span_seconds` up to `end`: the latest observations,
        read at every reconcile for the burst model. Raises SourceError like `history`."""
        ...


class Forecaster(Protocol):
    """Turns history into a Forecast (or a NoForecast saying why not)."""

    def fit(
        self, history: History, model: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast | NoForecast:
        """Fit on `history` (only data up to `now`) and forecast `model.horizon` ahead of `now`,
        for the settings in force (`settings`: the lead time, the burst quantile and the
        observation delay the burst allowance is sized for)."""
        ...


@dataclass(frozen=True)
class NodeSeen:
    """One node as a node list shows it: when it was created and since when it is Ready (the
    Ready condition's lastTransitionTime while its status is True; None while it is not Ready)."""

    name: str
    uid: str
    created: float
    ready_since: float | None
    unschedulable: bool = False
    """Cordoned (`spec.unschedulable`)."""
    taints: tuple[str, ...] = ()
    """The keys of its taints."""
    spot: bool = False
    """A capacity-type label says spot (`policy.disruption.SPOT_LABELS`)."""
    allocatable: tuple[tuple[str, float], ...] = ()
    """(resource, amount) of `status.allocatable`: cores for cpu, bytes for memory."""
    labels: tuple[tuple[str, str], ...] = ()
    """(key, value) of its labels the registered components ask for
    (`core.components.NODE_LABELS`), sorted by key; the others are not kept."""


@dataclass(frozen=True)
class PodOnNode:
    """A pod bound to a node, as the disruption component counts it: its effective requests
    ((resource, amount), like `NodeSeen.allocatable`) and whether it is left out of the count (a
    DaemonSet's pod, a mirror pod, a placeholder)."""

    name: str
    uid: str
    requests: tuple[tuple[str, float], ...]
    excluded: bool = False


@dataclass(frozen=True)
class NodeList:
    """One read of the nodes matching a selector: the counts the proportional rule uses and the
    nodes themselves (for their boot time)."""

    state: ClusterState
    nodes: tuple[NodeSeen, ...] = ()


@dataclass(frozen=True)
class PodSeen:
    """One placeholder pod: created, scheduled (PodScheduled True since), Ready since, and whether
    the scheduler marked it for preemption (`DisruptionTarget` with reason `PreemptionByScheduler`)."""

    name: str
    uid: str
    created: float
    scheduled_since: float | None
    ready_since: float | None
    preempted_at: float | None = None
    node: str = ""


@dataclass(frozen=True)
class Preemption:
    """The scheduler's `Preempted` Event on a victim pod (kind Pod, reason Preempted)."""

    pod: str
    pod_uid: str
    at: float


@dataclass(frozen=True)
class TargetCondition:
    """One status condition of a pool's target as the server reported it (a CapacityBuffer's
    `status.conditions[]`: `ReadyForProvisioning`, `Provisioning`, `LimitedByQuotas`, ...)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message}  # fmt: skip


@dataclass(frozen=True)
class TargetState:
    """The current replica count of a pool's target and whether a person paused it."""

    replicas: int
    resource_version: str = ""
    paused: bool = False
    uid: str | None = None
    """The object's uid: a new one means the target was deleted and created again."""
    odd: str | None = None
    """What was odd about the replica count read (`spec.replicas null`, `-3`); `replicas` is then
    0 and the count is not taken for a person's change."""
    pool_label: str | None = None
    """The target's `predictive-headroom.io/pool` label: the daemon's placeholder for that pool."""
    conditions: tuple[TargetCondition, ...] = ()
    """The target's status conditions, as the autoscaler that consumes it reports them (a
    CapacityBuffer's; a Deployment's are not read)."""
    template: PodTemplate | None = None
    """A Deployment's pod template (containers, PriorityClass; the class's value is read only for
    a pool whose placeholder is declared existing); None for a CapacityBuffer."""


class Actuator(Protocol):
    """Reads and writes the replica count of a pool's target (Deployment /scale, CapacityBuffer)."""

    def read(self, pool: Pool) -> TargetState:
        """Return the target's current replicas; raises ActuatorError naming what is missing."""
        ...

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        """Set the target's replicas to `replicas` (server-side dry run when `dry_run`)."""
        ...

    def record_refusal(self, pool: Pool, message: str) -> None:
        """Record on the target (a Warning Event) that it is refused and why; never raises."""
        ...


class TargetApis(Protocol):
    """Finds, by API discovery, which API version each pool's target is read and written through."""

    def refresh(self) -> None:
        """Forget what was found, so the next use asks the server again."""
        ...

    def describe(self, pools: Iterable[Pool]) -> dict[str, dict[str, Any]]:
        """Per pool whose API is discovered: `api_version`, `scope`, `chosen_by`, or the `error` in user terms."""
        ...


class ClusterReader(Protocol):
    """Counts the nodes (and their cores) a pool's proportional rule looks at."""

    def cluster_state(self, label_selector: str) -> ClusterState:
        """Return node and core counts for nodes matching `label_selector` ('' = all)."""
        ...


@runtime_checkable
class NodeReader(Protocol):
    """A ClusterReader that also hands out the nodes it listed (one list serves both)."""

    def read_nodes(self, label_selector: str) -> NodeList:
        """The counts and the nodes matching `label_selector` ('' = all), from one list."""
        ...


class PodReader(Protocol):
    """Reads what the closed loop measures about placeholders (read-only: list pods and Events)."""

    def placeholder_pods(self, namespace: str, label_selector: str) -> tuple[PodSeen, ...]:
        """The pods in `namespace` matching `label_selector`."""
        ...

    def preemptions(self, namespace: str) -> tuple[Preemption, ...]:
        """The scheduler's `Preempted` Events on pods in `namespace` that the API still keeps."""
        ...

    def workload_pods(self, namespace: str) -> tuple[PodSeen, ...]:
        """The pods of `namespace` that have not ended (for how long they waited for a node)."""
        ...


@runtime_checkable
class NodePodReader(Protocol):
    """Lists the pods bound to nodes, across namespaces (opt-in: `list pods` cluster-wide) or in
    the namespaces it was given (`list pods` in each)."""

    def pods_by_node(self) -> dict[str, tuple[PodOnNode, ...]]:
        """The pods bound to a node that have not ended, by node name, from one list."""
        ...


class Caches(Protocol):
    """The list-and-watch caches the cluster reads come from (`kube.watched.Caches`)."""

    def synced(self) -> tuple[bool, str]:
        """(ready, why): every cache has listed once."""
        ...

    def status(self) -> list[dict[str, Any]]:
        """Each cache's mode, size, age and last re-list (JSON values)."""
        ...


class SourceError(Exception):
    """Demand history could not be had; the message says why and how to fix it."""


class ActuatorError(Exception):
    """A target could not be read or written; the message names the object or permission."""


class TargetRefused(ActuatorError):
    """Nothing was written: the target failed an adoption check confirmed right before the write
    (an adopted placeholder's PriorityClass deleted, or re-created at a value >= 0); the message
    is the refusal, naming what was found."""


class LeaseLost(ActuatorError):
    """A write was not sent because this replica no longer holds the leader Lease with time to spare."""


@dataclass(frozen=True)
class Caller:
    """Who sent a bearer token, as the API server's TokenReview answered."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class AccessReviewError(Exception):
    """The API server could not be asked who a caller is or what they may do (not a denial)."""


class AccessReviewer(Protocol):
    """Asks the API server who holds a token and whether they may GET a path of the HTTP port."""

    def authenticate(self, token: str) -> Caller | None:
        """The caller holding `token` (a TokenReview), None when the API server rejects it;
        raises AccessReviewError when it cannot be asked."""
        ...

    def authorize(self, caller: Caller, path: str) -> tuple[bool, str]:
        """Whether `caller` may `get` the non-resource URL `path` (a SubjectAccessReview), with
        the API server's reason; raises AccessReviewError when it cannot be asked."""
        ...
