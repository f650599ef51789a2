"""The daemon under the chart's own RBAC, with a token of its ServiceAccount (TokenRequest API):
what the Role allows is enough for a reconcile, and what it does not allow is refused by the API
server and named by the daemon (verb and resource), without a crash loop."""

from __future__ import annotations

import time

import kubernetes.client
import pytest
from daemonproc import DaemonProc, write_policy
from install import install, replicas, set_replicas
from kube import wait_for

from predictive_headroom.kube.cluster import load_kube_config


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    """The chart as a release of its own (test_apply's kustomize overlays grant the
    predictive-headroom ServiceAccount more, e.g. podwait's and nodepods' pod lists)."""
    installed = install(cluster, tmp_path_factory.mktemp("rbac"), namespace="rbac", release="rbac")
    yield installed
    set_replicas(cluster.api(), "rbac", installed.placeholder(), 0)


def pool(release, **extra):
    return {
        "name": "general",
        "target": {
            "kind": "Deployment",
            "namespace": release.namespace,
            "name": release.placeholder(),
        },
        "maxReplicas": 10,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
        **extra,
    }


def sa_api(release):
    import os

    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(release.kubeconfig)
    try:
        return load_kube_config()
    finally:
        if old is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = old


def test_a_reconcile_succeeds_with_the_charts_role(cluster, release, tmp_path) -> None:
    policy = write_policy(tmp_path / "policy.yaml", [pool(release, minReplicas=3)])
    daemon = DaemonProc("once", tmp_path, policy, release.kubeconfig)
    code, log = daemon.run_once()
    assert code == 0, log
    assert "forbidden" not in log.lower(), log
    assert replicas(cluster.api(), release.namespace, release.placeholder()) == 3


def test_the_service_account_may_not_delete_a_deployment_or_list_pods_cluster_wide(release) -> None:
    api = sa_api(release)
    apps = kubernetes.client.AppsV1Api(api)
    with pytest.raises(kubernetes.client.ApiException) as deleting:
        apps.delete_namespaced_deployment(release.placeholder(), release.namespace)
    assert deleting.value.status == 403
    core = kubernetes.client.CoreV1Api(api)
    with pytest.raises(kubernetes.client.ApiException) as listing:
        core.list_pod_for_all_namespaces()
    assert listing.value.status == 403
    with pytest.raises(kubernetes.client.ApiException) as other:
        apps.patch_namespaced_deployment_scale(
            "someone-elses", release.namespace, {"spec": {"replicas": 1}}
        )
    assert other.value.status == 403


def test_listing_pods_without_read_pods_is_named_and_the_daemon_keeps_running(
    cluster, release, tmp_path
) -> None:
    """PH_DISRUPTION_READ_PODS=true on a chart installed without disruption.readPods: the pods on
    a cordoned node cannot be listed; the daemon says which permission, estimates, goes on."""
    node = f"rbac-cordoned-{int(time.time())}"
    cluster.add_nodes([node])
    core = kubernetes.client.CoreV1Api(cluster.api())
    core.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        policy = write_policy(tmp_path / "policy.yaml", [pool(release, minReplicas=2)])
        daemon = DaemonProc(
            "readpods", tmp_path, policy, release.kubeconfig, PH_DISRUPTION_READ_PODS="true"
        )
        daemon.start()
        try:
            found = daemon.wait_log("needs 'list' on pods", 90)
            time.sleep(3)  # a few more reconciles: still running, no crash loop
            assert daemon.alive(), daemon.text()
        finally:
            daemon.stop()
        log = daemon.text()
        assert found, log
        line = next(x for x in log.splitlines() if "needs 'list' on pods" in x)
        assert "cluster-wide" in line and "forbidden" in line, line
        assert "Traceback" not in log, log
        wait_for(
            lambda: replicas(cluster.api(), release.namespace, release.placeholder()) >= 2,
            10,
            "the reconcile to have scaled despite the refused read",
        )
    finally:
        core.delete_node(node)
