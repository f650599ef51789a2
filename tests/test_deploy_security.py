"""Issue 55 item 5, the chart's security defaults as shipped: the ServiceMonitor verifies the
daemon's certificate (made by Helm, kept across upgrades, or cert-manager's), `insecureSkipVerify`
only when asked and warned about; egress to the API server only to the addresses looked up at
install (a render that cannot look refuses, unless told); images pinned by digest; Prometheus's CA
from a Secret or ConfigMap; pods listed only in named namespaces when asked.

The chart's `lookup`s answer nothing offline (helm-python-sdk, as `helm template`), so where a test
needs what a cluster would answer, it renders a copy of the chart whose lookup is replaced by that
answer (as tests/test_deploy_replicas.py does); tests/e2e/test_security.py asks a real API server.
"""

from __future__ import annotations

import base64
import datetime
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from deploy_render import CHART, NAMESPACE, TEST_API_SERVER, render_chart, with_api_server

helm = pytest.importorskip("helm_python", reason="needs helm-python-sdk")

Object = dict[str, Any]
SECRET_LOOKUP = 'lookup "v1" "Secret" .Release.Namespace $tls.secretName'
SLICE_LOOKUP = 'lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes"'
ENDPOINTS_LOOKUP = 'lookup "v1" "Endpoints" "default" "kubernetes"'
SERVER_NAME = f"predictive-headroom.{NAMESPACE}.svc"
DIGEST = "sha256:" + "ab" * 32
NOT_AFTER = "predictive-headroom.io/not-after"
PAUSE_DIGEST = "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"
"""registry.k8s.io/pause:3.10's image index, as Dependabot recorded it from the registry
(cilium/alpine-curl 6540e480, "Bump pause from 3.9 to 3.10"): the chart's default."""


def _render_with_lookups(
    tmp_path: Path, values: dict[str, Any], answers: dict[str, str], upgrade: bool = False
) -> tuple[list[Object], str]:
    """The chart's objects and NOTES, rendered from a copy whose `lookup`s (keys of `answers`, each
    found in the templates) answer the template expressions given, as a cluster would."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, dirs_exist_ok=True)
    for expression, answer in answers.items():
        hits = 0
        for template in (chart / "templates").iterdir():
            text = template.read_text()
            hits += text.count(expression)
            template.write_text(text.replace(expression, answer))
        assert hits == 1, f"{expression!r} is no longer in the chart's templates once"
    how = {"is_upgrade": True} if upgrade else {"is_install": True}
    with helm.Chart.load(chart) as loaded:
        manifests = loaded.render(values, name="predictive-headroom", namespace=NAMESPACE, **how)
    objects = [
        doc
        for path, text in sorted(manifests.items())
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    return objects, manifests["predictive-headroom/templates/NOTES.txt"]


def _one(objects: list[Object], kind: str, **where: str) -> Object:
    (found,) = [
        o
        for o in objects
        if o["kind"] == kind and all(o["metadata"].get(k) == v for k, v in where.items())
    ]
    return found


def _daemon(objects: list[Object]) -> dict[str, Any]:
    (daemon,) = [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "daemon"
    ]
    return daemon["spec"]["template"]["spec"]


def _env(objects: list[Object]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in _daemon(objects)["containers"][0]["env"]}


def _valid(objects: list[Object]) -> list[Object]:
    """`objects`, each checked against the newest Kubernetes schemas (strict) but CRDs'."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = kubernetes_validate.utils.latest_version()
    for obj in objects:
        if obj["apiVersion"].split("/")[0] not in ("monitoring.coreos.com", "cert-manager.io"):
            kubernetes_validate.validate(obj, version, strict=True)
    return objects


def _tls_config(objects: list[Object]) -> dict[str, Any]:
    return _one(objects, "ServiceMonitor")["spec"]["endpoints"][0]["tlsConfig"]


# --- the daemon's certificate and the ServiceMonitor -------------------------------------------


