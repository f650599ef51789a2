"""Issue 45 item 2 in the chart and kustomize: the main port over TLS for authorised readers (the
ServiceMonitor carries Prometheus's token), a ClusterRole for the readers, the daemon's right to
ask the API server (tokenreviews, subjectaccessreviews), probes on their own port, and the
NetworkPolicy on by default and in the kustomize base."""

from __future__ import annotations

from deploy_render import NAMESPACE, render_chart, render_kustomize

PROMETHEUS = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
PATHS = ["/metrics", "/last-run", "/report", "/report/", "/report.json"]


def _named(objects, kind, suffix):
    return [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


def _container(objects):
    (daemon,) = [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "daemon"
    ]
    return daemon["spec"]["template"]["spec"]["containers"][0]


def test_the_service_monitor_scrapes_over_https_with_prometheus_s_own_token() -> None:
    objects = render_chart(
        {"serviceMonitor": {"enabled": True}, "httpAuth": {"readers": [PROMETHEUS]}}
    )
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {  # the chart's CA verifies the daemon (test_deploy_tls.py)
        "ca": {"secret": {"name": "predictive-headroom-tls", "key": "ca.crt"}},
        "serverName": f"predictive-headroom.{NAMESPACE}.svc",
    }
    (reader,) = _named(objects, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": PATHS, "verbs": ["get"]}]
    (binding,) = _named(objects, "ClusterRoleBinding", "-metrics-reader")
    assert binding["subjects"] == [PROMETHEUS]
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    (auth,) = _named(objects, "ClusterRole", "-auth")
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in auth["rules"]} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }


def test_a_mounted_certificate_is_verified_and_auth_off_serves_plainly() -> None:
    tls = {"ca": {"secret": {"name": "ph-ca", "key": "ca.crt"}}, "serverName": "ph"}
    objects = render_chart(
        {
            "httpAuth": {"tlsSecret": "ph-tls"},
            "serviceMonitor": {"enabled": True, "tlsConfig": tls},
        }
    )
    container = _container(objects)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PH_TLS_CERT_FILE"].endswith("/tls.crt") and env["PH_TLS_KEY_FILE"].endswith(
        "/tls.key"
    )
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == tls

    plain = render_chart({"httpAuth": {"enabled": False}, "serviceMonitor": {"enabled": True}})
    container = _container(plain)
    assert {e["name"]: e.get("value") for e in container["env"]}["PH_HTTP_AUTH"] == "false"
    assert [p["name"] for p in container["ports"]] == ["http", "probes"]
    (monitor,) = [o for o in plain if o["kind"] == "ServiceMonitor"]
    assert "scheme" not in monitor["spec"]["endpoints"][0]
    assert not _named(plain, "ClusterRole", "-auth")
    assert not _named(plain, "ClusterRole", "-metrics-reader")


def test_probes_use_their_own_port_and_the_network_policy_is_in_both_deployments() -> None:
    for objects in (render_chart(), render_kustomize("base")):
        container = _container(objects)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["port"] == "probes"
        (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
        assert policy["metadata"]["namespace"] == NAMESPACE
        ports = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
        assert ports == ["probes", "https"]
