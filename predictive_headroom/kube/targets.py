"""The two kinds of replica target behind one Actuator: a Deployment through its /scale
subresource, and a CapacityBuffer (autoscaling.x-k8s.io) through its `spec.replicas`, in the version
and at the path (namespaced or cluster-wide) that API discovery found; `TargetActuator` dispatches on
`pool.target.kind`.

Re-reading, writing with the resourceVersion, 409 retries, logging and Events are shared, in
`kube._ReplicaTarget`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.kube.api import CallOptions, Fence, _call, _Op
from predictive_headroom.kube.cluster import (
    PAUSED_ANNOTATION,
    _Current,
    _ReplicaTarget,
    read_replicas,
)
from predictive_headroom.kube.discovery import BufferApi, CapacityBufferDiscovery
from predictive_headroom.kube.errors import NotFound
from predictive_headroom.kube.pods import PLACEHOLDER_LABEL
from predictive_headroom.kube.priority import PriorityClasses
from predictive_headroom.kube.quantity import amounts
from predictive_headroom.policy.adopt import PodTemplate
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.target import (
    BUFFER_LIMITS_VERSIONS,
    CAPACITY_BUFFER_GROUP,
    CAPACITY_BUFFER_PLURAL,
)
from predictive_headroom.protocols import TargetCondition, TargetState

logger = logging.getLogger(__name__)


def _paused(annotations: dict[str, str] | None) -> bool:
    return (annotations or {}).get(PAUSED_ANNOTATION, "").strip().lower() == "true"


def pod_template(spec: Any) -> PodTemplate | None:
    """A Deployment's `spec` (JSON) as the `PodTemplate` an adoption is checked on (no value read
    yet); None when it has no pod template (not a Deployment)."""
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(template, dict):
        return None
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    containers = [
        c
        for key in ("initContainers", "containers")
        for c in (pod.get(key) if isinstance(pod.get(key), list) else [])
        if isinstance(c, dict)
    ]
    requests: dict[str, float] = {}
    for c in pod.get("containers") if isinstance(pod.get("containers"), list) else []:
        asked = ((c.get("resources") or {}).get("requests") or {}) if isinstance(c, dict) else {}
        for name, value in amounts("requests", asked)[0]:
            requests[name] = requests.get(name, 0.0) + value
    return PodTemplate(
        tuple((str(c.get("name", "?")), str(c.get("image", ""))) for c in containers),
        pod.get("priorityClassName") or None,
        requests=tuple(sorted((n, v) for n, v in requests.items() if v > 0)),
    )


class DeploymentScaleActuator(_ReplicaTarget):
    """Reads and writes a Deployment's replicas through its /scale subresource only."""

    kind, api_version, resource, group = "Deployment", "apps/v1", "deployments/scale", "apps"

    def __init__(
        self, api_client: ApiClient, options: CallOptions | None = None, fence: Fence | None = None
    ) -> None:
        super().__init__(api_client, options, fence)
        self._apps = kubernetes.client.AppsV1Api(api_client)
        self._client = api_client
        self.priority_classes = PriorityClasses(api_client, self.options)

    def read(self, pool: Pool) -> TargetState:
        """Current replicas from /scale, `paused` from the Deployment's kill-switch annotation, and
        its pod template (with the PriorityClass's value for an existing placeholder)."""
        deployment = _call(
            self._op(pool, "get", "deployments"),
            self.options,
            self._apps.read_namespaced_deployment,
            name=pool.target.name,
            namespace=pool.target.namespace,
        )
        current = self._current(pool)
        meta = deployment.metadata or kubernetes.client.V1ObjectMeta()
        spec = self._client.sanitize_for_serialization(deployment.spec)
        state = TargetState(
            current.replicas,
            current.resource_version,
            _paused(meta.annotations),
            current.uid,
            current.odd,
            (meta.labels or {}).get(PLACEHOLDER_LABEL),
            template=pod_template(spec),
        )
        return self.priority_classes.resolve(pool, state)

    def _current(self, pool: Pool) -> _Current:
        scale = _call(
            self._op(pool, "get"),
            self.options,
            self._apps.read_namespaced_deployment_scale,
            name=pool.target.name,
            namespace=pool.target.namespace,
        )
        meta = scale.metadata or kubernetes.client.V1ObjectMeta()
        # autoscaling/v1 Scale omits a zero spec.replicas (omitempty): a real kube-apiserver
        # answers a Deployment at 0 with no replicas (seen by tests/e2e), so null is 0, not odd.
        replicas, odd = read_replicas(scale.spec.replicas if scale.spec else None, False)
        return _Current(replicas, meta.resource_version or "", meta.uid, odd=odd)

    def _write(self, pool: Pool, current: _Current, replicas: int, dry_run: bool) -> None:
        body = {
            "metadata": {"resourceVersion": current.resource_version},
            "spec": {"replicas": replicas},
        }
        _call(
            self._op(pool, "patch"),
            self.options,
            self._apps.patch_namespaced_deployment_scale,
            fence=self.fence,
            name=pool.target.name,
            namespace=pool.target.namespace,
            body=body,
            dry_run="All" if dry_run else None,
        )


