"""The deploy artefacts: Helm chart, kustomize manifests, Dockerfile and Grafana dashboard.

The chart is rendered by Helm's own engine (helm-python-sdk), the kustomize manifests by
tests/deploy_kustomize.py (checked against `kubectl kustomize` when one is installed), and every
object is validated against the Kubernetes JSON schemas of kubernetes-validate.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from deploy_render import NAMESPACE, REPO, render_chart, render_kustomize

helm = pytest.importorskip(
    "helm_python", reason="needs helm-python-sdk (pip install helm-python-sdk)"
)
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="needs kubernetes-validate (pip install kubernetes-validate)"
)

Object = dict[str, Any]
SCHEMA_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
CA_EXPENDABLE_CUTOFF = -10  # Cluster Autoscaler's default --expendable-pods-priority-cutoff
PAUSE_IMAGE = re.compile(
    r"^(registry\.k8s\.io|mirror\.example\.com:5000)/pause:(\d+\.\d+)@sha256:[0-9a-f]{64}$"
)
"""A pause image pinned by tag and digest (the chart's default, and the kustomize base's)."""
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}  # not in the Kubernetes schemas

# A chart install using the options the defaults leave off: pools in two namespaces, a
# CapacityBuffer target, one-per-node placeholders, a Prometheus token, the ServiceMonitor.
MULTI_VALUES: dict[str, Any] = {
    "prometheus": {
        "url": "https://prom.example.com",
        "bearerToken": {"enabled": True, "create": True, "value": "s3cret"},
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "priorityClass": {"value": -5},
    "allowedNamespaces": ["workloads"],
    "pools": [
        {"name": "general", "maxReplicas": 10, "placeholder": {"cpu": "1", "memory": "1Gi"}},
        {
            "name": "spot",
            "target": {"namespace": "workloads"},
            "minReplicas": 1,
            "maxReplicas": 6,
            "forecast": {"query": "sum(rate(http_requests_total[5m]))", "demandPerReplica": 400},
            "placeholder": {
                "requests": {"cpu": "3500m", "memory": "14Gi"},
                "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/arch",
                                            "operator": "In",
                                            "values": ["amd64"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
                "spread": {"mode": "antiAffinity"},
            },
        },
        {
            "name": "buffer",
            "target": {"kind": "CapacityBuffer", "namespace": "workloads", "name": "gpu-buffer"},
            "maxReplicas": 4,
            "placeholder": {"cpu": "8", "memory": "32Gi"},
        },
    ],
}


# CapacityBuffer pools on a cluster whose capacitybuffers are cluster-scoped (Cluster
# Autoscaler 1.34.0-1.34.1's v1alpha1): one pool pinned, one left to discovery, two namespaces.
BUFFER_CLUSTER_VALUES: dict[str, Any] = {
    "capacityBuffer": {"scope": "Cluster"},
    "allowedNamespaces": ["workloads"],
    "pools": [
        {"name": "general", "maxReplicas": 5},
        {
            "name": "gpu",
            "target": {
                "kind": "CapacityBuffer",
                "namespace": "workloads",
                "name": "gpu-buffer",
                "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
            },
            "maxReplicas": 4,
            "placeholder": {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1}},
        },
        {
            "name": "batch",
            "target": {"kind": "CapacityBuffer", "name": "batch-buffer"},
            "maxReplicas": 3,
        },
    ],
}

# Placeholders as GPU and air-gapped users run them: extended resources, limits, labels,
# annotations, a pause mirror with pull secrets, free-form scheduling settings.
GPU_VALUES: dict[str, Any] = {
    "placeholder": {
        "image": {"registry": "mirror.example.com:5000"},
        "imagePullSecrets": [{"name": "mirror-pull"}],
    },
    "pools": [
        {
            "name": "gpu",
            "maxReplicas": 4,
            "proportional": {"ladder": {"nodesToReplicas": [[10, 2], [0, 1]]}},
            "placeholder": {
                "requests": {
                    "cpu": "7",
                    "memory": "28Gi",
                    "nvidia.com/gpu": 1,
                    "ephemeral-storage": "20Gi",
                },
                "limits": {"memory": "28Gi"},
                "labels": {"team": "ml"},
                "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"predictive-headroom.io/pool": "gpu"}},
                    }
                ],
                "imagePullSecrets": [{"name": "gpu-pull"}],
            },
        }
    ],
}
BUFFER_SCOPE = {"helm-buffers-cluster": "Cluster"}  # the others: Namespaced
CLOSED_LOOP_RULE = {
    "apiGroups": [""],
    "resources": ["events", "pods"],
    "verbs": ["list", "watch"],
}
"""The closed loop's read: placeholder pods and Preempted Events in a Deployment target's namespace
(listed once, then watched)."""
QUOTA_RULE = {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get", "list", "watch"]}
"""The quota cap's read: the ResourceQuotas of a Deployment target's namespace (read-only)."""
POD_WAIT_RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
"""The opt-in pod-wait read, in each watched namespace only (listed once, then watched)."""


KUSTOMIZE_BASE_VALUES: dict[str, Any] = {
    "tls": {"generate": False},
    "networkPolicy": {"apiServer": {"allowAny": True}},
}
"""What the kustomize base cannot do as the chart does: make a certificate (the daemon self-signs;
a ServiceMonitor needs one of yours) and look up the API server's addresses (any on 443/6443)."""


@pytest.fixture(scope="module")
def renderings() -> dict[str, list[Object]]:
    return {
        "helm-defaults": render_chart(),
        "helm-as-kustomize-base": render_chart(KUSTOMIZE_BASE_VALUES),
        "helm-multi": render_chart(MULTI_VALUES),
        "helm-buffers-cluster": render_chart(BUFFER_CLUSTER_VALUES),
        "helm-gpu": render_chart(GPU_VALUES),
        "kustomize-base": render_kustomize("base"),
        "kustomize-example": render_kustomize("overlays/example"),
    }


