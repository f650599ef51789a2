"""Issue 45 item 2 in the chart and kustomize: the main port over TLS for authorised readers (the
ServiceMonitor presents a token of its own from a Secret, issue 63), a ClusterRole for the readers, the daemon's right to
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


def test_the_service_monitor_scrapes_over_https_with_a_token_of_its_own_from_a_secret() -> None:
    """Never Prometheus's own ServiceAccount token (`bearerTokenFile`, which prometheus-operator
    refuses under arbitraryFSAccessThroughSMs.deny): a ServiceAccount that may only get the
    readers' paths, and a Secret the API server fills with its token, named by `authorization`."""
    objects = render_chart(
        {"serviceMonitor": {"enabled": True}, "httpAuth": {"readers": [PROMETHEUS]}}
    )
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https"
    assert "bearerTokenFile" not in endpoint and "bearerTokenSecret" not in endpoint
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "predictive-headroom-scraper-token", "key": "token"},
    }
    assert endpoint["tlsConfig"] == {  # the chart's CA verifies the daemon (test_deploy_tls.py)
        "ca": {"secret": {"name": "predictive-headroom-tls", "key": "ca.crt"}},
        "serverName": f"predictive-headroom.{NAMESPACE}.svc",
    }
    (token,) = _named(objects, "Secret", "-scraper-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["namespace"] == monitor["metadata"]["namespace"] == NAMESPACE
    assert "data" not in token and "stringData" not in token  # the API server writes the token
    (account,) = _named(objects, "ServiceAccount", "-scraper")
    assert token["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": account["metadata"]["name"]
    }
    assert account["automountServiceAccountToken"] is False
    (reader,) = _named(objects, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": PATHS, "verbs": ["get"]}]
    (scraper,) = _named(objects, "ClusterRoleBinding", "-scraper")
    assert scraper["roleRef"]["name"] == reader["metadata"]["name"]
    assert scraper["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    (binding,) = _named(objects, "ClusterRoleBinding", "-metrics-reader")
    assert binding["subjects"] == [PROMETHEUS]  # people and tools of your own, as before
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    (auth,) = _named(objects, "ClusterRole", "-auth")
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in auth["rules"]} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }


def test_a_token_secret_of_your_own_replaces_the_scraper_account() -> None:
    import helm_python as helm
    import pytest

    own = {"create": False, "secretName": "prom-scrape", "key": "jwt"}
    objects = render_chart({"serviceMonitor": {"enabled": True, "token": own}})
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["authorization"]["credentials"] == {
        "name": "prom-scrape",
        "key": "jwt",
    }
    assert not _named(objects, "ServiceAccount", "-scraper")
    assert not _named(objects, "ClusterRoleBinding", "-scraper")
    with pytest.raises(helm.HelmError, match=r"serviceMonitor\.token\.secretName: with"):
        render_chart({"serviceMonitor": {"enabled": True, "token": {"create": False}}})


def test_the_kustomize_service_monitor_presents_the_same_kind_of_token() -> None:
    objects = render_kustomize("servicemonitor")
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert "bearerTokenFile" not in endpoint
    secret = endpoint["authorization"]["credentials"]["name"]
    (token,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == secret]
    assert token["type"] == "kubernetes.io/service-account-token"
    account = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "predictive-headroom-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]


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
        assert ports == ["https"]  # the probes: only from the pod's own node (no rule)
