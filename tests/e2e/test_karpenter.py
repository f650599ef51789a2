"""The daemon with Karpenter (kwok provider) as the cluster's autoscaler:

- a pool with `target.kind: CapacityBuffer`: the daemon writes the buffer's replicas, Karpenter
  provisions that capacity with no pod at all (its virtual pods), and lowering the replicas lets
  consolidation remove the nodes; the buffer's status conditions show on /last-run;
- Karpenter's consolidation taints a node `karpenter.sh/disrupted`: the disruption component
  holds room for its pods (reason `disruption`) while it is on its way out; the placeholders,
  annotated `karpenter.sh/do-not-disrupt`, do not keep the node;
- `size` reads Karpenter's kwok nodes and suggests requests that fit the NodePool's types.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from apps import app_deployment, create_app, running
from cluster import free_port
from daemonproc import REPO, DaemonProc, write_policy
from install import Installed, install, set_replicas
from karpenter import Karpenter, KarpenterError, karpenter_missing, placement
from kube import Kube, ensure_namespace, wait_for

POOL_LABEL = "predictive-headroom.io/pool"
BUFFER_NS = "kbuffer"


def last_run(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/last-run", timeout=5) as resp:
        return json.loads(resp.read())


def pool_entry(port: int, name: str) -> dict[str, Any] | None:
    try:
        reconcile = last_run(port).get("reconcile") or {}
    except OSError:
        return None
    return next((p for p in reconcile.get("pools", []) if p["name"] == name), None)


def conditions(entry: dict[str, Any] | None) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (entry or {}).get("target_conditions", [])}


POD_READS = ("PH_DISRUPTION_READ_PODS", "PH_NODE_POD_NAMESPACES")


def chart_daemon(
    cluster: Any, tmp: Path, values: dict[str, Any], release: str, **env: str
) -> tuple[DaemonProc, int, Installed]:
    """Install the chart with `values` as `release` (namespace of the same name) and start its
    daemon as a local process with the chart's ServiceAccount; (daemon, its HTTP port, release)."""
    installed = install(cluster, tmp, values, namespace=release, release=release)
    config = next(o for o in installed.objects if o["kind"] == "ConfigMap")
    policy = write_policy(
        tmp / "policy.yaml", yaml.safe_load(config["data"]["config.yaml"])["pools"]
    )
    port = free_port()
    # The chart's pod reads as it sets them (readPodsNamespaces: a Role in each namespace only).
    reads = {k: v for k, v in installed.env.items() if k in POD_READS and v}
    # /last-run is read over plain HTTP here: who may read the port is test_safe_adoption's.
    daemon = DaemonProc(
        release, tmp, policy, installed.kubeconfig, PH_NAMESPACE=release,
        PH_LISTEN_PORT=str(port), PH_LEASE_NAME=installed.lease,
        **{"PH_HTTP_AUTH": "off", **reads, **env},
    )  # fmt: skip
    return daemon.start(), port, installed


# -- CapacityBuffer consumed by Karpenter ----------------------------------------------------


@pytest.fixture(scope="module")
def buffer_pool(cluster, karpenter, tmp_path_factory):
    karpenter.pool("buffer", consolidate_after=5)
    api = cluster.api()
    kube = Kube(api)
    kube.resource("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer", refresh=True)
    ensure_namespace(api, BUFFER_NS)
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "warm", "namespace": BUFFER_NS},
            "template": {
                "spec": {
                    **placement("buffer"),
                    "containers": [
                        {
                            "name": "pause",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                }
            },
        }
    )
    kube.apply(
        {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": "warm", "namespace": BUFFER_NS, "labels": {POOL_LABEL: "warm"}},
            "spec": {"podTemplateRef": {"name": "warm"}, "replicas": 0},
        }
    )
    yield kube
    karpenter.delete_pool("buffer")


def buffer_values(min_replicas: int) -> dict[str, Any]:
    return {
        "allowedNamespaces": [BUFFER_NS],
        "pools": [
            {
                "name": "warm",
                "target": {"kind": "CapacityBuffer", "namespace": BUFFER_NS, "name": "warm"},
                "minReplicas": min_replicas,
                "maxReplicas": 20,
                "scaleDownStabilization": "0s",
            }
        ],
    }


