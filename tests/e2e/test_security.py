"""Issue 55 item 5 against a real API server: the chart rendered as `helm install` renders it
(its `lookup`s answered by the cluster) narrows the daemon's egress to the API server's own
endpoints, makes the daemon's certificate and its CA (kept on upgrade, not rendered again), and the ServiceMonitor's
tlsConfig verifies the daemon serving it: a scrape with the CA and serverName succeeds, one
without the CA, or for another name, fails; pods are readable only in the namespaces named."""

from __future__ import annotations

import base64
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from daemonproc import DaemonProc
from deploy_render import render_chart
from install import Installed, install
from kube import Kube, ensure_namespace
from test_apply import HERE, install_crd

RELEASE = "sec"
NS = "ph-security"
PROMETHEUS = {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}
VALUES: dict[str, Any] = {
    "serviceMonitor": {"enabled": True},
    "httpAuth": {"readers": [PROMETHEUS]},
    "disruption": {"readPods": True, "readPodsNamespaces": [NS]},
}


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory) -> Installed:
    kube = Kube(cluster.api())
    install_crd(kube, HERE / "manifests" / "servicemonitor-crd.yaml")
    return install(
        cluster, tmp_path_factory.mktemp("security"), VALUES, namespace=NS, release=RELEASE,
        looked_up=True,
    )  # fmt: skip


def _of(release: Installed, kind: str) -> dict[str, Any]:
    (found,) = [o for o in release.objects if o["kind"] == kind]
    return found


def test_egress_to_the_api_server_is_rendered_from_its_endpoints(cluster, release) -> None:
    discovery = kubernetes.client.DiscoveryV1Api(cluster.api())
    endpoints = discovery.read_namespaced_endpoint_slice("kubernetes", "default")
    addresses = sorted(f"{a}/32" for e in endpoints.endpoints for a in e.addresses)
    ports = [p.port for p in endpoints.ports]
    assert addresses and ports
    api_rule = _of(release, "NetworkPolicy")["spec"]["egress"][0]
    assert api_rule == {
        "ports": [{"port": port, "protocol": "TCP"} for port in ports],
        "to": [{"ipBlock": {"cidr": cidr}} for cidr in addresses],
    }
    assert cluster.server.rsplit(":", 1)[-1] in {str(p) for p in ports}  # where it listens


def _secret(cluster, name: str) -> dict[str, bytes]:
    core = kubernetes.client.CoreV1Api(cluster.api())
    data = core.read_namespaced_secret(name, NS).data
    return {k: base64.b64decode(v) for k, v in data.items()}


def _tls_secret(release: Installed) -> dict[str, Any]:
    """The chart-made certificate's Secret (the other Secret is the scraper's token)."""
    (found,) = [
        o for o in release.objects if o["kind"] == "Secret" and o["type"] == "kubernetes.io/tls"
    ]
    return found


def test_an_upgrade_keeps_the_certificate_without_rendering_its_key(cluster, release) -> None:
    """An upgrade that finds the live certificate valid for long enough leaves it as it is and
    renders no Secret for it, so its key is not in that revision's release record."""
    secret = _tls_secret(release)
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    again = render_chart(
        VALUES, release=RELEASE, namespace=NS, kubeconfig=cluster.admin_kubeconfig,
        is_upgrade=True,
    )  # fmt: skip
    assert not [o for o in again if o["kind"] == "Secret" and o["type"] == "kubernetes.io/tls"]
    assert _secret(cluster, secret["metadata"]["name"])["tls.key"]  # still there, unchanged


def _token(cluster) -> str:
    core = kubernetes.client.CoreV1Api(cluster.api())
    ensure_namespace(cluster.api(), "monitoring")
    try:
        core.create_namespaced_service_account("monitoring", {"metadata": {"name": "prometheus"}})
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    request = {"spec": {"expirationSeconds": 3600}}
    return core.create_namespaced_service_account_token(
        "prometheus", "monitoring", request
    ).status.token


