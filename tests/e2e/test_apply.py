"""The chart and the kustomize manifests apply to a real API server (server-side apply, strict
field validation), and the daemon's API discovery finds the CapacityBuffer CRD once installed
(Karpenter's own CRD file, `autoscaling.x-k8s.io/v1beta1`, from its module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from daemonproc import DaemonProc, write_policy
from deploy_render import render_chart, render_kustomize
from karpenter import karpenter_missing
from kube import Kube, ensure_namespace, token_kubeconfig, wait_for

HERE = Path(__file__).resolve().parent
NS = "predictive-headroom"
GPU_VALUES = yaml.safe_load((HERE / "values-gpu.yaml").read_text())
CRD_ORDER = {"Namespace": 0, "CustomResourceDefinition": 0, "PriorityClass": 1}


def apply_all(kube: Kube, objects: list[dict[str, Any]]) -> list[str]:
    """Apply `objects` (namespaces and cluster-wide kinds first); their `kind/name`s."""
    done = []
    for obj in sorted(objects, key=lambda o: CRD_ORDER.get(o["kind"], 2)):
        meta = obj["metadata"]
        if meta.get("namespace"):
            ensure_namespace(kube.api, meta["namespace"])
        kube.apply(obj)
        done.append(f"{obj['kind']}/{meta['name']}")
    return done


def install_crd(kube: Kube, path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    kube.apply(crd)
    ext = kubernetes.client.ApiextensionsV1Api(kube.api)
    wait_for(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions
            or []
        ),
        60,
        f"CRD {crd['metadata']['name']} to be established",
    )
    kube.resource(
        crd["spec"]["group"] + "/" + crd["spec"]["versions"][0]["name"],
        crd["spec"]["names"]["kind"],
        refresh=True,
    )


@pytest.fixture(scope="module")
def kube(cluster) -> Iterator[Kube]:
    kube = Kube(cluster.api())
    install_crd(kube, HERE / "manifests" / "servicemonitor-crd.yaml")
    yield kube
    # The daemon Deployments applied here would take room on the nodes of later tests.
    apps = kubernetes.client.AppsV1Api(kube.api)
    for namespace in ("predictive-headroom", "buffers"):
        for deployment in apps.list_namespaced_deployment(namespace).items:
            apps.delete_namespaced_deployment(deployment.metadata.name, namespace)


RENDERINGS = {
    "helm-defaults": lambda: render_chart(),
    "helm-gpu": lambda: render_chart(GPU_VALUES),
    "helm-servicemonitor": lambda: render_chart({"serviceMonitor": {"enabled": True}}),
    "kustomize-base": lambda: render_kustomize("base"),
    "kustomize-example": lambda: render_kustomize("overlays/example"),
    "kustomize-adopt": lambda: render_kustomize("overlays/adopt"),
    "kustomize-podwait": lambda: render_kustomize("podwait"),
    "kustomize-nodepods": lambda: render_kustomize("nodepods"),
    "kustomize-capacitybuffer-namespaced": lambda: render_kustomize("capacitybuffer/namespaced"),
    "kustomize-capacitybuffer-cluster": lambda: render_kustomize("capacitybuffer/cluster"),
}


@pytest.mark.parametrize("rendering", list(RENDERINGS))
def test_the_manifests_apply_with_strict_field_validation(kube, rendering) -> None:
    objects = RENDERINGS[rendering]()
    applied = apply_all(kube, objects)
    assert len(applied) == len(objects)
    for obj in objects:
        assert kube.get(obj) is not None, f"{obj['kind']}/{obj['metadata']['name']} not stored"


def test_a_misspelt_field_is_refused_by_strict_validation(kube) -> None:
    obj = next(o for o in render_chart() if o["kind"] == "Deployment")
    bad = {**obj, "spec": {**obj["spec"], "replicaz": 2}}
    with pytest.raises(kubernetes.client.ApiException) as exc:
        kube.apply(bad)
    # kube-apiserver answers an undeclared field in a server-side apply of a built-in kind with
    # 500 "failed to create typed patch object ... field not declared in schema" (not 422).
    assert exc.value.status in (422, 500), (exc.value.status, exc.value.body)
    assert ".spec.replicaz: field not declared in schema" in str(exc.value.body), exc.value.body


def test_discovery_finds_the_capacity_buffer_crd_and_the_daemon_scales_a_buffer(
    cluster, kube, tmp_path
) -> None:
    api = cluster.api()
    missing = karpenter_missing(cluster.bins)
    if missing:
        pytest.fail(f"this test applies Karpenter's CapacityBuffer CRD: {missing}", pytrace=False)
    install_crd(kube, cluster.bins / "karpenter-crds" / "autoscaling.x-k8s.io_capacitybuffers.yaml")
    ensure_namespace(api, "workloads")
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "gpu-buffer", "namespace": "workloads"},
            "template": {
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            },
        }
    )
    kube.apply(
        {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {
                "name": "gpu-buffer",
                "namespace": "workloads",
                "labels": {"predictive-headroom.io/pool": "buffer"},
            },
            "spec": {"podTemplateRef": {"name": "gpu-buffer"}, "replicas": 0},
        }
    )
    values = {
        "allowedNamespaces": ["workloads"],
        "pools": [
            {
                "name": "buffer",
                "target": {
                    "kind": "CapacityBuffer",
                    "namespace": "workloads",
                    "name": "gpu-buffer",
                },
                "minReplicas": 2,
                "maxReplicas": 4,
            }
        ],
    }
    objects = render_chart(values, release="buffers", namespace="buffers")
    apply_all(kube, objects)
    config = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.yaml"]
    policy = write_policy(tmp_path / "policy.yaml", yaml.safe_load(config)["pools"])
    account = next(  # the daemon's, not the ServiceMonitor's scraper account
        o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objects
        if o["kind"] == "Deployment" and o["spec"]["template"]["spec"].get("serviceAccountName")
    )
    kubeconfig = token_kubeconfig(
        api, cluster.server, cluster.pki / "ca.crt", "buffers", account, tmp_path / "sa.kubeconfig"
    )
    daemon = DaemonProc("buffer", tmp_path, policy, kubeconfig, PH_NAMESPACE="buffers")
    code, log = daemon.run_once()
    assert code == 0, log
    assert "CapacityBuffer API autoscaling.x-k8s.io/v1beta1" in log, log
    buffer = kube.get(
        {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": "gpu-buffer", "namespace": "workloads"},
        }
    )
    assert buffer is not None and buffer["spec"]["replicas"] == 2, buffer