class CapacityBufferActuator(_ReplicaTarget):
    """Reads and writes `spec.replicas` of a CapacityBuffer, in the version `discovery` chose for the pool.

    `spec.percentage` is removed on write when set: it sizes the buffer from its `scalableRef`, and
    the daemon's count would otherwise be mixed with it (v1beta1 takes the larger) or rejected (v1).
    """

    kind, api_version = (
        "CapacityBuffer",
        "",
    )  # the apiVersion is per pool, from discovery (`_Current.api_version`)
    resource, group = CAPACITY_BUFFER_PLURAL, CAPACITY_BUFFER_GROUP

    def __init__(
        self,
        api_client: ApiClient,
        options: CallOptions | None = None,
        discovery: CapacityBufferDiscovery | None = None,
        fence: Fence | None = None,
    ) -> None:
        super().__init__(api_client, options, fence)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self.discovery = discovery or CapacityBufferDiscovery(api_client, self.options)

    def read(self, pool: Pool) -> TargetState:
        """Current `spec.replicas` (0 when unset), `paused` from the kill-switch annotation, and
        the buffer's status conditions as its autoscaler reports them."""
        current = self._current(pool)
        return TargetState(
            current.replicas, current.resource_version, current.paused, current.uid, current.odd,
            current.pool_label, conditions=current.conditions,
        )  # fmt: skip

    def _current(self, pool: Pool) -> _Current:
        api = self.discovery.api_for(pool)
        found = self._buffer_call(
            api,
            pool,
            "get",
            self._custom.get_namespaced_custom_object,
            self._custom.get_cluster_custom_object,
        )
        obj: dict[str, Any] = found if isinstance(found, dict) else {}
        state = object_target(obj, conditions=True)
        return _Current(
            state.replicas,
            state.resource_version,
            state.uid,
            state.paused,
            api.api_version,
            api.namespaced,
            (obj.get("spec") or {}).get("percentage") is not None,
            state.odd,
            state.pool_label,
            state.conditions,
        )

    def _write(self, pool: Pool, current: _Current, replicas: int, dry_run: bool) -> None:
        spec: dict[str, Any] = {"replicas": replicas}
        if current.percentage_set:
            logger.warning(
                "pool %s: CapacityBuffer %s has spec.percentage set; %s it, because the daemon sizes the "
                "buffer through spec.replicas",
                pool.name,
                pool.target.name,
                "DRY-RUN would remove" if dry_run else "removing",
            )
            spec["percentage"] = None  # merge patch: null removes the field
        api = self.discovery.api_for(pool)
        if pool.limits.enabled and api.version in BUFFER_LIMITS_VERSIONS:
            spec["limits"] = pool.limits.on_buffer(pool.placeholder.requests)
        body = {"metadata": {"resourceVersion": current.resource_version}, "spec": spec}
        self._buffer_call(
            api,
            pool,
            "patch",
            self._custom.patch_namespaced_custom_object,
            self._custom.patch_cluster_custom_object,
            body=body,
            dry_run="All" if dry_run else None,
            _content_type="application/merge-patch+json",
            fence=self.fence,
        )

    def _buffer_call(
        self,
        api: BufferApi,
        pool: Pool,
        verb: str,
        namespaced: Callable[..., Any],
        cluster: Callable[..., Any],
        **kwargs: Any,
    ) -> Any:
        """One call at the namespaced or cluster-wide path; a 404 for the whole API forgets the discovery."""
        op: _Op = dataclasses.replace(
            self._op(pool, verb), api_version=api.api_version, namespaced=api.namespaced
        )
        where = {"namespace": pool.target.namespace} if api.namespaced else {}
        try:
            return _call(
                op,
                self.options,
                namespaced if api.namespaced else cluster,
                fence=kwargs.pop("fence", None),
                group=CAPACITY_BUFFER_GROUP,
                version=api.version,
                plural=CAPACITY_BUFFER_PLURAL,
                name=pool.target.name,
                **where,
                **kwargs,
            )
        except NotFound as exc:
            if not exc.details.get("name"):
                self.discovery.refresh()  # the version went away: look it up again next time
            raise