def _scrape(port: int, tls: ssl.SSLContext, server_name: str, token: str) -> str:
    """GET /metrics as Prometheus does for the ServiceMonitor: to the pod's address, TLS verified
    for `server_name` (tlsConfig.serverName), its ServiceAccount token as the bearer."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=15)
    with raw, tls.wrap_socket(raw, server_hostname=server_name) as conn:
        conn.sendall(
            f"GET /metrics HTTP/1.1\r\nHost: {server_name}\r\nAuthorization: Bearer {token}"
            "\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")


def _port(daemon: DaemonProc, deadline: float) -> int:
    while time.monotonic() < deadline:
        for line in daemon.text().splitlines():
            if "serving " in line and "authorised callers only" in line:
                return int(line.split(" on port ")[1].split()[0])
        assert daemon.alive(), daemon.text()
        time.sleep(0.2)
    raise AssertionError(f"the daemon's main port did not open:\n{daemon.text()}")


def test_the_service_monitor_verifies_the_daemon_with_the_charts_ca(
    cluster, release, tmp_path
) -> None:
    (endpoint,) = _of(release, "ServiceMonitor")["spec"]["endpoints"]
    tls_config = endpoint["tlsConfig"]
    assert "insecureSkipVerify" not in tls_config
    ca_ref, server_name = tls_config["ca"]["secret"], tls_config["serverName"]
    # What the daemon mounts (the chart's env) from the Secret the chart made, as the kubelet would.
    secret = _secret(cluster, _tls_secret(release)["metadata"]["name"])
    mounted = tmp_path / "tls"
    mounted.mkdir()
    for key in ("tls.crt", "tls.key"):
        (mounted / key).write_bytes(secret[key])
    assert Path(release.env["PH_TLS_CERT_FILE"]).name == "tls.crt"
    config = tmp_path / "config.yaml"
    config.write_text(_of(release, "ConfigMap")["data"]["config.yaml"])
    daemon = DaemonProc(
        "tls", tmp_path, config, release.kubeconfig,
        PH_NAMESPACE=NS, PH_LEASE_NAME=release.lease, PH_HTTP_AUTH="true",
        PH_TLS_CERT_FILE=str(mounted / "tls.crt"), PH_TLS_KEY_FILE=str(mounted / "tls.key"),
    ).start()  # fmt: skip
    try:
        port = _port(daemon, time.monotonic() + 90)
        token = _token(cluster)
        # Prometheus's tlsConfig: the CA from the referenced Secret key, the name from serverName.
        ca = _secret(cluster, ca_ref["name"])[ca_ref["key"]].decode()
        verified = ssl.create_default_context(cadata=ca)
        answer = _scrape(port, verified, server_name, token)
        assert answer.startswith("HTTP/1.1 200"), answer[:300]
        assert "predictive_headroom_" in answer
        # Without the CA (the system's trust store, or the cluster's CA) the daemon is not trusted.
        for untrusting in (
            ssl.create_default_context(),
            ssl.create_default_context(cafile=str(cluster.pki / "ca.crt")),
        ):
            with pytest.raises(ssl.SSLCertVerificationError):
                _scrape(port, untrusting, server_name, token)
        # With the CA but another name (no serverName: the pod's address) it fails too.
        with pytest.raises(ssl.SSLCertVerificationError):
            _scrape(port, verified, "127.0.0.1", token)
    finally:
        daemon.stop()


def test_pods_are_readable_only_in_the_namespaces_named(cluster, release) -> None:
    from test_rbac import sa_api

    core = kubernetes.client.CoreV1Api(sa_api(release))
    core.list_namespaced_pod(NS, field_selector="spec.nodeName!=")  # the Role allows it
    with pytest.raises(kubernetes.client.ApiException) as everywhere:
        core.list_pod_for_all_namespaces()
    assert everywhere.value.status == 403
    assert release.env["PH_NODE_POD_NAMESPACES"] == NS
