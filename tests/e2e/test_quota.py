"""The quota cap on the real API server (issue 65 item 4): a ResourceQuota in the placeholders'
namespace leaves room for 3 placeholders while the plan asks 8: the daemon, under the chart's own
role (get/list/watch on resourcequotas there), holds 3, `/last-run` says `quota` naming the quota,
and the ReplicaSet records no FailedCreate; the quota raised, the daemon holds 8."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import kubernetes.client
import pytest
from daemonproc import DaemonProc, write_policy
from install import install, replicas, set_replicas
from kube import wait_for

QUOTA = "placeholders"


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    installed = install(
        cluster, tmp_path_factory.mktemp("quota"), namespace="quota", release="quota"
    )
    yield installed
    set_replicas(cluster.api(), "quota", installed.placeholder(), 0)
    core = kubernetes.client.CoreV1Api(cluster.api())
    try:
        core.delete_namespaced_resource_quota(QUOTA, installed.namespace)
    except kubernetes.client.ApiException as exc:
        if exc.status != 404:
            raise


def set_quota(api, namespace: str, pods: int) -> None:
    """Create or raise the quota: at most `pods` pods in the namespace."""
    core = kubernetes.client.CoreV1Api(api)
    body = {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": str(pods)}}}
    try:
        core.create_namespaced_resource_quota(namespace, body)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
        core.patch_namespaced_resource_quota(QUOTA, namespace, body)


def last_run(daemon: DaemonProc) -> dict:
    found = re.search(r"on port (\d+)", daemon.text())
    assert found, daemon.text()
    url = f"http://127.0.0.1:{found[1]}/last-run"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read().decode())


def failed_creates(api, namespace: str) -> list[str]:
    core = kubernetes.client.CoreV1Api(api)
    events = core.list_namespaced_event(namespace, field_selector="reason=FailedCreate").items
    return [e.message or "" for e in events]


def test_a_quota_room_of_3_holds_3_without_failed_creates_and_raised_holds_8(
    cluster, release, tmp_path
) -> None:
    api = cluster.api()
    ns, name = release.namespace, release.placeholder()
    set_quota(api, ns, 3)
    pool = {
        "name": "general",
        "target": {"kind": "Deployment", "namespace": ns, "name": name},
        "minReplicas": 8,
        "maxReplicas": 10,
        "scaleDownStabilization": "0s",
        "placeholder": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    policy = write_policy(tmp_path / "quota.yaml", [pool])
    daemon = DaemonProc(
        "quota",
        tmp_path,
        policy,
        release.kubeconfig,
        PH_LEADER_ELECTION="false",
        PH_HTTP_AUTH="off",
    )
    daemon.start()
    try:
        assert daemon.wait_log("on port", 60), daemon.text()
        wait_for(lambda: replicas(api, ns, name) == 3, 90, "3 replicas (the quota's room)")
        status = wait_for(
            lambda: (
                (s := last_run(daemon)).get("quota", {}).get("general", {}).get("quota_by") and s
            ),
            30,
            "the quota on /last-run",
        )
        assert status["quota"]["general"]["quota_by"] == f"{QUOTA}: pods", status["quota"]
        assert status["quota"]["general"]["replicas"] == 3
        [outcome] = status["reconcile"]["pools"]
        assert outcome["reason"] == "quota" and outcome["desired_replicas"] == 3, outcome
        # the ReplicaSet made its 3 pods and was refused none (a few reconciles later still)
        core = kubernetes.client.CoreV1Api(api)
        wait_for(
            lambda: (
                len(
                    core.list_namespaced_pod(
                        ns, label_selector="predictive-headroom.io/pool=general"
                    ).items
                )
                == 3
            ),
            60,
            "3 placeholder pods",
        )
        time.sleep(3)  # a few more reconciles (one a second): still 3, nothing refused
        assert replicas(api, ns, name) == 3
        assert not failed_creates(api, ns), failed_creates(api, ns)
        assert "forbidden" not in daemon.text().lower(), daemon.text()

        set_quota(api, ns, 20)
        wait_for(lambda: replicas(api, ns, name) == 8, 90, "8 replicas (the quota raised)")
        assert not failed_creates(api, ns), failed_creates(api, ns)
        assert daemon.alive(), daemon.text()
    finally:
        daemon.stop()
