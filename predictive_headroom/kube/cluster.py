"""Kubernetes edge: credentials (`load_kube_config`), what both replica actuators share (`_ReplicaTarget`: scale with 409 retries, log,
record an Event), and the node reader (`KubeClusterReader`): counts for the proportional rule and,
from the same list, each node's creation and Ready times for the closed loop. A node's JSON is read
and counted by `kube.nodes`, as the node caches read it.

Every call has a timeout; 5xx, 429 and connection errors are retried with exponential backoff
(tenacity), a 409 Conflict re-reads the object and applies again, and 403/404 become an
`ActuatorError` that names the missing permission or object. Writes carry the resourceVersion
they were computed from, so a concurrent change by a person is never silently overwritten.

Dry run: the write is sent with `dryRun=All` (the apiserver validates it and stores nothing),
the log line starts with `DRY-RUN would scale`, and no Event is created, because an Event is a
write too and a dry run writes nothing.

The two target kinds (Deployment /scale, CapacityBuffer) and the dispatcher on `target.kind` are
in `kube.targets`; running one API call with retries (`CallOptions`) and explaining its failure is in `kube.api`.
"""

from __future__ import annotations

import abc
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kubernetes.client
import kubernetes.config
from kubernetes.client import ApiClient
from kubernetes.config.config_exception import ConfigException
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
)

from predictive_headroom.kube.api import (
    CallOptions,
    Fence,
    _call,
    _Op,
)
from predictive_headroom.kube.errors import Conflict, Gone
from predictive_headroom.kube.nodes import NodeEntry, count_nodes, node_entry
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.echo import cut
from predictive_headroom.protocols import (
    ActuatorError,
    ClusterState,
    NodeList,
    TargetCondition,
    TargetState,
)

logger = logging.getLogger(__name__)

PAUSED_ANNOTATION = "predictive-headroom.io/paused"
EVENT_COMPONENT = "predictive-headroom"
EVENT_REASON = "Scaled"
REFUSED_REASON = "NotOwned"
"""The Warning Event on a target the daemon refuses to write (it lacks the pool label)."""


class ClusterReadError(ActuatorError):
    """Nodes could not be listed; the message names the permission or the failure."""


CONNECTIONS_KEPT = 256
"""Connections to the API server kept open for reuse (urllib3's pool size)."""


def load_kube_config(context: str | None = None) -> ApiClient:
    """Return an ApiClient from the in-cluster ServiceAccount, else from KUBECONFIG / ~/.kube/config.

    urllib3's own retries are switched off: this module retries with backoff itself, and a
    timed-out GET must not silently take four timeouts.
    """
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        source = "in-cluster ServiceAccount"
    except ConfigException as in_cluster:
        try:
            config_file = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            kubernetes.config.load_kube_config(
                config_file=config_file, context=context, client_configuration=configuration
            )
            source = "kubeconfig"
        except (ConfigException, OSError, TypeError) as kubeconfig:
            raise ActuatorError(
                "no Kubernetes credentials: not running in a pod with a ServiceAccount "
                f"({in_cluster}) and no usable kubeconfig ({kubeconfig}); set KUBECONFIG or run in-cluster"
            ) from None
    configuration.retries = False
    # Each cache's watch holds a connection for minutes (one per target, per namespace's pods,
    # per node selector): with urllib3's default of 10 kept, the rest were dropped after each use
    # ("Connection pool is full") and writes opened new TLS connections.
    configuration.connection_pool_maxsize = CONNECTIONS_KEPT
    logger.info("Kubernetes API %s (credentials from %s)", configuration.host, source)
    return ApiClient(configuration)


@dataclass(frozen=True)
class _Current:
    replicas: int
    resource_version: str
    uid: str | None
    paused: bool = False
    api_version: str = ""
    """The apiVersion the object was read in, when it depends on discovery (else the target's own)."""
    namespaced: bool = True
    percentage_set: bool = False
    """A CapacityBuffer whose spec.percentage is set (removed on write)."""
    odd: str | None = None
    """What was odd about the replica count read (`spec.replicas null`), taken as 0."""
    pool_label: str | None = None
    """The object's `predictive-headroom.io/pool` label, where the read returns labels (a
    CapacityBuffer; a Deployment's /scale carries none)."""
    conditions: tuple[TargetCondition, ...] = ()
    """The object's status conditions (a CapacityBuffer's, as its autoscaler reports them)."""


def read_replicas(value: Any, unset_is_odd: bool) -> tuple[int, str | None]:
    """The replica count of a `spec.replicas` value and what was odd about it: null (when
    `unset_is_odd`), negative or not a whole number count as 0, with a note saying so."""
    if value is None:
        return 0, "spec.replicas null" if unset_is_odd else None
    if isinstance(value, bool) or not isinstance(value, int):
        return 0, f"spec.replicas {value!r}, not a whole number"
    if value < 0:
        return 0, f"spec.replicas {value}, below 0"
    return value, None


