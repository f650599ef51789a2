"""The daemon reads the real cluster through watches (issue 47): under the chart's own role its
caches sync, `/readyz` and `/last-run` say so (the reason in `/last-run` only), a node added reaches the next reconcile without a
new LIST, and a role without `watch` (RBAC not yet updated) is named, verb and resource, and read by
listing, without a crash loop."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import kubernetes.client
import pytest
from daemonproc import DaemonProc, write_policy
from install import install, replicas, set_replicas
from kube import wait_for

LABEL = "watch-test"


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    installed = install(
        cluster, tmp_path_factory.mktemp("watch"), namespace="watch", release="watch"
    )
    yield installed
    set_replicas(cluster.api(), "watch", installed.placeholder(), 0)


def proportional_pool(release, selector: str) -> dict:
    """One node of `LABEL=selector` per replica: the count follows the nodes the cache sees."""
    return {
        "name": "general",
        "target": {
            "kind": "Deployment",
            "namespace": release.namespace,
            "name": release.placeholder(),
        },
        "maxReplicas": 10,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "proportional": {"linear": {"nodesPerReplica": 1}, "nodeSelector": {LABEL: selector}},
    }


def get(daemon: DaemonProc, path: str) -> tuple[int, str]:
    found = re.search(r"on port (\d+)", daemon.text())
    assert found, daemon.text()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{found[1]}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def why(daemon: DaemonProc) -> str:
    """Why the daemon is (not) ready: `/last-run`'s `readiness` (`/readyz` says only ready or not)."""
    return json.loads(get(daemon, "/last-run")[1])["readiness"]["why"]


def start(release, tmp_path, name: str, selector: str) -> DaemonProc:
    policy = write_policy(tmp_path / f"{name}.yaml", [proportional_pool(release, selector)])
    # Read over plain HTTP on one port: who may read the port is test_safe_adoption's.
    daemon = DaemonProc(
        name, tmp_path, policy, release.kubeconfig, PH_LEADER_ELECTION="false", PH_HTTP_AUTH="off"
    )
    daemon.start()
    assert daemon.wait_log("on port", 60), daemon.text()
    return daemon


def test_a_node_added_reaches_the_next_reconcile_through_the_watch(cluster, release, tmp_path):
    nodes = [f"watch-a-{int(time.time())}-{i}" for i in range(3)]
    cluster.add_nodes(nodes[:2], labels={LABEL: "a"})
    daemon = start(release, tmp_path, "watching", "a")
    try:
        api = cluster.api()
        wait_for(
            lambda: replicas(api, release.namespace, release.placeholder()) == 2, 90, "2 replicas"
        )
        wait_for(lambda: get(daemon, "/readyz")[0] == 200, 30, "ready")
        assert "cache(s) synced" in why(daemon)
        cluster.add_nodes(nodes[2:], labels={LABEL: "a"})
        wait_for(
            lambda: replicas(api, release.namespace, release.placeholder()) == 3, 60, "3 replicas"
        )
        caches = {c["query"]: c for c in json.loads(get(daemon, "/last-run")[1])["caches"]}
        node_cache = caches[f"nodes (labels {LABEL}=a)"]
        assert node_cache["mode"] == "watching", caches
        assert node_cache["objects"] == 3 and node_cache["relists"] == 1, node_cache
        assert node_cache["age_seconds"] < 90, node_cache
        assert daemon.alive() and "forbidden" not in daemon.text().lower(), daemon.text()
    finally:
        daemon.stop()
        core = kubernetes.client.CoreV1Api(cluster.api())
        for node in nodes:
            core.delete_node(node)


def test_a_role_without_watch_is_named_and_the_daemon_reads_by_listing(cluster, release, tmp_path):
    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.api())
    role = next(
        o["metadata"]["name"]
        for o in release.objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-nodes")
    )
    granted = rbac.read_cluster_role(role).rules[0].verbs
    rbac.patch_cluster_role(
        role, {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}
    )
    nodes = [f"watch-b-{int(time.time())}-{i}" for i in range(2)]
    cluster.add_nodes(nodes, labels={LABEL: "b"})
    daemon = start(release, tmp_path, "nowatch", "b")
    try:
        assert daemon.wait_log("watch nodes forbidden", 60), daemon.text()
        assert daemon.wait_log("falling back to a LIST", 10), daemon.text()
        api = cluster.api()
        wait_for(
            lambda: replicas(api, release.namespace, release.placeholder()) == 2, 60, "2 replicas"
        )
        time.sleep(3)  # a few more reconciles: still running, no crash loop
        assert daemon.alive(), daemon.text()
        line = next(x for x in daemon.text().splitlines() if "watch nodes forbidden" in x)
        assert "needs 'watch' on nodes cluster-wide" in line, line
        status, reason = get(daemon, "/readyz")[0], why(daemon)
        assert status == 200 and "watch or list refused" in reason, reason
        assert "Traceback" not in daemon.text(), daemon.text()
    finally:
        daemon.stop()
        rbac.patch_cluster_role(
            role, {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": granted}]}
        )
        core = kubernetes.client.CoreV1Api(cluster.api())
        for node in nodes:
            core.delete_node(node)
