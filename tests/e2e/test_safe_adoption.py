"""Issue 45 items 1 and 2 against a real kube-apiserver with RBAC: the daemon, holding only the
chart's rights, refuses a target without its pool label, and its HTTP port answers a
ServiceAccount bound to the chart's metrics-reader ClusterRole (TokenReview and
SubjectAccessReview asked with the chart's -auth ClusterRole) and nobody else."""

from __future__ import annotations

import http.client
import re
import ssl

import kubernetes.client
from daemonproc import DaemonProc, write_policy
from install import install, replicas
from kube import wait_for

NAMESPACE = "safe"
RELEASE = "safe"


def _token(api, account: str) -> str:
    core = kubernetes.client.CoreV1Api(api)
    request = {"spec": {"expirationSeconds": 3600}}
    return core.create_namespaced_service_account_token(account, NAMESPACE, request).status.token


def _get(port: int, path: str, token: str | None) -> tuple[int, bytes]:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=insecure)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_a_foreign_target_is_refused_and_the_port_answers_only_authorised_readers(
    cluster, tmp_path
) -> None:
    api = cluster.api()
    reader = {"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}
    values = {
        "pools": [{"name": "general", "maxReplicas": 5, "minReplicas": 2}],
        "httpAuth": {"readers": [reader]},
    }
    release = install(cluster, tmp_path, values, namespace=NAMESPACE, release=RELEASE)
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "reader"}})
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "stranger"}})
    placeholder = release.placeholder()
    # A person takes the placeholder over: the label goes, the count is theirs (7).
    apps.patch_namespaced_deployment(
        placeholder,
        NAMESPACE,
        {"metadata": {"labels": {"predictive-headroom.io/pool": None}}, "spec": {"replicas": 7}},
    )
    target = {"kind": "Deployment", "namespace": NAMESPACE, "name": placeholder}
    policy = write_policy(
        tmp_path / "policy.yaml",
        [{"name": "general", "target": target, "maxReplicas": 10, "minReplicas": 2}],
    )
    daemon = DaemonProc(
        "safe",
        tmp_path,
        policy,
        release.kubeconfig,
        PH_NAMESPACE=NAMESPACE,
        PH_LEASE_NAME=release.lease,
    )
    daemon.start()
    try:
        wait_for(lambda: daemon.wait_log("refused", 1.0), 120, "the refusal in the log")
        found = wait_for(
            lambda: re.search(r"on port (\d+) \(https", daemon.text()), 60, "the https port"
        )
        port = int(found.group(1))
        assert replicas(api, NAMESPACE, placeholder) == 7
        assert _get(port, "/report.json", None)[0] == 401
        code, body = _get(port, "/last-run", _token(api, "stranger"))
        assert code == 403 and b"system:serviceaccount:safe:stranger may not get" in body, body
        code, body = _get(port, "/last-run", _token(api, "reader"))
        assert code == 200 and b'"action": "refused"' in body.replace(b'":"', b'": "'), body
        code, body = _get(port, "/metrics", _token(api, "reader"))
        assert code == 200 and b'predictive_headroom_target_refused{pool="general"} 1.0' in body
    finally:
        daemon.stop()
    assert replicas(api, NAMESPACE, placeholder) == 7
