"""The two kinds of replica target behind one Actuator: a Deployment through its /scale
subresource, and a CapacityBuffer (autoscaling.x-k8s.io, alpha) through its `spec.replicas`;
`TargetActuator` dispatches on `pool.target.kind`.

Re-reading, writing with the resourceVersion, 409 retries, logging and Events are shared, in
`kube._ReplicaTarget`.
"""

from __future__ import annotations

from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.kube.api import (
    CAPACITY_BUFFER_GROUP,
    CAPACITY_BUFFER_PLURAL,
    CAPACITY_BUFFER_VERSION,
    CallOptions,
    _call,
)
from predictive_headroom.kube.cluster import PAUSED_ANNOTATION, _Current, _ReplicaTarget
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import TargetState


def _paused(annotations: dict[str, str] | None) -> bool:
    return (annotations or {}).get(PAUSED_ANNOTATION, "").strip().lower() == "true"


class DeploymentScaleActuator(_ReplicaTarget):
    """Reads and writes a Deployment's replicas through its /scale subresource only."""

    kind, api_version, resource, group = "Deployment", "apps/v1", "deployments/scale", "apps"

    def __init__(self, api_client: ApiClient, options: CallOptions | None = None) -> None:
        super().__init__(api_client, options)
        self._apps = kubernetes.client.AppsV1Api(api_client)

    def read(self, pool: Pool) -> TargetState:
        """Current replicas from /scale, and `paused` from the Deployment's kill-switch annotation."""
        deployment = _call(self._op(pool, "get", "deployments"), self.options, self._apps.read_namespaced_deployment,
                           name=pool.target.name, namespace=pool.target.namespace)
        current = self._current(pool)
        meta = deployment.metadata or kubernetes.client.V1ObjectMeta()
        return TargetState(current.replicas, current.resource_version, _paused(meta.annotations))

    def _current(self, pool: Pool) -> _Current:
        scale = _call(self._op(pool, "get"), self.options, self._apps.read_namespaced_deployment_scale,
                      name=pool.target.name, namespace=pool.target.namespace)
        meta = scale.metadata or kubernetes.client.V1ObjectMeta()
        return _Current((scale.spec.replicas or 0) if scale.spec else 0, meta.resource_version or "", meta.uid)

    def _write(self, pool: Pool, current: _Current, replicas: int, dry_run: bool) -> None:
        body = {"metadata": {"resourceVersion": current.resource_version}, "spec": {"replicas": replicas}}
        _call(self._op(pool, "patch"), self.options, self._apps.patch_namespaced_deployment_scale,
              name=pool.target.name, namespace=pool.target.namespace, body=body,
              dry_run="All" if dry_run else None)


class CapacityBufferActuator(_ReplicaTarget):
    """Reads and writes `spec.replicas` of a CapacityBuffer (autoscaling.x-k8s.io, alpha)."""

    kind, api_version = "CapacityBuffer", f"{CAPACITY_BUFFER_GROUP}/{CAPACITY_BUFFER_VERSION}"
    resource, group = CAPACITY_BUFFER_PLURAL, CAPACITY_BUFFER_GROUP

    def __init__(self, api_client: ApiClient, options: CallOptions | None = None) -> None:
        super().__init__(api_client, options)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)

    def read(self, pool: Pool) -> TargetState:
        """Current `spec.replicas` (0 when unset) and `paused` from the kill-switch annotation."""
        current = self._current(pool)
        return TargetState(current.replicas, current.resource_version, current.paused)

    def _current(self, pool: Pool) -> _Current:
        found = _call(self._op(pool, "get"), self.options, self._custom.get_namespaced_custom_object,
                      group=CAPACITY_BUFFER_GROUP, version=CAPACITY_BUFFER_VERSION, plural=CAPACITY_BUFFER_PLURAL,
                      namespace=pool.target.namespace, name=pool.target.name)
        obj: dict[str, Any] = found if isinstance(found, dict) else {}
        meta = obj.get("metadata") or {}
        return _Current(int((obj.get("spec") or {}).get("replicas") or 0), meta.get("resourceVersion", ""),
                        meta.get("uid"), _paused(meta.get("annotations")))

    def _write(self, pool: Pool, current: _Current, replicas: int, dry_run: bool) -> None:
        body = {"metadata": {"resourceVersion": current.resource_version}, "spec": {"replicas": replicas}}
        _call(self._op(pool, "patch"), self.options, self._custom.patch_namespaced_custom_object,
              group=CAPACITY_BUFFER_GROUP, version=CAPACITY_BUFFER_VERSION, plural=CAPACITY_BUFFER_PLURAL,
              namespace=pool.target.namespace, name=pool.target.name, body=body,
              dry_run="All" if dry_run else None, _content_type="application/merge-patch+json")


class TargetActuator:
    """The Actuator the daemon uses: dispatches on `pool.target.kind`."""

    def __init__(self, api_client: ApiClient, options: CallOptions | None = None) -> None:
        self._by_kind: dict[str, _ReplicaTarget] = {
            "Deployment": DeploymentScaleActuator(api_client, options),
            "CapacityBuffer": CapacityBufferActuator(api_client, options),
        }

    def read(self, pool: Pool) -> TargetState:
        """Current replicas and kill-switch state of the pool's target."""
        return self._by_kind[pool.target.kind].read(pool)

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        """Set the pool's target to `replicas` (server-side dry run when `dry_run`)."""
        self._by_kind[pool.target.kind].scale(pool, replicas, reason, dry_run)