def test_the_chart_makes_a_ca_and_a_certificate_for_the_service_that_the_monitor_verifies():
    objects = _valid(render_chart({"serviceMonitor": {"enabled": True}}))
    secret = _one(objects, "Secret", name="predictive-headroom-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    ca, cert = (
        x509.load_pem_x509_certificate(data["ca.crt"]),
        x509.load_pem_x509_certificate(data["tls.crt"]),
    )
    cert.verify_directly_issued_by(ca)  # raises unless the CA signed it
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SERVER_NAME in names.get_values_for_type(x509.DNSName)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(days=363) < left <= datetime.timedelta(days=366)  # about a year
    noted = datetime.datetime.fromisoformat(secret["metadata"]["annotations"][NOT_AFTER])
    assert abs(noted - cert.not_valid_after_utc) < datetime.timedelta(hours=1)
    # Kept by Helm when a later upgrade does not render it (its key then stays out of that record).
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert b"PRIVATE KEY" in data["tls.key"]
    assert _tls_config(objects) == {
        "ca": {"secret": {"name": "predictive-headroom-tls", "key": "ca.crt"}},
        "serverName": SERVER_NAME,
    }
    # The daemon serves that certificate.
    env = _env(objects)
    assert env["PH_TLS_CERT_FILE"] == "/var/run/secrets/predictive-headroom-tls/tls.crt"
    assert env["PH_TLS_KEY_FILE"] == "/var/run/secrets/predictive-headroom-tls/tls.key"
    (volume,) = [v for v in _daemon(objects)["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "predictive-headroom-tls"


def _live_secret(not_after: datetime.datetime | None) -> str:
    """A lookup answer: the live <fullname>-tls Secret, with its not-after annotation if given."""
    annotations = f'(dict "{NOT_AFTER}" "{not_after.isoformat()}")' if not_after else "dict"
    data = 'dict "tls.crt" "TElWRS1DRVJU" "tls.key" "TElWRS1LRVk=" "ca.crt" "TElWRS1DQQ=="'
    return f'dict "metadata" (dict "annotations" {annotations}) "data" ({data})'


def test_an_upgrade_leaves_a_certificate_valid_for_long_enough_and_renders_no_key(tmp_path):
    """The Secret is not rendered (so its key is not in this revision's release record) and the
    daemon and the ServiceMonitor go on using the live one."""
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=200)
    objects, _ = _render_with_lookups(
        tmp_path,
        with_api_server({"serviceMonitor": {"enabled": True}}, TEST_API_SERVER),
        {SECRET_LOOKUP: _live_secret(later)},
        upgrade=True,
    )
    assert not [
        o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-tls")
    ]
    assert _tls_config(objects)["ca"] == {
        "secret": {"name": "predictive-headroom-tls", "key": "ca.crt"}
    }
    (volume,) = [v for v in _daemon(objects)["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "predictive-headroom-tls"


@pytest.mark.parametrize(
    ("days_left", "values"),
    [(10, {}), (50, {"tls": {"renewBeforeDays": 60}}), (-3, {}), (None, {})],
    ids=["within-30-days", "within-renewBeforeDays", "expired", "no-annotation-older-chart"],
)
def test_an_upgrade_renews_a_certificate_that_expires_within_renew_before_days(
    tmp_path, days_left, values
):
    not_after = (
        None
        if days_left is None
        else datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days_left)
    )
    objects, _ = _render_with_lookups(
        tmp_path,
        with_api_server(values, TEST_API_SERVER),
        {SECRET_LOOKUP: _live_secret(not_after)},
        upgrade=True,
    )
    secret = _one(objects, "Secret", name="predictive-headroom-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(
        days=360
    )


def test_cert_manager_issues_the_certificate_when_asked():
    values = {
        "serviceMonitor": {"enabled": True},
        "tls": {
            "certManager": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}
        },
    }
    objects = _valid(render_chart(values))
    certificate = _one(objects, "Certificate")
    assert certificate["spec"]["secretName"] == "predictive-headroom-tls"
    assert SERVER_NAME in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {
        "name": "ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    assert not [
        o for o in objects if o["kind"] == "Secret" and o["type"] == "kubernetes.io/tls"
    ]  # cert-manager writes it
    assert _tls_config(objects)["ca"] == {
        "secret": {"name": "predictive-headroom-tls", "key": "ca.crt"}
    }
    assert _env(objects)["PH_TLS_CERT_FILE"].endswith("/tls.crt")
    with pytest.raises(helm.HelmError, match=r"tls\.certManager\.issuerRef\.name is required"):
        render_chart({"tls": {"certManager": {"enabled": True}}})


def test_insecure_skip_verify_only_when_asked_and_notes_warn(tmp_path):
    values = {"serviceMonitor": {"enabled": True, "insecureSkipVerify": True}}
    assert _tls_config(render_chart(values)) == {"insecureSkipVerify": True}
    _, notes = _render_with_lookups(tmp_path, with_api_server(values, TEST_API_SERVER), {})
    assert "WARNING: serviceMonitor.insecureSkipVerify is true" in notes
    _, quiet = _render_with_lookups(
        tmp_path, with_api_server({"serviceMonitor": {"enabled": True}}, TEST_API_SERVER), {}
    )
    assert "insecureSkipVerify" not in quiet


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"tls": {"generate": False}},
            "tls.generate false the daemon's certificate is self-signed",
        ),
        ({"httpAuth": {"tlsSecret": "mine"}}, 'your certificate (httpAuth.tlsSecret "mine")'),
    ],
)
def test_a_certificate_the_monitor_cannot_verify_needs_an_explicit_choice(values, message):
    with pytest.raises(helm.HelmError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render_chart({"serviceMonitor": {"enabled": True}, **values})
    verified = {"ca": {"secret": {"name": "mine", "key": "ca.crt"}}, "serverName": "ph.example"}
    objects = render_chart({"serviceMonitor": {"enabled": True, "tlsConfig": verified}, **values})
    assert _tls_config(objects) == verified


def test_with_tls_generate_off_the_daemon_self_signs_and_nothing_is_mounted():
    objects = render_chart({"tls": {"generate": False}})
    assert "PH_TLS_CERT_FILE" not in _env(objects)
    assert not [o for o in objects if o["kind"] == "Secret"]


# --- egress to the API server --------------------------------------------------------------------


def _api_rule(objects: list[Object]) -> dict[str, Any]:
    return _one(objects, "NetworkPolicy")["spec"]["egress"][0]


def test_egress_goes_to_the_api_servers_looked_up_addresses_and_ports(tmp_path):
    slice_ = (
        'dict "endpoints" (list (dict "addresses" (list "172.18.0.2")) (dict "addresses" '
        '(list "172.18.0.3" "fd00::1"))) "ports" (list (dict "name" "https" "port" 6443))'
    )
    objects, _ = _render_with_lookups(tmp_path, {}, {SLICE_LOOKUP: slice_})
    assert _api_rule(objects) == {
        "ports": [{"port": 6443, "protocol": "TCP"}],
        "to": [
            {"ipBlock": {"cidr": "172.18.0.2/32"}},
            {"ipBlock": {"cidr": "172.18.0.3/32"}},
            {"ipBlock": {"cidr": "fd00::1/128"}},
        ],
    }


def test_egress_falls_back_to_the_kubernetes_endpoints(tmp_path):
    endpoints = (
        'dict "subsets" (list (dict "addresses" (list (dict "ip" "10.0.0.9")) "ports" '
        '(list (dict "port" 443))))'
    )
    objects, _ = _render_with_lookups(
        tmp_path, {}, {SLICE_LOOKUP: "dict", ENDPOINTS_LOOKUP: endpoints}
    )
    assert _api_rule(objects) == {
        "ports": [{"port": 443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "10.0.0.9/32"}}],
    }


