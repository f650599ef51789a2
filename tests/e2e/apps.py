"""An app Deployment of 1-CPU pause pods at priority 0 and what its pods waited, read from their
`PodScheduled` condition (the scheduler's bind time), for the preemption test and the trace
benchmark."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import kubernetes.client
from kube import Kube, ensure_namespace

APP_LABEL = {"app": "e2e-app"}


def app_deployment(
    namespace: str, name: str = "app", replicas: int = 0, placement: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The app Deployment; `placement` (nodeSelector, tolerations) is added to its pod spec."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": APP_LABEL},
            "template": {
                "metadata": {"labels": APP_LABEL},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    **(placement or {}),
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }


def create_app(
    api: Any, namespace: str, name: str = "app", placement: dict[str, Any] | None = None
) -> None:
    ensure_namespace(api, namespace)
    Kube(api).apply(app_deployment(namespace, name, placement=placement))


def _time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def pod_waits(api: Any, namespace: str, selector: str = "app=e2e-app") -> dict[str, float | None]:
    """Pod name -> seconds from creation to bound (PodScheduled=True), None while pending."""
    core = kubernetes.client.CoreV1Api(api)
    out: dict[str, float | None] = {}
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        if pod.metadata.deletion_timestamp:
            continue
        created = _time(pod.metadata.creation_timestamp)
        bound = None
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "True":
                bound = _time(condition.last_transition_time)
        out[pod.metadata.name] = None if bound is None or created is None else bound - created
    return out


def running(api: Any, namespace: str, selector: str) -> int:
    core = kubernetes.client.CoreV1Api(api)
    return sum(
        1
        for p in core.list_namespaced_pod(namespace, label_selector=selector).items
        if p.spec.node_name and not p.metadata.deletion_timestamp
    )