RENDERINGS = [
    "helm-defaults",
    "helm-multi",
    "helm-buffers-cluster",
    "helm-gpu",
    "kustomize-base",
    "kustomize-example",
]


READERS_ROLE = "-metrics-reader"
"""The ClusterRole for those who read the HTTP port (nonResourceURLs, bound to Prometheus, never to
the daemon): left out by `_of_kind`, checked in tests/test_deploy_http_auth.py."""


def _of_kind(objects: list[Object], kind: str) -> list[Object]:
    """The objects of `kind`; the readers' ClusterRole is not among the daemon's roles."""
    return [
        o for o in objects if o["kind"] == kind and not o["metadata"]["name"].endswith(READERS_ROLE)
    ]


def _placeholders(objects: list[Object]) -> list[Object]:
    return [
        o
        for o in _of_kind(objects, "Deployment")
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == "placeholder"
    ]


def _daemon(objects: list[Object]) -> Object:
    daemons = [
        o
        for o in _of_kind(objects, "Deployment")
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == "daemon"
    ]
    assert len(daemons) == 1, (
        f"expected one daemon Deployment, found {[d['metadata']['name'] for d in daemons]}"
    )
    return daemons[0]


def _policy(objects: list[Object]) -> Object:
    daemon = _daemon(objects)
    volume = next(v for v in daemon["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    cm = next(
        c
        for c in _of_kind(objects, "ConfigMap")
        if c["metadata"]["name"] == volume["configMap"]["name"]
    )
    return cm


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_object_validates_against_the_kubernetes_schema(renderings, rendering, version):
    objects = renderings[rendering]
    assert objects
    checked = 0
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(
                f"{rendering}: {obj['kind']}/{obj['metadata']['name']} at {where}: {exc.message}"
            )
        checked += 1
    assert checked >= 11


def test_the_chart_passes_helm_lint():
    result = helm.lint(
        str(REPO / "deploy/helm/predictive-headroom"), strict=True, kube_version="1.30.0"
    )
    errors = [m for m in result["messages"] if m["severity"] > 1] + list(result["errors"])
    assert not errors, errors


# --- least privilege -------------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_rbac_has_no_wildcards_and_names_every_writable_object(renderings, rendering):
    objects = renderings[rendering]
    roles = _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert not any("*" in item for item in rule.get(key, [])), (
                    f"{role['metadata']['name']}: wildcard in {key}"
                )
            assert "nonResourceURLs" not in rule
            # Only create (which cannot be limited by name), read-only node access and the closed
            # loop's list of pods and events in a target namespace (list only) go unnamed.
            if not rule.get("resourceNames"):
                assert (
                    (set(rule["verbs"]) <= {"create", "patch"} and rule["resources"] == ["events"])
                    or (rule["verbs"] == ["create"] and rule["resources"] == ["leases"])
                    or (role["kind"] == "ClusterRole" and rule["resources"] == ["nodes"])
                    or (
                        role["metadata"]["name"].endswith("-auth")
                        and rule["verbs"] == ["create"]
                        and rule["resources"] in (["tokenreviews"], ["subjectaccessreviews"])
                    )
                    or (
                        role["kind"] == "Role"
                        and role["metadata"]["name"].endswith("-targets")
                        and rule in (CLOSED_LOOP_RULE, QUOTA_RULE, POD_WAIT_RULE)
                    )
                    or (role["metadata"]["name"].endswith("-pod-wait") and rule == POD_WAIT_RULE)
                    or (role["metadata"]["name"].endswith("-node-pods") and rule == POD_WAIT_RULE)
                ), f"{role['metadata']['name']}: unnamed rule {rule}"

    cluster_roles = {
        r["metadata"]["name"].rpartition("-")[2]: r for r in _of_kind(objects, "ClusterRole")
    }
    assert cluster_roles["nodes"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]
    # Cluster-wide write access exists only for cluster-scoped CapacityBuffers, by name.
    # ...and the access reviews of the HTTP port (create tokenreviews, subjectaccessreviews).
    assert set(cluster_roles) == (
        {"nodes", "auth", "capacitybuffers"}
        if BUFFER_SCOPE.get(rendering) == "Cluster"
        else {"nodes", "auth"}
    )


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_targets_role_allows_scaling_exactly_the_policy_targets(renderings, rendering):
    objects = renderings[rendering]
    policy = yaml.safe_load(_policy(objects)["data"]["config.yaml"])
    allowed: dict[tuple[str, str], set[str]] = {}
    for role in _of_kind(objects, "Role"):
        for rule in role["rules"]:
            for resource in rule["resources"]:
                allowed.setdefault((role["metadata"]["namespace"], resource), set()).update(
                    f"{verb}:{name}"
                    for verb in rule["verbs"]
                    for name in rule.get("resourceNames", ["<any>"])
                )
    for role in _of_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            if rule["resources"] == ["capacitybuffers"]:
                allowed.setdefault(("<cluster>", "capacitybuffers"), set()).update(
                    f"{verb}:{name}" for verb in rule["verbs"] for name in rule["resourceNames"]
                )
    cluster_buffers = BUFFER_SCOPE.get(rendering) == "Cluster"
    expected_scale: dict[str, set[str]] = {}
    for pool in policy["pools"]:
        target = pool["target"]
        ns, name = target["namespace"], target["name"]
        if target.get("kind", "Deployment") == "Deployment":
            expected_scale.setdefault(ns, set()).add(name)
            assert {f"get:{name}", f"patch:{name}", f"update:{name}"} <= allowed[
                (ns, "deployments/scale")
            ]
            # the Deployment itself: read (kill switch) and watched, by name only
            assert {f"get:{name}", f"list:{name}", f"watch:{name}"} <= allowed[(ns, "deployments")]
            assert not any(v.endswith(":<any>") for v in allowed[(ns, "deployments")])
        else:  # one rule per group and resource covers every version the daemon may discover
            where = "<cluster>" if cluster_buffers else ns
            assert {f"get:{name}", f"patch:{name}", f"update:{name}"} <= allowed[
                (where, "capacitybuffers")
            ]
        # Events go next to the target; those of a cluster-scoped object go to `default` (apiserver rule).
        events_ns = "default" if cluster_buffers and target.get("kind") == "CapacityBuffer" else ns
        assert {"create:<any>", "patch:<any>"} <= allowed[(events_ns, "events")]
    buffers = {
        p["target"]["name"] for p in policy["pools"] if p["target"].get("kind") == "CapacityBuffer"
    }
    for (ns, resource), grants in allowed.items():
        if resource == "capacitybuffers":
            assert (ns == "<cluster>") == cluster_buffers, (
                f"capacitybuffers granted in {ns} for scope {BUFFER_SCOPE.get(rendering)}"
            )
            assert {g.split(":")[1] for g in grants} <= buffers
    for (ns, resource), grants in allowed.items():
        if resource == "deployments/scale":
            assert {g.split(":")[1] for g in grants} == expected_scale[ns], (
                f"{ns}: scale granted beyond the policy's targets"
            )
        if resource == "deployments":
            assert grants == {
                f"{v}:{n}" for n in expected_scale[ns] for v in ("get", "list", "watch")
            }

    lease = _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    lease_name = next(e["value"] for e in lease if e["name"] == "PH_LEASE_NAME")
    assert allowed[(NAMESPACE, "leases")] == {
        f"get:{lease_name}",
        f"update:{lease_name}",
        "create:<any>",
    }


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_resourcequotas_are_read_in_the_deployment_target_namespaces_only(renderings, rendering):
    objects = renderings[rendering]
    policy = yaml.safe_load(_policy(objects)["data"]["config.yaml"])
    wanted = {
        p["target"]["namespace"]
        for p in policy["pools"]
        if p["target"].get("kind", "Deployment") == "Deployment" and p.get("quota") != "ignore"
    }
    granted = {
        r["metadata"]["namespace"]
        for r in _of_kind(objects, "Role")
        for rule in r["rules"]
        if "resourcequotas" in rule["resources"]
    }
    assert granted == wanted
    for role in _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            if "resourcequotas" in rule["resources"]:
                assert role["kind"] == "Role" and role["metadata"]["name"].endswith("-targets")
                assert rule == QUOTA_RULE  # read-only, and resourcequotas alone


def test_quota_ignore_everywhere_in_a_namespace_grants_no_resourcequotas_read():
    values = {
        "pools": [
            {"name": "general", "maxReplicas": 4, "quota": "ignore"},
            {"name": "gpu", "maxReplicas": 2, "target": {"kind": "CapacityBuffer"}},
        ]
    }
    objects = render_chart(values)
    rules = [rule for r in _of_kind(objects, "Role") for rule in r["rules"]]
    assert rules and not any("resourcequotas" in rule["resources"] for rule in rules)
    kept = render_chart({"pools": [{"name": "general", "maxReplicas": 4}]})
    assert any(rule == QUOTA_RULE for r in _of_kind(kept, "Role") for rule in r["rules"])


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_role_bindings_grant_the_roles_to_the_daemon_service_account_only(renderings, rendering):
    objects = renderings[rendering]
    sa = _daemon(objects)["spec"]["template"]["spec"]["serviceAccountName"]
    roles = {
        (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"])
        for r in _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole")
    }
    bound = set()
    for binding in _of_kind(objects, "RoleBinding") + _of_kind(objects, "ClusterRoleBinding"):
        if binding["metadata"]["name"].endswith("-scraper"):  # the ServiceMonitor's own account
            assert binding["roleRef"]["name"].endswith(READERS_ROLE)  # the readers' role only
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": f"{sa}-scraper", "namespace": NAMESPACE}
            ]
            continue
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}
        ]
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        assert (ref["kind"], ns, ref["name"]) in roles
        bound.add((ref["kind"], ns, ref["name"]))
    assert bound == roles, f"roles without a binding: {roles - bound}"