def test_open_egress_by_choice_is_said_in_the_notes(tmp_path):
    _, notes = _render_with_lookups(
        tmp_path, {"networkPolicy": {"apiServer": {"allowAny": True}}}, {}
    )
    assert "networkPolicy.apiServer.allowAny is true: the daemon may reach any address" in notes
    _, narrowed = _render_with_lookups(tmp_path, with_api_server({}, TEST_API_SERVER), {})
    assert "allowAny" not in narrowed


def test_a_render_that_cannot_look_up_refuses_open_egress_unless_told():
    with pytest.raises(helm.HelmError, match="the API server's addresses are not known") as err:
        render_chart({}, api_server=None)
    assert "networkPolicy.apiServer.cidrs" in str(err.value)
    assert "networkPolicy.apiServer.allowAny: true" in str(err.value)
    opened = render_chart({"networkPolicy": {"apiServer": {"allowAny": True}}}, api_server=None)
    assert "to" not in _api_rule(opened)  # any address, because the values say so
    assert {p["port"] for p in _api_rule(opened)["ports"]} == {443, 6443}
    named = render_chart({"networkPolicy": {"apiServer": {"cidrs": ["172.18.0.2/32"]}}})
    assert _api_rule(named)["to"] == [{"ipBlock": {"cidr": "172.18.0.2/32"}}]
    assert not [o for o in render_chart({"networkPolicy": {"enabled": False}}, api_server=None)
                if o["kind"] == "NetworkPolicy"]  # fmt: skip