def test_karpenter_provisions_the_buffer_the_daemon_sizes_and_consolidates_it_away(
    cluster, karpenter, buffer_pool, tmp_path
) -> None:
    api = cluster.api()
    daemon, port, _ = chart_daemon(cluster, tmp_path, buffer_values(7), "kbuf")
    try:
        buffer = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                  "metadata": {"name": "warm", "namespace": BUFFER_NS}}  # fmt: skip
        wait_for(
            lambda: (buffer_pool.get(buffer) or {}).get("spec", {}).get("replicas") == 7,
            60,
            f"the daemon to write 7 into the buffer: {daemon.text()[-2000:]}",
        )
        # Karpenter provisions the buffer's capacity: a node, and not one pod on it.
        nodes = wait_for(lambda: karpenter.ready_nodes("buffer"), karpenter.boot + 120, "a node")
        core = kubernetes.client.CoreV1Api(api)
        for node in nodes:
            on = core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node.metadata.name}"
            )
            assert on.items == [], [p.metadata.name for p in on.items]
        assert running(api, BUFFER_NS, "") == 0
        seen = wait_for(
            lambda: (c := conditions(pool_entry(port, "warm"))).get("Provisioning") and c,
            60,
            "the buffer's conditions on /last-run",
        )
        assert seen.get("ReadyForProvisioning") == "True", seen
        print(f"buffer conditions on /last-run: {pool_entry(port, 'warm')['target_conditions']}")
        # Read through a watch of that one buffer, which the chart's RBAC allows by its name.
        [cache] = [
            c
            for c in last_run(port).get("caches") or []
            if c["query"].startswith("capacitybuffers.v1beta1.autoscaling.x-k8s.io")
        ]
        assert cache["mode"] == "watching" and cache["objects"] == 1, cache
        # The buffer's node stays while the buffer asks for it (several consolidateAfter).
        time.sleep(15)
        assert len(karpenter.nodes("buffer")) == len(nodes), karpenter.describe("buffer")

        # Lower the buffer: consolidation removes the node it no longer needs.
        write_policy(Path(daemon.argv[-1]), buffer_values(0)["pools"])
        wait_for(
            lambda: (buffer_pool.get(buffer) or {}).get("spec", {}).get("replicas") == 0,
            60,
            "the daemon to lower the buffer to 0",
        )
        wait_for(lambda: not karpenter.nodes("buffer"), 120, "consolidation to remove the node")
    finally:
        daemon.stop()
    assert "Traceback" not in daemon.text(), daemon.text()


# -- the disruption component and Karpenter's consolidation ----------------------------------


def test_consolidation_taints_a_node_and_the_daemon_holds_room_for_its_pods(
    cluster, karpenter, tmp_path
) -> None:
    api = cluster.api()
    # Two instance types: pods packed on a 16-CPU node, then mostly gone, make Karpenter replace
    # it by an 8-CPU one; the 16-CPU node is tainted karpenter.sh/disrupted until the
    # replacement is up, and its pods move there.
    karpenter.pool("drain", consolidate_after=3600,
                   instance_types=("c-8x-amd64-linux", "c-16x-amd64-linux"))  # fmt: skip
    ns = "drain-apps"
    create_app(api, ns, placement=placement("drain"))
    set_replicas(api, ns, "app", 12)
    wait_for(lambda: running(api, ns, "app=e2e-app") == 12, karpenter.boot + 120, "12 app pods")
    (big,) = wait_for(lambda: karpenter.ready_nodes("drain"), 60, "the drain pool's node")
    assert big.metadata.labels["node.kubernetes.io/instance-type"] == "c-16x-amd64-linux", (
        karpenter.describe("drain")
    )

    values = {
        "disruption": {"readPods": True, "readPodsNamespaces": [ns]},
        "pools": [
            {
                "name": "drain",
                "minReplicas": 0,
                "maxReplicas": 20,
                "scaleDownStabilization": "5s",
                "placeholder": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                    "spread": {"mode": "none"},
                    **placement("drain"),
                },
            }
        ],
    }
    daemon, port, release = chart_daemon(cluster, tmp_path, values, "kdrain",
                                PH_DISRUPTION_READ_PODS="true")  # fmt: skip
    try:
        wait_for(lambda: pool_entry(port, "drain"), 60, "the daemon's first reconcile")
        set_replicas(api, ns, "app", 5)
        wait_for(lambda: running(api, ns, "app=e2e-app") == 5, 60, "5 app pods")
        karpenter.set_consolidate_after("drain", 5)
        entry = wait_for(
            lambda: (
                (e := pool_entry(port, "drain"))
                and e["details"].get("nodes_leaving", 0) > 0
                and e["reason"] == "disruption"
                and e
            ),
            120,
            f"the daemon to hold room for the disrupted node's pods: {karpenter.describe('drain')}",
        )
        tainted = [
            n for n, _, taints in karpenter.describe("drain") if "karpenter.sh/disrupted" in taints
        ]
        print(f"while {tainted} was disrupted the plan was {entry}")
        assert entry["desired_replicas"] >= 5, entry
        assert entry["details"]["disruption_source"] == "pods", entry
        # The disrupted node goes, though the pool's placeholders carry do-not-disrupt.
        wait_for(
            lambda: (
                big.metadata.name
                not in {n.metadata.name for n in karpenter.nodes("drain", deleting=True)}
            ),
            karpenter.boot + 120,
            f"the disrupted node to be gone: {karpenter.describe('drain')}",
        )
        wait_for(lambda: running(api, ns, "app=e2e-app") == 5, 60, "the app pods moved")
        # The room goes with the node: the placeholders come down again.
        wait_for(
            lambda: (e := pool_entry(port, "drain")) and e["desired_replicas"] == 0,
            60,
            "the daemon to lower the placeholders once the node is gone",
        )
        placeholders = "app.kubernetes.io/name=predictive-headroom-placeholder"
        wait_for(
            lambda: running(api, release.namespace, placeholders) == 0, 60, "placeholders gone"
        )
    finally:
        daemon.stop()
        set_replicas(api, ns, "app", 0)
        set_replicas(api, release.namespace, release.placeholder("drain"), 0)
        karpenter.delete_pool("drain")
    assert "Traceback" not in daemon.text(), daemon.text()