class _ReplicaTarget(abc.ABC):
    """What both target kinds share: re-read, write with resourceVersion, retry 409, log, record."""

    kind = ""
    api_version = ""
    resource = ""
    group = ""

    def __init__(
        self, api_client: ApiClient, options: CallOptions | None = None, fence: Fence | None = None
    ) -> None:
        self.options = options or CallOptions()
        self.fence = fence
        """Asked before every write attempt (see `kube.api._call`); None: writes are not fenced."""
        self._events = kubernetes.client.CoreV1Api(api_client)

    def _op(self, pool: Pool, verb: str, resource: str | None = None) -> _Op:
        return _Op(
            verb,
            resource or self.resource,
            self.group,
            self.kind,
            pool.target.namespace,
            pool.target.name,
            pool.name,
        )

    @abc.abstractmethod
    def read(self, pool: Pool) -> TargetState:
        """The target's replicas and identity, read once."""

    @abc.abstractmethod
    def _current(self, pool: Pool) -> _Current:
        """The object as it is now, for a write."""

    @abc.abstractmethod
    def _write(self, pool: Pool, current: _Current, replicas: int, dry_run: bool) -> None:
        """Send one write of `replicas` (or log it in dry-run)."""

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        """Set the target's replicas (no write when it already has them); raise ActuatorError on failure.

        The kill switch is not looked at here: the caller reads `TargetState.paused` first and
        leaves a paused target alone.
        """
        if replicas < 0:
            raise ValueError(f"pool {pool.name}: replicas must be >= 0, got {replicas}")
        target = f"{pool.target.namespace}/{pool.target.name}"
        try:
            for attempt in Retrying(
                retry=retry_if_exception_type(Conflict),
                stop=stop_after_attempt(self.options.conflict_attempts),
                reraise=True,
            ):
                with attempt:
                    current = self._current(pool)
                    if current.replicas == replicas and current.odd is None:
                        logger.debug(
                            "pool %s: %s already has %d replicas", pool.name, target, replicas
                        )
                        return
                    if attempt.retry_state.attempt_number > 1:
                        logger.info(
                            "pool %s: %s changed meanwhile (409 Conflict), applying again",
                            pool.name,
                            target,
                        )
                    self._write(pool, current, replicas, dry_run)
        except Conflict as exc:
            raise ActuatorError(
                f"pool {pool.name}: {self.kind} {target} kept changing while scaling "
                f"({self.options.conflict_attempts} x 409 Conflict: {exc.reason}); will try again next reconcile"
            ) from exc
        was = current.odd or current.replicas
        change = f"{target} replicas {was} -> {replicas} ({reason})"
        if dry_run:
            logger.info("DRY-RUN would scale pool %s: %s", pool.name, change)
            return
        logger.info("pool %s: %s", pool.name, change)
        self._record(pool, current, f"pool {pool.name}: replicas {was} -> {replicas} ({reason})")

    def record_refusal(self, pool: Pool, message: str) -> None:
        """Create a Warning Event (reason NotOwned) on the target saying why it is not written;
        failures (of the read or the Event) are logged, never raised."""
        try:
            current = self._current(pool)
        except ActuatorError as exc:
            logger.warning(
                "pool %s: could not read the target to record an Event: %s", pool.name, exc
            )
            return
        self._record(pool, current, message, REFUSED_REASON, "Warning")

    def _record(
        self,
        pool: Pool,
        current: _Current,
        message: str,
        reason: str = EVENT_REASON,
        kind: str = "Normal",
    ) -> None:
        """Create an Event (`kind` Normal or Warning) on the target; failures are logged, never raised.

        The Event lives in the target's namespace; for a cluster-scoped target it lives in `default`
        and names no namespace, as the apiserver requires (like a Node's Events).
        """
        if not self.options.events:
            return
        now = datetime.now(UTC).replace(microsecond=0)
        ns, name = (pool.target.namespace if current.namespaced else "default"), pool.target.name
        event = kubernetes.client.CoreV1Event(
            metadata=kubernetes.client.V1ObjectMeta(
                name=f"{name}.{time.time_ns():x}", namespace=ns
            ),
            involved_object=kubernetes.client.V1ObjectReference(
                api_version=current.api_version or self.api_version,
                kind=self.kind,
                name=name,
                namespace=ns if current.namespaced else None,
                uid=current.uid,
            ),
            reason=reason,
            message=cut(message, 1000),
            type=kind,
            source=kubernetes.client.V1EventSource(component=EVENT_COMPONENT),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            reporting_component=EVENT_COMPONENT,
            reporting_instance=self.options.instance,
        )
        try:
            _call(
                self._op(pool, "create", "events"),
                self.options,
                self._events.create_namespaced_event,
                fence=self.fence,
                namespace=ns,
                body=event,
            )
        except ActuatorError as exc:
            logger.warning(
                "pool %s: could not record the Event on %s %s/%s: %s",
                pool.name,
                self.kind,
                ns,
                name,
                exc,
            )


