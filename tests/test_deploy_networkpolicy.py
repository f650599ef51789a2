"""The chart's NetworkPolicy: on by default; the daemon pods take connections to their main port
only from the peers named, to the probes' port from no one but their own node (the kubelet) or
the peers `networkPolicy.probes.from` names, and reach only the API server, Prometheus and DNS.
Every rendering validates against the Kubernetes schemas (strict)."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_render import render_chart

helm = pytest.importorskip(
    "helm_python", reason="needs helm-python-sdk (pip install helm-python-sdk)"
)
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="needs kubernetes-validate (pip install kubernetes-validate)"
)

SCHEMA_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
CUSTOM: dict[str, Any] = {
    "prometheus": {"url": "https://thanos.example.com/prometheus"},
    "networkPolicy": {
        "enabled": True,
        "ingressFrom": [
            {
                "namespaceSelector": {"matchLabels": {"team": "sre"}},
                "podSelector": {"matchLabels": {"app": "grafana"}},
            }
        ],
        "apiServer": {"cidrs": ["172.18.0.2/32", "172.18.0.3/32"], "ports": [6443]},
        "prometheus": {"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}]},
        "dns": {"enabled": False},
        "probes": {"from": [{"ipBlock": {"cidr": "10.0.0.0/16"}}]},
        "extraEgress": [
            {
                "to": [{"ipBlock": {"cidr": "10.9.0.0/16"}}],
                "ports": [{"port": 3128, "protocol": "TCP"}],
            }
        ],
    },
}
RENDERINGS = {
    "off": {"networkPolicy": {"enabled": False}},
    "on": {},
    "custom": CUSTOM,
    "closed": {"networkPolicy": {"enabled": True, "ingressFrom": []}},
}


@pytest.fixture(scope="module")
def renderings() -> dict[str, list[dict[str, Any]]]:
    return {name: render_chart(values) for name, values in RENDERINGS.items()}


def _policies(objects):
    return [o for o in objects if o["kind"] == "NetworkPolicy"]


def _deployments(objects, component):
    return [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]


def _egress_ports(policy):
    return {
        (p["port"], p.get("protocol", "TCP"))
        for rule in policy["spec"]["egress"]
        for p in rule.get("ports", [])
    }


@pytest.mark.slow
@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("name", list(RENDERINGS))
def test_renders_and_validates_with_and_without_the_policy(renderings, name, version):
    objects = renderings[name]
    assert len(_policies(objects)) == (0 if name == "off" else 1)
    for obj in objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com"):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name}: {obj['kind']}/{obj['metadata']['name']}: {exc.message}")


def test_on_by_default_and_off_when_asked(renderings):
    assert len(_policies(renderings["on"])) == 1
    assert not _policies(renderings["off"])


def test_selects_the_daemon_pods_only(renderings):
    (policy,) = _policies(renderings["on"])
    selector = policy["spec"]["podSelector"]["matchLabels"].items()
    (daemon,) = _deployments(renderings["on"], "daemon")
    assert selector <= daemon["spec"]["template"]["metadata"]["labels"].items()
    for placeholder in _deployments(renderings["on"], "placeholder"):
        assert not selector <= placeholder["spec"]["template"]["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_ingress_reaches_the_main_port_only_from_the_named_peers(renderings):
    (policy,) = _policies(renderings["on"])
    (daemon,) = _deployments(renderings["on"], "daemon")
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [MONITORING]
    (port,) = rule["ports"]
    assert port["port"] == "https"
    assert port["port"] in {
        p["name"] for p in daemon["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    (custom,) = _policies(renderings["custom"])
    assert custom["spec"]["ingress"][1]["from"] == CUSTOM["networkPolicy"]["ingressFrom"]
    (closed,) = _policies(renderings["closed"])
    assert closed["spec"]["ingress"] == []  # nobody may connect, but the pods' own nodes


def test_the_probes_port_is_open_to_no_source_but_the_nodes_named(renderings):
    """No rule admits every source to the probes' port: by default none names it at all (the
    kubelet probes from the pod's own node, which a NetworkPolicy does not filter); with
    networkPolicy.probes.from, only those peers, on that port only."""
    for name in ("on", "closed", "custom"):
        (policy,) = _policies(renderings[name])
        for rule in policy["spec"]["ingress"]:
            assert rule.get("from"), f"{name}: a rule admits every source: {rule}"
    (policy,) = _policies(renderings["on"])
    assert not [
        r for r in policy["spec"]["ingress"] if {"port": "probes", "protocol": "TCP"} in r["ports"]
    ]
    (custom,) = _policies(renderings["custom"])
    assert custom["spec"]["ingress"][0] == {
        "from": [{"ipBlock": {"cidr": "10.0.0.0/16"}}],
        "ports": [{"port": "probes", "protocol": "TCP"}],
    }


def test_egress_to_api_server_prometheus_and_dns_by_default(renderings):
    (policy,) = _policies(renderings["on"])
    # prometheus.url defaults to http://prometheus-operated.monitoring.svc:9090
    assert _egress_ports(policy) == {
        (443, "TCP"),
        (6443, "TCP"),
        (9090, "TCP"),
        (53, "UDP"),
        (53, "TCP"),
    }
    prometheus = next(
        r for r in policy["spec"]["egress"] if {"port": 9090, "protocol": "TCP"} in r["ports"]
    )
    assert prometheus["to"] == [MONITORING]


def test_egress_follows_the_values(renderings):
    (policy,) = _policies(renderings["custom"])
    api, prometheus, extra = policy["spec"]["egress"]
    assert api == {
        "ports": [{"port": 6443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "172.18.0.2/32"}}, {"ipBlock": {"cidr": "172.18.0.3/32"}}],
    }
    assert prometheus == {
        "ports": [{"port": 443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
    }  # https
    assert extra == CUSTOM["networkPolicy"]["extraEgress"][0]
    assert (53, "UDP") not in _egress_ports(policy)


def test_prometheus_port_can_be_set():
    (policy,) = _policies(
        render_chart({"networkPolicy": {"enabled": True, "prometheus": {"port": 10902}}})
    )
    assert (10902, "TCP") in _egress_ports(policy) and (9090, "TCP") not in _egress_ports(policy)


@pytest.mark.parametrize(
    "values",
    [
        {"networkPolicy": {"enabled": "yes"}},
        {"networkPolicy": {"enabled": True, "prometheus": {"port": "web"}}},
        {"networkPolicy": {"enabled": True, "apiServer": {"ports": []}}},
    ],
)
def test_bad_values_are_refused_by_the_schema(values):
    with pytest.raises(helm.HelmError, match="networkPolicy"):
        render_chart(values)