# --- images by digest ----------------------------------------------------------------------------


def _images(objects: list[Object]) -> dict[str, str]:
    return {
        o["metadata"]["labels"].get("app.kubernetes.io/component"): o["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        for o in objects
        if o["kind"] == "Deployment"
    }


@pytest.mark.parametrize(
    ("values", "daemon", "pause"),
    [
        (
            {},
            "ghcr.io/predictive-headroom/predictive-headroom:0.1.0",
            f"registry.k8s.io/pause:3.10@{PAUSE_DIGEST}",
        ),
        (
            {"image": {"digest": DIGEST}, "placeholder": {"image": {"digest": DIGEST}}},
            f"ghcr.io/predictive-headroom/predictive-headroom@{DIGEST}",
            f"registry.k8s.io/pause:3.10@{DIGEST}",
        ),
        (
            {"image": {"tag": "0.1.0", "digest": DIGEST}},
            f"ghcr.io/predictive-headroom/predictive-headroom:0.1.0@{DIGEST}",
            f"registry.k8s.io/pause:3.10@{PAUSE_DIGEST}",
        ),
        (
            {"placeholder": {"image": {"digest": ""}}},
            "ghcr.io/predictive-headroom/predictive-headroom:0.1.0",
            "registry.k8s.io/pause:3.10",
        ),
    ],
)
def test_images_are_pinned_by_digest_when_given(values, daemon, pause):
    assert _images(render_chart(values)) == {"daemon": daemon, "placeholder": pause}


def test_a_digest_that_is_not_sha256_is_refused():
    with pytest.raises(helm.HelmError, match="/image/digest"):
        render_chart({"image": {"digest": "latest"}})


# --- Prometheus's CA ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["secret", "configMap"])
def test_prometheus_ca_is_mounted_from_a_secret_or_configmap(kind):
    objects = _valid(
        render_chart(
            {
                "prometheus": {
                    "url": "https://prom.example",
                    "tls": {"ca": {kind: {"name": "prom-ca"}}},
                }
            }
        )
    )
    env = _env(objects)
    assert env["PH_PROMETHEUS_CA_FILE"] == "/etc/predictive-headroom-prometheus-ca/ca.crt"
    assert "PH_PROMETHEUS_VERIFY_TLS" not in env  # verified by default
    (volume,) = [v for v in _daemon(objects)["volumes"] if v["name"] == "prometheus-ca"]
    source = volume[kind]
    assert source.get("secretName", source.get("name")) == "prom-ca"
    assert source["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    (mount,) = [
        m for m in _daemon(objects)["containers"][0]["volumeMounts"] if m["name"] == "prometheus-ca"
    ]
    assert mount["mountPath"] == "/etc/predictive-headroom-prometheus-ca" and mount["readOnly"]


def test_prometheus_verification_off_only_when_asked():
    assert "PH_PROMETHEUS_CA_FILE" not in _env(render_chart())
    off = render_chart({"prometheus": {"tls": {"verify": False}}})
    assert _env(off)["PH_PROMETHEUS_VERIFY_TLS"] == "false"
    with pytest.raises(helm.HelmError, match="maxProperties"):
        render_chart(
            {"prometheus": {"tls": {"ca": {"secret": {"name": "a"}, "configMap": {"name": "b"}}}}}
        )


# --- credentials to Prometheus only over https, unless told --------------------------------------


def test_a_bearer_token_over_plain_http_is_refused_unless_insecure():
    token = {"enabled": True, "secretName": "prom-token"}
    with pytest.raises(helm.HelmError, match=r"prometheus.url: http://prometheus-operated.* plain"):
        render_chart({"prometheus": {"bearerToken": token}})
    with pytest.raises(helm.HelmError, match=r"prometheus\.insecure: true"):
        render_chart({"prometheus": {"url": "http://prom:9090", "bearerToken": token}})
    https = render_chart({"prometheus": {"url": "https://prom.example", "bearerToken": token}})
    assert "PH_PROMETHEUS_INSECURE" not in _env(https)
    told = render_chart({"prometheus": {"bearerToken": token, "insecure": True}})
    assert _env(told)["PH_PROMETHEUS_INSECURE"] == "true"  # the daemon is told too
    assert "PH_PROMETHEUS_INSECURE" not in _env(render_chart())  # no token: nothing to refuse


def test_the_notes_warn_about_each_weaker_choice(tmp_path):
    token = {"enabled": True, "secretName": "prom-token"}
    insecure = {"prometheus": {"bearerToken": token, "insecure": True}}
    wide = {"disruption": {"readPods": True, "readPodsClusterWide": True}}
    _, notes = _render_with_lookups(
        tmp_path, with_api_server({**insecure, **wide}, TEST_API_SERVER), {}
    )
    assert (
        "WARNING: prometheus.insecure is true: the daemon sends its Prometheus bearer token"
        in notes
    )
    assert "NOTE: disruption.readPodsClusterWide is true: the daemon may list every pod" in notes
    _, quiet = _render_with_lookups(tmp_path, with_api_server({}, TEST_API_SERVER), {})
    assert "prometheus.insecure" not in quiet and "readPodsClusterWide" not in quiet


# --- pods read in named namespaces only ---------------------------------------------------------


def test_pods_on_nodes_are_read_only_in_the_namespaces_named():
    objects = _valid(
        render_chart({"disruption": {"readPods": True, "readPodsNamespaces": ["web", "batch"]}})
    )
    roles = [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("-node-pods")
    ]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["batch", "web"]
    for role in roles:
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
        ]
    bindings = [
        o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"].endswith("-node-pods")
    ]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["batch", "web"]
    assert not [
        o for o in objects if o["kind"].startswith("Cluster") and "pods" in str(o.get("rules", ""))
    ]
    assert _env(objects)["PH_NODE_POD_NAMESPACES"] == "web,batch"
    with pytest.raises(
        helm.HelmError, match=r"with disruption\.readPods: true, list the namespaces"
    ):
        render_chart({"disruption": {"readPods": True}})  # never cluster-wide unless asked
    everywhere = render_chart({"disruption": {"readPods": True, "readPodsClusterWide": True}})
    assert [o["kind"] for o in everywhere if o["metadata"]["name"].endswith("-node-pods")] == [
        "ClusterRole",
        "ClusterRoleBinding",
    ]
    assert "PH_NODE_POD_NAMESPACES" not in _env(everywhere)
    with pytest.raises(helm.HelmError, match="readPodsNamespaces"):
        render_chart({"disruption": {"readPods": True, "readPodsNamespaces": ["kube-system"]}})