# --- pod security ----------------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_pod_runs_restricted(renderings, rendering):
    deployments = _of_kind(renderings[rendering], "Deployment")
    assert len(deployments) >= 2
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        name = deployment["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), (
            name
        )
        for volume in pod.get("volumes", []):
            assert set(volume) - {"name"} <= {"configMap", "secret", "emptyDir", "projected"}, (
                f"{name}: {volume}"
            )
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc.get("privileged", False) is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name


# --- placeholder pods ------------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_placeholder_deployments_are_preemptible_pause_pods(renderings, rendering):
    objects = renderings[rendering]
    (priority_class,) = _of_kind(objects, "PriorityClass")
    assert priority_class["globalDefault"] is False
    assert CA_EXPENDABLE_CUTOFF <= priority_class["value"] < 0
    placeholders = _placeholders(objects)
    policy = yaml.safe_load(_policy(objects)["data"]["config.yaml"])
    deployment_targets = {
        (p["target"]["namespace"], p["target"]["name"])
        for p in policy["pools"]
        if p["target"].get("kind", "Deployment") == "Deployment"
    }
    assert {
        (d["metadata"]["namespace"], d["metadata"]["name"]) for d in placeholders
    } == deployment_targets
    from predictive_headroom.policy.load import parse_policy

    pools = {p.target.name: p for p in parse_policy(_policy(objects)["data"]["config.yaml"]).pools}
    pods = {name: pool.placeholder for name, pool in pools.items()}
    for deployment in placeholders:
        name = deployment["metadata"]["name"]
        assert deployment["spec"].get("replicas") == pools[name].min_replicas, (
            f"{name}: a new placeholder must start at its pool's minReplicas (dry-run holds "
            "nothing more), not Kubernetes' default of 1"
        )
        pod = deployment["spec"]["template"]["spec"]
        assert pod["priorityClassName"] == priority_class["metadata"]["name"]
        assert pod["terminationGracePeriodSeconds"] == 0
        assert pod["automountServiceAccountToken"] is False
        (container,) = pod["containers"]
        assert PAUSE_IMAGE.match(container["image"]), (
            f"{name}: {container['image']} is not a pinned pause image"
        )
        resources = container["resources"]
        assert resources["requests"] == pods[name].requests
        assert resources.get("limits", {}) == pods[name].pod_limits()
        if rendering in ("helm-defaults", "kustomize-base"):
            # spread.mode none by default: under Karpenter a hostname spread buys a node per
            # placeholder (deploy/README.md#spread; measured in tests/e2e/test_spread.py)
            assert "topologySpreadConstraints" not in pod, name
            assert "podAntiAffinity" not in pod.get("affinity", {}), name
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_pool_options_reach_the_placeholder_pods(renderings):
    (spot,) = [
        d
        for d in _placeholders(renderings["helm-multi"])
        if d["metadata"]["labels"]["predictive-headroom.io/pool"] == "spot"
    ]
    pod = spot["spec"]["template"]["spec"]
    assert spot["metadata"]["namespace"] == "workloads"
    assert pod["nodeSelector"] == {"karpenter.sh/capacity-type": "spot"}
    assert pod["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "3500m", "memory": "14Gi"}
    assert "topologySpreadConstraints" not in pod
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"] == spot["spec"]["selector"]["matchLabels"]
    assert (
        pod["affinity"]["nodeAffinity"]
        == MULTI_VALUES["pools"][1]["placeholder"]["affinity"]["nodeAffinity"]
    )
    names = {
        (r["metadata"]["namespace"], r["metadata"]["name"])
        for r in _of_kind(renderings["helm-multi"], "Role")
    }
    assert names == {
        (NAMESPACE, "predictive-headroom-leader-election"),
        (NAMESPACE, "predictive-headroom-targets"),
        ("workloads", "predictive-headroom-targets"),
    }


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_closed_loop_reads_pods_and_events_only_where_a_deployment_target_lives(
    renderings, rendering
):
    objects = renderings[rendering]
    policy = yaml.safe_load(_policy(objects)["data"]["config.yaml"])
    deployment_namespaces = {
        p["target"]["namespace"]
        for p in policy["pools"]
        if p["target"].get("kind", "Deployment") == "Deployment"
    }
    reading = {
        role["metadata"]["namespace"]
        for role in _of_kind(objects, "Role")
        if CLOSED_LOOP_RULE in role["rules"]
    }
    assert reading == deployment_namespaces
    for role in _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            if "pods" in rule["resources"]:
                assert rule == CLOSED_LOOP_RULE  # never get or any write on pods
    env = {
        e["name"]: e.get("value")
        for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_OBSERVE_PLACEHOLDERS"] == "true"


def test_the_closed_loop_opt_out_drops_the_read_and_tells_the_daemon():
    # the quota cap (on by default) lists the placeholder pods too: with it on, the opt-out keeps
    # only that read (pods, list and watch, in the -targets Role); with quota: ignore, none
    quota_on = render_chart({**MULTI_VALUES, "closedLoop": {"observePlaceholders": False}})
    for role in _of_kind(quota_on, "Role"):
        pods = [rule for rule in role["rules"] if "pods" in rule["resources"]]
        assert pods in ([], [POD_WAIT_RULE]) and (
            not pods or role["metadata"]["name"].endswith("-targets")
        )
    pools = [{**p, "quota": "ignore"} for p in MULTI_VALUES["pools"]]
    objects = render_chart(
        {**MULTI_VALUES, "pools": pools, "closedLoop": {"observePlaceholders": False}}
    )
    for role in _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole"):
        assert all("pods" not in rule["resources"] for rule in role["rules"]), role
        assert all(
            "list" not in rule["verbs"]
            or rule["resources"] in (["nodes"], ["deployments"], ["capacitybuffers"])
            for rule in role["rules"]
        )
    env = {
        e["name"]: e.get("value")
        for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_OBSERVE_PLACEHOLDERS"] == "false"


def test_pod_wait_is_off_by_default_and_reads_only_the_namespaces_named(renderings):
    for objects in renderings.values():
        assert not [
            r for r in _of_kind(objects, "Role") if r["metadata"]["name"].endswith("-pod-wait")
        ]
    objects = render_chart({**MULTI_VALUES, "closedLoop": {"podWaitNamespaces": ["shop", "api"]}})
    roles = {
        r["metadata"]["namespace"]: r
        for r in _of_kind(objects, "Role")
        if r["metadata"]["name"].endswith("-pod-wait")
    }
    assert set(roles) == {"shop", "api"}
    assert all(r["rules"] == [POD_WAIT_RULE] for r in roles.values())
    bindings = {
        b["metadata"]["namespace"]: b
        for b in _of_kind(objects, "RoleBinding")
        if b["metadata"]["name"].endswith("-pod-wait")
    }
    assert set(bindings) == {"shop", "api"}
    for binding in bindings.values():
        assert binding["roleRef"]["name"] == roles["shop"]["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "predictive-headroom", "namespace": NAMESPACE}
        ]
    env = {
        e["name"]: e.get("value")
        for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_POD_WAIT_NAMESPACES"] == "shop,api"

    kustomized = render_kustomize("podwait")
    (role,) = _of_kind(kustomized, "Role")
    assert role["rules"] == [POD_WAIT_RULE]
    (binding,) = _of_kind(kustomized, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]


def _pod_readers(objects: list[Object]) -> dict[str, list[dict]]:
    """Every role granting anything on pods, by kind/namespace/name, with those rules."""
    found = {}
    for role in _of_kind(objects, "Role") + _of_kind(objects, "ClusterRole"):
        rules = [r for r in role["rules"] if "pods" in r["resources"]]
        if rules:
            meta = role["metadata"]
            found[f"{role['kind']}/{meta.get('namespace', '')}/{meta['name']}"] = rules
    return found


@pytest.mark.slow
def test_reading_pods_on_leaving_nodes_is_opt_in_list_only_and_in_named_namespaces(renderings):
    # Off (the default): no pods are readable cluster-wide, only the closed loop's namespaced list.
    for name, objects in renderings.items():
        assert all(k.startswith("Role/") for k in _pod_readers(objects)), name
        env = {
            e["name"] for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert "PH_DISRUPTION_READ_PODS" not in env
    # On: a Role in each namespace named, list on pods and nothing else, bound to the daemon only;
    # nothing cluster-wide.
    on = {"readPods": True, "readPodsNamespaces": ["web", "batch"]}
    objects = render_chart({**MULTI_VALUES, "disruption": on})
    plain = render_chart(MULTI_VALUES)
    added = {k: v for k, v in _pod_readers(objects).items() if k not in _pod_readers(plain)}
    assert added == {
        f"Role/{ns}/predictive-headroom-node-pods": [POD_WAIT_RULE] for ns in ("web", "batch")
    }
    for binding in _of_kind(objects, "RoleBinding"):
        if binding["metadata"]["name"].endswith("-node-pods"):
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": "predictive-headroom", "namespace": NAMESPACE}
            ]
    env = {
        e["name"]: e.get("value")
        for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_DISRUPTION_READ_PODS"] == "true" and env["PH_NODE_POD_NAMESPACES"] == "web,batch"
    # Every namespace only when asked in so many words: one ClusterRole, list on pods only.
    wide = render_chart(
        {**MULTI_VALUES, "disruption": {"readPods": True, "readPodsClusterWide": True}}
    )
    cluster = {k: v for k, v in _pod_readers(wide).items() if k.startswith("ClusterRole/")}
    assert list(cluster.values()) == [[POD_WAIT_RULE]]

    # kustomize: the nodepods component is a Role in one namespace (one copy per namespace).
    kustomized = render_kustomize("nodepods")
    assert not _of_kind(kustomized, "ClusterRole")
    (role,) = _of_kind(kustomized, "Role")
    assert role["rules"] == [POD_WAIT_RULE] and role["metadata"]["namespace"] == "apps"
    (binding,) = _of_kind(kustomized, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"][0]["name"] == "predictive-headroom"


# --- the daemon --------------------------------------------------------------------------------


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_daemon_deployment_matches_what_the_daemon_expects(renderings, rendering):
    objects = renderings[rendering]
    daemon = _daemon(objects)
    assert daemon["spec"]["replicas"] == 2
    pod = daemon["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["run", "--config", "/etc/predictive-headroom/config.yaml"]
    assert container["ports"] == [
        {"name": "https", "containerPort": 8443, "protocol": "TCP"},
        {"name": "probes", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert {"requests", "limits"} <= set(container["resources"])
    env = {e["name"]: e for e in container["env"]}
    assert env["PH_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["PH_PROMETHEUS_URL"]["value"].startswith(("http://", "https://"))
    assert env["TMPDIR"]["value"] == "/tmp"
    assert env["PH_LISTEN_PORT"]["value"] == "8443"
    assert env["PH_PROBE_PORT"]["value"] == "8081"
    assert env["PH_HTTP_AUTH"]["value"] == "true"
    assert env["PH_LOG_FORMAT"]["value"] == "json"
    assert env["PH_DRY_RUN"]["value"] in ("true", "false")
    assert env["PH_REPORT_DIR"]["value"].startswith("/tmp/")

    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    # The whole ConfigMap is mounted (no subPath) so in-place edits reach the daemon's live reload.
    config = mounts["/etc/predictive-headroom"]
    assert config["readOnly"] and "subPath" not in config
    cm_name = volumes[config["name"]]["configMap"]["name"]
    assert any(
        c["metadata"]["name"] == cm_name and c["metadata"]["namespace"] == NAMESPACE
        for c in _of_kind(objects, "ConfigMap")
    )
    secret = volumes[mounts["/var/run/secrets/predictive-headroom"]["name"]]["secret"]
    assert secret["items"] == [{"key": secret["items"][0]["key"], "path": "token"}]
    if "PH_PROMETHEUS_BEARER_TOKEN_FILE" in env:
        assert (
            env["PH_PROMETHEUS_BEARER_TOKEN_FILE"]["value"]
            == "/var/run/secrets/predictive-headroom/token"
        )

    pod_labels = daemon["spec"]["template"]["metadata"]["labels"]
    (service,) = _of_kind(objects, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        service["spec"]["ports"][0]["targetPort"] == "https"
        and service["spec"]["ports"][0]["name"] == "https"
        and service["spec"]["ports"][0]["port"] == 8443
    )
    (pdb,) = _of_kind(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["minAvailable"] == 1
    for placeholder in _placeholders(objects):
        labels = placeholder["spec"]["template"]["metadata"]["labels"]
        assert not pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(), (
            "the PDB must not protect placeholder pods"
        )
        assert not service["spec"]["selector"].items() <= labels.items()


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_configmap_holds_a_valid_policy(renderings, rendering):
    from predictive_headroom.policy.load import parse_policy

    policy = parse_policy(
        _policy(renderings[rendering])["data"]["config.yaml"], f"{rendering} config.yaml"
    )
    assert policy.pools


def test_bearer_token_secret_and_service_monitor_when_enabled(renderings):
    objects = renderings["helm-multi"]
    (secret,) = [s for s in _of_kind(objects, "Secret") if s["type"] == "Opaque"]
    env = {
        e["name"]: e.get("value")
        for e in _daemon(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_PROMETHEUS_BEARER_TOKEN_FILE"] == "/var/run/secrets/predictive-headroom/token"
    volume = next(
        v for v in _daemon(objects)["spec"]["template"]["spec"]["volumes"] if "secret" in v
    )
    assert volume["secret"]["secretName"] == secret["metadata"]["name"] and secret[
        "stringData"
    ] == {"token": "s3cret"}
    for name in ("helm-multi", "kustomize-example"):
        (monitor,) = _of_kind(renderings[name], "ServiceMonitor")
        (service,) = _of_kind(renderings[name], "Service")
        assert (
            monitor["spec"]["selector"]["matchLabels"].items()
            <= service["metadata"]["labels"].items()
        )
        assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
        assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert not _of_kind(renderings["helm-defaults"], "ServiceMonitor")
    # The only Secret of the defaults: the daemon's serving certificate (tests/test_deploy_tls.py).
    assert [s["type"] for s in _of_kind(renderings["helm-defaults"], "Secret")] == [
        "kubernetes.io/tls"
    ]


# --- Helm and kustomize agree --------------------------------------------------------------------

HELM_ONLY_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by"}


def _normalised(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
    """Objects keyed by kind/namespace/name, without Helm's bookkeeping labels and kustomize's name hashes."""
    generated = {}
    for cm in _of_kind(objects, "ConfigMap"):
        base = re.sub(r"-[a-z0-9]{10}$", "", cm["metadata"]["name"])
        if base.endswith("-config"):
            generated[cm["metadata"]["name"]] = base
    out = {}
    for obj in objects:
        obj = json.loads(json.dumps(obj))
        meta = obj["metadata"]
        meta["labels"] = {
            k: v for k, v in meta.get("labels", {}).items() if k not in HELM_ONLY_LABELS
        }
        meta["name"] = (
            generated.get(meta["name"], meta["name"])
            if obj["kind"] == "ConfigMap"
            else meta["name"]
        )
        if obj["kind"] == "ConfigMap":
            obj["data"] = {k: yaml.safe_load(v) for k, v in obj["data"].items()}
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            template["metadata"].get("annotations", {}).pop("checksum/config", None)
            if not template["metadata"].get("annotations"):
                template["metadata"].pop("annotations", None)
            for volume in template["spec"].get("volumes", []):
                if "configMap" in volume:
                    volume["configMap"]["name"] = generated.get(
                        volume["configMap"]["name"], volume["configMap"]["name"]
                    )
        out[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return out


def test_helm_with_the_kustomize_base_choices_and_the_base_render_the_same_objects(renderings):
    chart = _normalised(renderings["helm-as-kustomize-base"])
    base = _normalised(renderings["kustomize-base"])
    assert set(base) - set(chart) == {("Namespace", "", NAMESPACE)}, (
        "only kustomize creates the namespace"
    )
    assert set(chart) == set(base) - {("Namespace", "", NAMESPACE)}
    for key in sorted(chart):
        assert chart[key] == base[key], f"{key} differs between the chart and the kustomize base"


@pytest.mark.skipif(
    not shutil.which("kubectl") and not shutil.which("kustomize"),
    reason="no kubectl/kustomize binary to compare the loader with",
)
@pytest.mark.parametrize(
    "name", ["base", "overlays/example", "overlays/verified", "overlays/adopt"]
)
def test_kustomize_loader_renders_what_kustomize_renders(name):
    cmd = ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]
    out = subprocess.run(
        [*cmd, str(REPO / "deploy/kustomize" / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    def key(o: Object) -> tuple[str, str, str]:
        return o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]

    reference = sorted((d for d in yaml.safe_load_all(out.stdout) if d), key=key)
    assert sorted(render_kustomize(name), key=key) == reference


# --- bad values fail the render with a clear message ---------------------------------------------

BAD_VALUES = [
    ("pool without a name", {"pools": [{"maxReplicas": 3}]}, "/pools/0': missing property 'name'"),
    (
        "negative maxReplicas",
        {"pools": [{"name": "a", "maxReplicas": -1}]},
        "/pools/0/maxReplicas': minimum: got -1, want 0",
    ),
    (
        "negative minReplicas",
        {"pools": [{"name": "a", "minReplicas": -2, "maxReplicas": 3}]},
        "/pools/0/minReplicas': minimum: got -2",
    ),
    ("no maxReplicas", {"pools": [{"name": "a"}]}, "/pools/0': missing property 'maxReplicas'"),
    ("no pools", {"pools": []}, "/pools': minItems"),
    (
        "pool name not a DNS label",
        {"pools": [{"name": "Spot_Pool", "maxReplicas": 3}]},
        "/pools/0/name'",
    ),
    (
        "misspelt pool key",
        {"pools": [{"name": "a", "maxReplica": 3, "maxReplicas": 3}]},
        "additional properties 'maxReplica' not allowed",
    ),
    (
        "min above max",
        {"pools": [{"name": "a", "minReplicas": 5, "maxReplicas": 3}]},
        "pools[0] (a): minReplicas 5 is greater than maxReplicas 3",
    ),
    (
        "duplicate pool",
        {
            "pools": [
                {"name": "a", "maxReplicas": 3},
                {"name": "a", "maxReplicas": 3},
            ]
        },
        'pools[1].name: duplicate pool name "a"',
    ),
    (
        "priority not negative",
        {"priorityClass": {"value": 0}},
        "/priorityClass/value': maximum: got 0, want -1",
    ),
    (
        "priority below the CA cutoff",
        {"priorityClass": {"value": -20}},
        "priorityClass.value -20 is below Cluster Autoscaler's --expendable-pods-priority-cutoff -10",
    ),
    (
        "pause image not pinned",
        {"placeholder": {"image": {"repository": "registry.k8s.io/pause", "tag": "latest"}}},
        "/placeholder/image/tag'",
    ),
    (
        "token Secret without a value",
        {"prometheus": {"bearerToken": {"enabled": True, "create": True}}},
        "prometheus.bearerToken.value is required",
    ),
    ("bad spread mode", {"placeholder": {"spread": {"mode": "pack"}}}, "/placeholder/spread/mode'"),
    (
        "a pool key of the old chart",
        {"pools": [{"name": "a", "maxReplicas": 3, "resources": {"cpu": "1"}}]},
        "additional properties 'resources' not allowed",
    ),
    (
        "apiVersion on a Deployment pool",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "target": {"apiVersion": "autoscaling.x-k8s.io/v1beta1"},
                }
            ]
        },
        "pools[0] (a): target.apiVersion only pins a CapacityBuffer version",
    ),
    (
        "unsupported CapacityBuffer version",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "target": {"kind": "CapacityBuffer", "apiVersion": "autoscaling.x-k8s.io/v2"},
                }
            ]
        },
        "/pools/0/target/apiVersion'",
    ),
    (
        "unknown time zone",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "schedules": [
                        {
                            "name": "w",
                            "timezone": "Europe/Berln",
                            "start": "0 8 * * *",
                            "end": "0 9 * * *",
                            "desiredReplicas": 1,
                        }
                    ],
                }
            ]
        },
        "/pools/0/schedules/0/timezone'",
    ),
    (
        "cron with four fields",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "schedules": [
                        {"name": "w", "start": "0 8 * *", "end": "0 9 * * *", "desiredReplicas": 1}
                    ],
                }
            ]
        },
        "/pools/0/schedules/0/start'",
    ),
    (
        "a bare resource name",
        {"pools": [{"name": "a", "maxReplicas": 3, "placeholder": {"requests": {"gpu": 1}}}]},
        "at '/pools/0/placeholder/requests': additional properties 'gpu' not allowed",
    ),
    (
        "a negative ladder threshold",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "proportional": {"ladder": {"nodesToReplicas": [[-1, 1]]}},
                }
            ]
        },
        "/pools/0/proportional/ladder/nodesToReplicas/0/0'",
    ),
    (
        "burst quantile out of range",
        {
            "pools": [
                {
                    "name": "a",
                    "maxReplicas": 3,
                    "forecast": {"query": "up", "demandPerReplica": 1, "burstQuantile": 1.5},
                }
            ]
        },
        "/pools/0/forecast/burstQuantile'",
    ),
    (
        "bad CapacityBuffer scope",
        {"capacityBuffer": {"scope": "Namespace"}},
        "/capacityBuffer/scope'",
    ),
]


@pytest.mark.parametrize(("case", "values", "message"), BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_bad_values_fail_the_render_with_a_clear_message(case, values, message):
    with pytest.raises(helm.HelmError) as exc:
        render_chart(values)
    assert message in str(exc.value), f"{case}: {exc.value}"


def test_a_chart_with_capacity_buffer_pools_renders_a_policy_the_daemon_accepts(renderings):
    from predictive_headroom.policy.load import parse_policy

    for rendering, scope in (("helm-multi", "Namespaced"), ("helm-buffers-cluster", "Cluster")):
        objects = renderings[rendering]
        policy = parse_policy(_policy(objects)["data"]["config.yaml"], f"{rendering} config.yaml")
        buffers = [p for p in policy.pools if p.target.kind == "CapacityBuffer"]
        assert buffers, rendering
        # The chart creates no placeholder Deployment for a CapacityBuffer pool (you create the buffer).
        assert not {b.target.name for b in buffers} & {
            d["metadata"]["name"] for d in _placeholders(objects)
        }
        cluster_rules = [
            r
            for role in _of_kind(objects, "ClusterRole")
            for r in role["rules"]
            if r["resources"] == ["capacitybuffers"]
        ]
        assert bool(cluster_rules) == (scope == "Cluster")
    pinned = {
        p.name: p.target.api_version
        for p in parse_policy(
            _policy(renderings["helm-buffers-cluster"])["data"]["config.yaml"]
        ).pools
    }
    assert pinned == {"general": None, "gpu": "autoscaling.x-k8s.io/v1alpha1", "batch": None}


def test_raising_the_cutoff_allows_a_lower_priority():
    objects = render_chart({"priorityClass": {"value": -50, "expendablePodsPriorityCutoff": -100}})
    assert _of_kind(objects, "PriorityClass")[0]["value"] == -50


# --- Dockerfile ----------------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            instructions.append((word.upper(), rest.strip()))
    return instructions


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _dockerfile():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_dockerfile_is_multi_stage_on_an_exact_python_311_patch_release_with_a_digest_argument():
    args = {}
    for word, rest in _dockerfile():
        if word == "ARG" and "=" in rest:
            name, _, default = rest.partition("=")
            args[name] = default
        if word == "FROM":
            break
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", args["PYTHON_IMAGE"]), args
    assert args["PYTHON_DIGEST"] == "", "never a made-up digest: the release steps fill it"
    stages = _stages()
    assert len(stages) >= 2
    for stage in stages:
        assert stage[0][1].split()[0] == "${PYTHON_IMAGE}${PYTHON_DIGEST:+@}${PYTHON_DIGEST}"
    build, final = stages[0], stages[-1]
    assert any(w == "RUN" and "pip wheel" in r for w, r in build), (
        "the build stage must build the app as a wheel"
    )
    downloads = " && ".join(r for w, r in build if w == "RUN")
    assert _hash_checked(downloads, "requirements/runtime.txt")
    assert _hash_checked(downloads, "requirements/build.txt")
    (install,) = [r for w, r in final if w == "RUN" and "pip install" in r]
    assert "--no-index" in install and "from=build" in install
    assert _hash_checked(install, "/requirements/runtime.txt")
    assert _hash_checked(install, "/requirements/build.txt")
    final_text = " ".join(r for _, r in final)
    for tool in ("gcc", "build-essential", "make ", "g++", "apt-get install", "pip wheel"):
        assert tool not in final_text, f"build tool {tool!r} in the final stage"


def _hash_checked(commands: str, requirements: str) -> bool:
    """Whether every pip command of `commands` that reads `requirements` checks hashes."""
    reading = [c for c in commands.split("&&") if f"-r {requirements}" in c]
    return bool(reading) and all("--require-hashes" in c for c in reading)


def test_the_release_steps_fill_the_base_image_digest():
    steps = (REPO / "deploy/README.md").read_text()
    assert "--build-arg PYTHON_DIGEST=" in steps and "make sbom" in steps


def test_dockerfile_runtime_contract():
    final = _stages()[-1]
    user = [r for w, r in final if w == "USER"][-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or gid.isdigit()), (
        f"USER {user} must be a numeric non-root id"
    )
    chart_uid = yaml.safe_load((REPO / "deploy/helm/predictive-headroom/values.yaml").read_text())[
        "podSecurityContext"
    ]["runAsUser"]
    assert int(uid) == chart_uid
    assert json.loads([r for w, r in final if w == "ENTRYPOINT"][-1]) == ["predictive-headroom"]
    assert json.loads([r for w, r in final if w == "CMD"][-1]) == [
        "run",
        "--config",
        "/etc/predictive-headroom/config.yaml",
    ]
    env = " ".join(r for w, r in final if w == "ENV")
    assert "TMPDIR=/tmp" in env
    assert any(w == "EXPOSE" and r.split() == ["8443", "8081"] for w, r in final)


def test_image_versions_agree():
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(
        1
    )
    chart = yaml.safe_load((REPO / "deploy/helm/predictive-headroom/Chart.yaml").read_text())
    assert chart["appVersion"] == version, (
        "the chart's default image tag must be the package version"
    )
    daemon = _daemon(render_kustomize("base"))
    assert daemon["spec"]["template"]["spec"]["containers"][0]["image"].endswith(f":{version}")


def _dockerignored(path: str, patterns: list[str]) -> bool:
    import fnmatch

    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if (
            fnmatch.fnmatch(path, pattern)
            or fnmatch.fnmatch(path, pattern + "/*")
            or path.startswith(pattern + "/")
        ):
            ignored = not negate
    return ignored


def test_every_file_the_dockerfile_copies_exists_and_is_in_the_build_context():
    patterns = [
        p.strip()
        for p in (REPO / ".dockerignore").read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    sources = []
    for word, rest in _dockerfile():
        if word in ("COPY", "ADD") and "--from=" not in rest:
            parts = [p for p in rest.split() if not p.startswith("--")]
            sources.extend(parts[:-1])
    assert "pyproject.toml" in sources and any(s.startswith("predictive_headroom") for s in sources)
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"
        assert not _dockerignored(source.rstrip("/"), patterns), (
            f"COPY {source}: excluded by .dockerignore"
        )
    assert _dockerignored(".venv", patterns) and _dockerignored("tests/test_deploy.py", patterns)
    entry_point = re.search(
        r'predictive-headroom = "([\w.]+):(\w+)"', (REPO / "pyproject.toml").read_text()
    )
    assert entry_point, "pyproject.toml declares no predictive-headroom console script"
    assert (REPO / (entry_point.group(1).replace(".", "/") + ".py")).exists()


# --- Grafana dashboard ---------------------------------------------------------------------------

DASHBOARD = REPO / "deploy/grafana/predictive-headroom.json"


def _exprs(dashboard: Object) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_uses_only_metrics_the_daemon_exports():
    from predictive_headroom.daemon.metrics import Metrics

    exported = set()
    for family in Metrics().registry.collect():
        exported.add(family.name)
        if family.type == "counter":
            exported.add(family.name + "_total")
        if family.type == "histogram":
            exported.update(family.name + suffix for suffix in ("_bucket", "_count", "_sum"))
    dashboard = json.loads(DASHBOARD.read_text())
    used = {m for expr in _exprs(dashboard) for m in re.findall(r"predictive_headroom_\w+", expr)}
    assert used - exported == set()
    for needed in (
        "desired_replicas",
        "applied_replicas",
        "plan_reason_info",
        "forecast_demand",
        "observed_demand",
        "last_refit_timestamp_seconds",
        "last_reconcile_timestamp_seconds",
        "headroom_used_total",
        "node_ready_seconds_bucket",
        "lead_time_seconds",
        "nodes_leaving",
    ):
        assert f"predictive_headroom_{needed}" in used
    assert any('component="disruption"' in expr for expr in _exprs(dashboard))
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.skipif(
    not shutil.which("promtool"), reason="needs promtool (Debian package prometheus)"
)
def test_dashboard_queries_are_valid_promql(tmp_path):
    exprs = _exprs(json.loads(DASHBOARD.read_text()))
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {
                        "record": f"dashboard:query{i}",
                        "expr": e.replace("$__rate_interval", "5m").replace("$pool", "general"),
                    }
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- README --------------------------------------------------------------------------------------


def test_readme_installs_in_one_command_with_paths_that_exist():
    readme = (REPO / "deploy/README.md").read_text()
    assert (
        "helm install predictive-headroom deploy/helm/predictive-headroom -n predictive-headroom "
        "--create-namespace -f my-values.yaml"
    ) in readme
    assert "kubectl apply -k deploy/kustomize/overlays/example" in readme
    for path in re.findall(r"\bdeploy/[\w./-]+", readme):
        assert (REPO / path.rstrip(".")).exists(), f"README names {path}, which does not exist"


# --- kustomize RBAC for CapacityBuffer pools -----------------------------------------------------


@pytest.mark.parametrize("scope", ["namespaced", "cluster"])
def test_kustomize_capacity_buffer_rbac_names_the_buffer_and_binds_the_daemon(scope):
    objects = render_kustomize(f"capacitybuffer/{scope}")
    for obj in objects:
        kubernetes_validate.validate(obj, SCHEMA_VERSIONS[-1], strict=True)
    role_kind = "Role" if scope == "namespaced" else "ClusterRole"
    (role,) = _of_kind(objects, role_kind)
    (binding,) = _of_kind(objects, f"{role_kind}Binding")
    if scope == "cluster":  # Events about cluster-scoped objects live in `default`
        (events,) = _of_kind(objects, "Role")
        assert events["metadata"]["namespace"] == "default"
        assert events["rules"] == [
            {
                "apiGroups": ["", "events.k8s.io"],
                "resources": ["events"],
                "verbs": ["create", "patch"],
            }
        ]
        (events_binding,) = _of_kind(objects, "RoleBinding")
        assert events_binding["roleRef"]["name"] == events["metadata"]["name"]
    buffer_rule = next(r for r in role["rules"] if r["resources"] == ["capacitybuffers"])
    assert buffer_rule == {
        "apiGroups": ["autoscaling.x-k8s.io"],
        "resources": ["capacitybuffers"],
        "resourceNames": ["predictive-headroom-buffer"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    }
    assert ("namespace" in role["metadata"]) == (scope == "namespaced")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": role["metadata"]["name"],
    }
    sa = _daemon(render_kustomize("base"))["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
