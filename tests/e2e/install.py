"""The chart installed into the e2e cluster as the daemon's tests use it: default values, no daemon
Deployment (the daemon runs as a local process with the chart's ServiceAccount token instead)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
from deploy_render import render_chart
from kube import Kube, ensure_namespace, token_kubeconfig

NS = "predictive-headroom"
PLACEHOLDER = "predictive-headroom-placeholder-general"


@dataclass
class Installed:
    """A release of the chart: its objects and a kubeconfig for its ServiceAccount."""

    namespace: str
    objects: list[dict[str, Any]]
    kubeconfig: Path
    service_account: str
    lease: str
    """The Lease name the chart's daemon is given (PH_LEASE_NAME), the one its Role names."""
    env: dict[str, Any] = field(default_factory=dict)
    """The chart's daemon container's environment (values only)."""

    def placeholder(self, pool: str = "general") -> str:
        return next(
            o["metadata"]["name"]
            for o in self.objects
            if o["kind"] == "Deployment"
            and o["metadata"]["labels"].get("predictive-headroom.io/pool") == pool
        )


def install(
    cluster: Any, workdir: Path, values: dict[str, Any] | None = None, namespace: str = NS,
    release: str = "predictive-headroom", looked_up: bool = False,
) -> Installed:  # fmt: skip
    """Render the chart with `values` and server-side apply it, less the daemon's Deployment and
    PodDisruptionBudget (the tests run the daemon as a local process). `looked_up`: rendered as
    `helm install` does, its `lookup`s answered by the cluster (else offline, as `helm template`)."""
    kube = Kube(cluster.api())
    lookups_from = cluster.admin_kubeconfig if looked_up else None
    rendered = render_chart(values, release=release, namespace=namespace, kubeconfig=lookups_from)
    daemon = next(
        o
        for o in rendered
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "daemon"
    )
    env = {
        e["name"]: e.get("value")
        for e in daemon["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    objects = [o for o in rendered if o is not daemon and o["kind"] != "PodDisruptionBudget"]
    order = {"PriorityClass": 0, "ServiceAccount": 1}
    ensure_namespace(kube.api, namespace)
    for obj in sorted(objects, key=lambda o: order.get(o["kind"], 2)):
        if obj["metadata"].get("namespace"):
            ensure_namespace(kube.api, obj["metadata"]["namespace"])
        kube.apply(obj)
    account = daemon["spec"]["template"]["spec"]["serviceAccountName"]  # not the scraper's
    kubeconfig = token_kubeconfig(
        kube.api, cluster.server, cluster.pki / "ca.crt", namespace, account,
        workdir / f"{release}.kubeconfig",
    )  # fmt: skip
    return Installed(namespace, objects, kubeconfig, account, env["PH_LEASE_NAME"], env)


def replicas(api: Any, namespace: str, name: str) -> int:
    apps = kubernetes.client.AppsV1Api(api)
    return int(apps.read_namespaced_deployment_scale(name, namespace).spec.replicas or 0)


def set_replicas(api: Any, namespace: str, name: str, count: int) -> None:
    apps = kubernetes.client.AppsV1Api(api)
    apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": count}})