# --- kustomize: the verified overlay does what the chart does with cert-manager ------------------


def test_the_kustomize_verified_overlay_serves_and_verifies_as_the_chart_with_cert_manager():
    from deploy_render import render_kustomize

    overlay = _valid(render_kustomize("overlays/verified"))
    chart = render_chart(
        {
            "serviceMonitor": {"enabled": True},
            "tls": {
                "certManager": {"enabled": True, "issuerRef": {"name": "predictive-headroom-ca"}}
            },
        }
    )
    assert _tls_config(overlay) == _tls_config(chart)
    for name in ("PH_TLS_CERT_FILE", "PH_TLS_KEY_FILE"):
        assert _env(overlay)[name] == _env(chart)[name]
    (mount,) = [m for m in _daemon(overlay)["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    assert mount in _daemon(chart)["containers"][0]["volumeMounts"]
    (volume,) = [v for v in _daemon(overlay)["volumes"] if v["name"] == "tls"]
    assert volume in _daemon(chart)["volumes"]
    serving = _one(overlay, "Certificate", name="predictive-headroom-tls")
    assert serving["spec"]["dnsNames"] == _one(chart, "Certificate")["spec"]["dnsNames"]
    assert serving["spec"]["secretName"] == volume["secret"]["secretName"]
    ca_issuer = _one(overlay, "Issuer", name=serving["spec"]["issuerRef"]["name"])
    ca = _one(overlay, "Certificate", name="predictive-headroom-ca")
    assert ca["spec"]["isCA"] and ca_issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
