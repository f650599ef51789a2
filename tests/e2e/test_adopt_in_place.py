"""Issue 54 item 1 on the real API server with Karpenter: switching from the cluster-overprovisioner
chart in place.

The pause Deployment, its ServiceAccount and its PriorityClass are created as deliveryhero's
cluster-overprovisioner chart (0.7.x) renders them for a release `overprov` with its defaults (its
labels, its selector `app.kubernetes.io/name`, `app.kubernetes.io/instance`,
`app.cluster-overprovisioner/deployment`, the class `overprovisioning` of value -1, a `Recreate`
strategy; not its second, `globalDefault` class `default`, which would change the priority of every
other test's pods in this shared cluster), placed on a Karpenter NodePool of its own. Then this
chart's render is applied server-side, as `helm install` would, with the pool's placeholder
declared existing: no error, no second Deployment. The daemon, first in dry-run, then for real,
scales the labelled Deployment through /scale only: the same ReplicaSet, the same pod UIDs.
Removing the label hands it back: the daemon stops writing it.
"""

from __future__ import annotations

from typing import Any

import kubernetes.client
from karpenter import placement
from kube import ensure_namespace, wait_for
from test_karpenter import chart_daemon, last_run, pool_entry

NS = "overprov"
NAME = "overprov-cluster-overprovisioner-default"
POOL_LABEL = "predictive-headroom.io/pool"
HELM = "helm"
"""The field manager of the objects the old chart made (Helm 3 creates them with POST)."""
CHART_LABELS = {
    "app.kubernetes.io/name": "cluster-overprovisioner",
    "helm.sh/chart": "cluster-overprovisioner-0.7.14",
    "app.kubernetes.io/instance": "overprov",
    "app.kubernetes.io/version": "3.9",
    "app.kubernetes.io/managed-by": "Helm",
}
SELECTOR = {
    "app.kubernetes.io/name": "cluster-overprovisioner",
    "app.kubernetes.io/instance": "overprov",
    "app.cluster-overprovisioner/deployment": "default",
}
HELM_ANNOTATIONS = {"meta.helm.sh/release-name": "overprov", "meta.helm.sh/release-namespace": NS}


def _overprovisioner(api: Any, replicas: int) -> None:
    """The objects `helm install overprov deliveryhero/cluster-overprovisioner -n overprov` makes
    (with priorityClassDefault.enabled=false), placed on the `adopt` NodePool."""
    core = kubernetes.client.CoreV1Api(api)
    meta = {"labels": CHART_LABELS, "annotations": HELM_ANNOTATIONS}
    ensure_namespace(api, NS)
    kubernetes.client.SchedulingV1Api(api).create_priority_class(
        {
            "metadata": {"name": "overprovisioning", **meta},
            "value": -1,
            "globalDefault": False,
            "description": "Priority class used for overprovision pods",
        },
        field_manager=HELM,
    )
    core.create_namespaced_service_account(
        NS, {"metadata": {"name": "overprov-cluster-overprovisioner", **meta}}, field_manager=HELM
    )
    pod_labels = {**CHART_LABELS, "app.cluster-overprovisioner/deployment": "default"}
    deployment = {
        "metadata": {"name": NAME, "namespace": NS, **meta,
                     "labels": {**CHART_LABELS, "app.cluster-overprovisioner/deployment": "default"}},
        "spec": {
            "strategy": {"type": "Recreate"},
            "replicas": replicas,
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": "overprov-cluster-overprovisioner",
                    "priorityClassName": "overprovisioning",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "cluster-overprovisioner",
                            "image": "registry.k8s.io/pause:3.9",
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {
                                "limits": {"cpu": "1000m", "memory": "1000Mi"},
                                "requests": {"cpu": "1000m", "memory": "1000Mi"},
                            },
                        }
                    ],
                    **placement("adopt"),
                },
            },
        },
    }  # fmt: skip
    kubernetes.client.AppsV1Api(api).create_namespaced_deployment(
        NS, deployment, field_manager=HELM
    )


def _pods(api: Any) -> dict[str, tuple[str, str]]:
    """uid -> (ReplicaSet, node) of the running pods of the Deployment."""
    core = kubernetes.client.CoreV1Api(api)
    selector = ",".join(f"{k}={v}" for k, v in SELECTOR.items())
    return {
        p.metadata.uid: (p.metadata.owner_references[0].name, p.spec.node_name)
        for p in core.list_namespaced_pod(NS, label_selector=selector).items
        if p.spec.node_name and not p.metadata.deletion_timestamp
    }


def _replica_sets(api: Any) -> set[str]:
    found = kubernetes.client.AppsV1Api(api).list_namespaced_replica_set(NS).items
    return {rs.metadata.name for rs in found}


def _label(api: Any, pool: str | None) -> None:
    """`kubectl label deployment -n overprov NAME predictive-headroom.io/pool=<pool>` (None: `-`)."""
    kubernetes.client.AppsV1Api(api).patch_namespaced_deployment(
        NAME, NS, {"metadata": {"labels": {POOL_LABEL: pool}}}, field_manager="kubectl-label"
    )