class TargetActuator:
    """The Actuator the daemon uses: dispatches on `pool.target.kind`."""

    def __init__(
        self,
        api_client: ApiClient,
        options: CallOptions | None = None,
        discovery: CapacityBufferDiscovery | None = None,
        fence: Fence | None = None,
    ) -> None:
        """`fence` (e.g. `LeaderElector.write_budget`) is asked before every write attempt."""
        deployments = DeploymentScaleActuator(api_client, options, fence)
        self._by_kind: dict[str, _ReplicaTarget] = {
            "Deployment": deployments,
            "CapacityBuffer": CapacityBufferActuator(api_client, options, discovery, fence),
        }
        self.priority_classes = deployments.priority_classes
        """What an adopted Deployment's PriorityClass value is read from (`kube.priority`)."""

    def read(self, pool: Pool) -> TargetState:
        """Current replicas and kill-switch state of the pool's target."""
        return self._by_kind[pool.target.kind].read(pool)

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        """Set the pool's target to `replicas` (server-side dry run when `dry_run`)."""
        self._by_kind[pool.target.kind].scale(pool, replicas, reason, dry_run)

    def record_refusal(self, pool: Pool, message: str) -> None:
        """A Warning Event on the pool's target saying why it is not written (never raises)."""
        self._by_kind[pool.target.kind].record_refusal(pool, message)


def object_target(obj: dict[str, Any], conditions: bool = False) -> TargetState:
    """A Deployment's or CapacityBuffer's JSON as the `TargetState` its actuator reads:
    `spec.replicas` (what a Deployment's /scale shows; 0 when a buffer's is unset: sized by
    percentage), resourceVersion, uid, kill switch, pool label, with `conditions` (a buffer's)
    its status conditions, and a Deployment's pod template (no PriorityClass value read)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    replicas, odd = read_replicas(spec.get("replicas"), False)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    return TargetState(
        replicas,
        str(meta.get("resourceVersion") or ""),
        _paused(meta.get("annotations")),
        meta.get("uid"),
        odd,
        (meta.get("labels") or {}).get(PLACEHOLDER_LABEL),
        buffer_conditions(status.get("conditions")) if conditions else (),
        pod_template(spec),
    )


def buffer_conditions(raw: Any) -> tuple[TargetCondition, ...]:
    """A CapacityBuffer's `status.conditions` as values, sorted by type; entries without a type
    or status (or not objects) are left out, so an odd status never fails the read."""
    found = [
        TargetCondition(
            cut(c["type"]),
            cut(c["status"]),
            cut(c.get("reason") or ""),
            cut(c.get("message") or "", 500),
        )
        for c in (raw if isinstance(raw, list) else [])
        if isinstance(c, dict) and c.get("type") and c.get("status")
    ]
    return tuple(sorted(found, key=lambda c: c.type))