# -- size on Karpenter's nodes ---------------------------------------------------------------


def test_size_suggests_requests_that_fit_the_nodepool_instance_types(
    cluster, karpenter, tmp_path
) -> None:
    """`size` on the nodes Karpenter made for a NodePool of c-4x-amd64-linux: one placeholder of
    the suggested requests per node; pods of that size get nodes of that type, one each."""
    api = cluster.api()
    karpenter.pool("sized", instance_types=("c-4x-amd64-linux",))
    ns = "sized-apps"
    create_app(api, ns, placement=placement("sized"))
    kube = Kube(api)
    try:
        set_replicas(api, ns, "app", 2)
        wait_for(lambda: karpenter.ready_nodes("sized"), karpenter.boot + 120, "a sized node")
        out = subprocess.run(
            [sys.executable, "-m", "predictive_headroom", "size", "--output", "json",
             "--selector", "e2e.predictive-headroom.io/nodepool=sized"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
            env={"KUBECONFIG": str(cluster.admin_kubeconfig), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        (shape,) = json.loads(out.stdout)["shapes"]
        print(f"size on Karpenter's c-4x nodes: {shape}")
        assert shape["instance_type"] == "c-4x-amd64-linux", shape
        requests = shape["placeholder_requests"]
        # Pods of the suggested size: one per node, every one bound on a node of the pool's type.
        probe = app_deployment(ns, "probe", 3, placement("sized"))
        container = probe["spec"]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": requests}
        probe["spec"]["selector"] = {"matchLabels": {"app": "probe"}}
        probe["spec"]["template"]["metadata"]["labels"] = {"app": "probe"}
        kube.apply(probe)
        wait_for(
            lambda: running(api, ns, "app=probe") == 3,
            karpenter.boot + 120,
            f"3 placeholder-sized pods bound: {karpenter.describe('sized')}",
        )
        core = kubernetes.client.CoreV1Api(api)
        hosts = [
            p.spec.node_name for p in core.list_namespaced_pod(ns, label_selector="app=probe").items
        ]
        assert len(set(hosts)) == 3, hosts
        types = {
            n.metadata.labels["node.kubernetes.io/instance-type"] for n in karpenter.nodes("sized")
        }
        assert types == {"c-4x-amd64-linux"}, types
    finally:
        set_replicas(api, ns, "app", 0)
        kubernetes.client.AppsV1Api(api).delete_namespaced_deployment("probe", ns)
        karpenter.delete_pool("sized")


# -- a Karpenter that does not start ---------------------------------------------------------


def test_a_karpenter_that_does_not_start_fails_with_its_last_log_lines(cluster, tmp_path) -> None:
    bins = tmp_path / "bins"
    (bins / "karpenter-crds").mkdir(parents=True)
    for crd in (cluster.bins / "karpenter-crds").glob("*.yaml"):
        (bins / "karpenter-crds" / crd.name).write_text(crd.read_text())
    broken = bins / "karpenter"
    broken.write_text("#!/bin/sh\necho 'panic: no kubeconfig for you' >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(KarpenterError) as failed:
        Karpenter(cluster, name="karpenter-broken", bins_dir=bins).start()
    assert "karpenter-broken exited with code 3" in str(failed.value)
    assert "panic: no kubeconfig for you" in str(failed.value)
    # Not built: the message build.sh left says why.
    (bins / "karpenter.failed").write_text("go: sigs.k8s.io/karpenter@v9.9.9: 403 Forbidden\n")
    assert "403 Forbidden" in (karpenter_missing(bins) or "")