def _values(min_replicas: int) -> dict[str, Any]:
    return {
        "allowedNamespaces": [NS],
        "priorityClass": {"create": False, "name": "overprovisioning"},
        "pools": [
            {
                "name": "web",
                "target": {"namespace": NS, "name": NAME},
                "minReplicas": min_replicas,
                "maxReplicas": 10,
                "placeholder": {
                    "existing": True,
                    "requests": {"cpu": "1000m", "memory": "1000Mi"},
                },
            }
        ],
    }


def _reconciled_after(port: int, since: float) -> dict[str, Any] | None:
    """The pool's entry on /last-run once a reconcile that started after `since` is there."""
    try:
        reconcile = last_run(port).get("reconcile") or {}
    except OSError:
        return None
    if float(reconcile.get("at") or 0) <= since:
        return None
    return pool_entry(port, "web")


# Long on purpose: one migration, step by step, as deploy/README.md tells it.
def test_the_chart_adopts_the_overprovisioner_deployment_in_place(
    cluster, karpenter, tmp_path
) -> None:
    api = cluster.api()
    apps = kubernetes.client.AppsV1Api(api)
    karpenter.pool("adopt", consolidate_after=3600)
    try:
        _overprovisioner(api, 3)
        before = wait_for(
            lambda: len(p := _pods(api)) == 3 and p, karpenter.boot + 120, "3 overprovisioner pods"
        )
        (replica_set,) = {rs for rs, _ in before.values()}
        old = apps.read_namespaced_deployment(NAME, NS).to_dict()

        # helm install of this chart, the placeholder declared existing: applied server-side,
        # with no error and no second Deployment.
        daemon, port, installed = chart_daemon(
            cluster, tmp_path, _values(5), "adopt", PH_RECONCILE_INTERVAL="1"
        )
        daemon.stop()  # started by the helper for real; the migration starts in dry-run
        assert not [o for o in installed.objects if o["metadata"]["name"] == NAME]
        assert [d.metadata.name for d in apps.list_namespaced_deployment(NS).items] == [NAME]

        _label(api, "web")
        daemon.start("--dry-run")
        try:
            assert daemon.wait_log("DRY-RUN would scale pool web", 90), daemon.text()[-3000:]
        finally:
            daemon.stop()
        assert apps.read_namespaced_deployment_scale(NAME, NS).spec.replicas == 3

        daemon.start()
        try:
            wait_for(
                lambda: apps.read_namespaced_deployment_scale(NAME, NS).spec.replicas == 5,
                90,
                f"the daemon to scale the adopted Deployment to 5: {daemon.text()[-3000:]}",
            )
            after = wait_for(
                lambda: len(p := _pods(api)) == 5 and p, karpenter.boot + 120, "5 pods"
            )
            # The pods were not restarted: the three stay, the new two come from the same
            # ReplicaSet, and the Deployment's selector and pod template are as they were.
            assert set(before) <= set(after), (before, after)
            assert {rs for rs, _ in after.values()} == {replica_set}
            assert _replica_sets(api) == {replica_set}
            new = apps.read_namespaced_deployment(NAME, NS).to_dict()
            assert new["spec"]["selector"] == old["spec"]["selector"]
            assert new["spec"]["template"] == old["spec"]["template"]
            # The daemon wrote /scale and nothing else (the others: the old chart, the label, the
            # Deployment controller's revision annotation and status).
            daemons = [
                e
                for e in new["metadata"]["managed_fields"]
                if e["manager"] not in (HELM, "kubectl-label", "kube-controller-manager")
            ]
            assert daemons, new["metadata"]["managed_fields"]
            for entry in daemons:
                assert entry["subresource"] == "scale", entry
                assert entry["fields_v1"] == {"f:spec": {"f:replicas": {}}}, entry
            print(
                f"3 -> 5 through /scale: pods kept {sorted(before)}, ReplicaSet {replica_set}, "
                f"the daemon's fields {[(e['manager'], e['subresource']) for e in daemons]}"
            )

            # Removing the label hands the Deployment back: the count set now stays.
            _label(api, None)
            apps.patch_namespaced_deployment_scale(NAME, NS, {"spec": {"replicas": 2}})
            since = float(last_run(port)["reconcile"]["at"])
            entry = wait_for(
                lambda: (e := _reconciled_after(port, since)) and e["action"] == "refused" and e,
                60,
                "a reconcile that refuses the unlabelled Deployment",
            )
            assert "lacks the label predictive-headroom.io/pool=web" in entry["error"], entry
            since = float(last_run(port)["reconcile"]["at"])
            wait_for(lambda: _reconciled_after(port, since), 60, "one more reconcile")
            assert apps.read_namespaced_deployment_scale(NAME, NS).spec.replicas == 2
        finally:
            daemon.stop()
        assert "Traceback" not in daemon.text(), daemon.text()
    finally:
        try:  # its pods would hold the pool's nodes
            apps.delete_namespaced_deployment(NAME, NS)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
        karpenter.delete_pool("adopt")