class KubeClusterReader:
    """Counts nodes and allocatable cores like cluster-proportional-autoscaler.

    Schedulable means `spec.unschedulable` is not set (cordoned nodes are excluded); like CPA,
    the Ready condition is not looked at, so a node that is briefly NotReady does not shrink
    the floor.
    """

    def __init__(
        self, api_client: ApiClient, options: CallOptions | None = None, page_size: int = 500
    ) -> None:
        self.options = options or CallOptions()
        self.page_size = page_size
        self._core = kubernetes.client.CoreV1Api(api_client)
        self._warned: set[tuple[str, ...]] = set()

    def _leave_out(self, name: str, problems: tuple[str, ...]) -> None:
        """Warn (once per node and problem) that node `name` is left out of the counts."""
        key = (name, *problems)
        if key in self._warned:
            logger.debug("node %s left out again: %s", name, "; ".join(problems))
            return
        self._warned.add(key)
        logger.warning(
            "node %s is left out of the node counts and the disruption component: %s; "
            "the pool plans on its other nodes",
            name,
            "; ".join(problems),
        )

    def cluster_state(self, label_selector: str) -> ClusterState:
        """Node and core counts (all, and schedulable) for nodes matching `label_selector` ('' = all)."""
        return self.read_nodes(label_selector).state

    def read_nodes(self, label_selector: str) -> NodeList:
        """The counts of `cluster_state` and each node's creation and Ready times, from one list.

        The list is read as JSON and only the fields counted are looked at: a node object is mostly
        its image list, and turning a thousand of them into client model objects costs seconds.
        """
        items = list_cluster_wide(
            self._core.list_node,
            "nodes",
            self.options,
            self.page_size,
            label_selector,
            ClusterReadError,
        )
        return self.counted(node_entry(node) for node in items)

    def counted(self, entries: Iterable[NodeEntry]) -> NodeList:
        """`count_nodes` of `entries`, warning (once per node and problem) of each one left out."""
        kept = tuple(entries)
        for entry in kept:
            if entry.problems:
                self._leave_out(entry.name, entry.problems)
        return count_nodes(kept)


def list_cluster_wide(
    method: Any,
    resource: str,
    options: CallOptions,
    page_size: int,
    label_selector: str = "",
    error: type[ActuatorError] = ActuatorError,
) -> list[dict[str, Any]]:
    """Every object of a cluster-wide list (`method`, e.g. `CoreV1Api.list_node`) matching
    `label_selector` ('' = all), as JSON, read by `list_items` (paged, restarted on an expired
    continue token); a failure, naming `resource`, is `error` (ActuatorError: the typed
    `kube.errors` one)."""
    op = _Op("list", resource, "", "", "", label_selector, "")
    return list_items(op, options, method, error, page_size, label_selector=label_selector or None)


class _Expired(Exception):
    """A page after the first answered 410 Gone: the list's continue token expired."""


def list_items(
    op: _Op,
    options: CallOptions,
    method: Any,
    error: type[ActuatorError],
    page_size: int,
    **query: Any,
) -> list[dict[str, Any]]:
    """Every item of a list read in pages of `page_size`, as JSON; a failure is `error` (with
    `error` ActuatorError: the typed `kube.errors` one, as `api._call` raises).

    A 410 Gone on a later page (its continue token expired: etcd compacted the revision the list
    started at) restarts the list from the beginning in one request without a limit, as
    client-go's pager does, with a log line; the pages already read are dropped, so the items
    always come from one snapshot. A 410 on the first page, or on the restart, is `error`.
    """
    try:
        return _pages(op, options, method, error, page_size, **query)
    except _Expired:
        logger.warning(
            "%s: the list's continue token expired (410 Gone); listing again from the beginning",
            op.describe(),
        )
    return _pages(op, options, method, error, None, **query)


def _pages(
    op: _Op,
    options: CallOptions,
    method: Any,
    error: type[ActuatorError],
    page_size: int | None,
    **query: Any,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        try:
            response = _call(
                op,
                options,
                method,
                limit=page_size,
                _continue=token,
                _preload_content=False,
                **query,
            )
        except ActuatorError as exc:
            if isinstance(exc, Gone) and token is not None and page_size is not None:
                raise _Expired() from exc
            if error is ActuatorError:  # the caller catches the typed errors (kube.errors)
                raise
            raise error(str(exc)) from exc
        page = _json_answer(op, response, error)
        items.extend(i for i in page.get("items") or () if isinstance(i, dict))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def _json_answer(op: _Op, response: Any, error: type[ActuatorError]) -> dict[str, Any]:
    """The JSON object of a raw (not preloaded) answer; a truncated or non-JSON body is `error`."""
    data = response.data
    try:
        answer = json.loads(data)
    except ValueError as exc:
        raise error(
            f"{op.verb} {op.resource}: the API server sent an answer that is not valid JSON "
            f"({len(data)} bytes; {exc}); will try again next reconcile"
        ) from None
    if not isinstance(answer, dict):
        raise error(f"{op.verb} {op.resource}: the API server sent JSON that is not an object")
    return answer
