"""Karpenter with its kwok cloud provider as the e2e tier's autoscaler (issue 46).

`Karpenter(cluster).start()` applies Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay,
CapacityBuffer, KWOKNodeClass: the module's own files, copied beside the binaries by
`make e2e-bins`), runs the `karpenter` binary out of cluster with its own client certificate's
kubeconfig, and applies the cluster's KWOKNodeClass `e2e`, whose `nodeRegistrationDelay` is
`boot_delay`: Karpenter creates the Node object of a NodeClaim that long after launching it, and
kwok turns it Ready `cluster.node_ready_delay` later (a new node's boot is the sum, `boot`).

`pool(name, ...)` applies a NodePool: on-demand kwok nodes of the allowed instance types,
consolidated (`WhenEmptyOrUnderutilized`) after `consolidate_after` seconds, every node at once.
Its nodes carry the label and the NoSchedule taint `e2e.predictive-headroom.io/nodepool=<name>`,
so only pods placed with `placement(name)` (that nodeSelector and toleration) make Karpenter add
nodes to it and land there: each test module has its own pool, and pending pods of other tests do
not buy nodes. `delete_pool(name)` removes it and waits for its nodes to go.

Feature gates: `CapacityBuffer=true` (Karpenter consumes `autoscaling.x-k8s.io/v1beta1`
CapacityBuffers) and `StaticCapacity=true`. Its log is `logs/karpenter.log` in the cluster's
workdir; `stop()` first saves its metrics (`logs/karpenter-metrics.txt`). `restart()` stops and
starts the process alone: the NodeClaims and nodes it made stay and are adopted again.
"""

from __future__ import annotations

import os
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml
from cluster import KWOK_LABEL, KWOK_VALUE, Cluster, ClusterError, Proc, free_port
from kube import Kube, wait_for

NODECLASS = "e2e"
POOL_KEY = "e2e.predictive-headroom.io/nodepool"
FEATURE_GATES = "CapacityBuffer=true,StaticCapacity=true,NodeRepair=false,ReservedCapacity=true"
CRD_GROUPS = ("karpenter.sh", "karpenter.kwok.sh", "autoscaling.x-k8s.io")


class KarpenterError(ClusterError):
    """Karpenter was not built or did not start; the message ends with why (build or log tail)."""


def karpenter_missing(bins: Path) -> str | None:
    """Why Karpenter cannot run from `bins` (build.sh's failure message), None when it can."""
    failed = bins / "karpenter.failed"
    if failed.exists():
        return f"Karpenter did not build (make e2e-bins):\n{failed.read_text()[-4000:]}"
    if not os.access(bins / "karpenter", os.X_OK) or not (bins / "karpenter-crds").is_dir():
        return f"karpenter or karpenter-crds/ is not in {bins}: run `make e2e-bins`"
    return None


def placement(pool: str) -> dict[str, Any]:
    """The nodeSelector and tolerations that put a pod on the NodePool `pool`'s nodes."""
    return {
        "nodeSelector": {POOL_KEY: pool},
        "tolerations": [
            {"key": POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}
        ],
    }


def nodepool(
    name: str, instance_types: list[str], consolidate_after: float, cpu_limit: int = 400
) -> dict[str, Any]:
    """A NodePool of on-demand kwok nodes of `instance_types`, labelled and tainted for `name`,
    consolidated after `consolidate_after` s when empty or underutilized, every node at once."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {KWOK_LABEL: KWOK_VALUE, POOL_KEY: name}},
                "spec": {
                    "taints": [{"key": POOL_KEY, "value": name, "effect": "NoSchedule"}],
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": instance_types,
                        },
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                    ],
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": NODECLASS,
                    },
                    "expireAfter": "Never",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": f"{consolidate_after:g}s",
                "budgets": [{"nodes": "100%"}],
            },
            "limits": {"cpu": str(cpu_limit)},
        },
    }


def nodeclass(boot_delay: float) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODECLASS},
        "spec": {"nodeRegistrationDelay": f"{boot_delay:g}s"},
    }


def node_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


@dataclass
class Karpenter:
    """See the module docstring."""

    cluster: Cluster
    boot_delay: float = 15.0
    name: str = "karpenter"
    """The component's name: its log is logs/<name>.log."""
    bins_dir: Path | None = None
    """Where `karpenter` and `karpenter-crds/` are (default: the cluster's binaries)."""
    batch_idle: float = 1.0
    batch_max: float = 5.0
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def boot(self) -> float:
        """Seconds from a NodeClaim's launch to its node being Ready."""
        return self.boot_delay + self.cluster.node_ready_delay

    @property
    def bins(self) -> Path:
        return self.bins_dir or self.cluster.bins

    @property
    def proc(self) -> Proc:
        return self.cluster.procs[self.name]

    def start(self) -> Karpenter:
        missing = karpenter_missing(self.bins)
        if missing:
            raise KarpenterError(missing)
        kube = Kube(self.cluster.api())
        self._apply_crds(kube)
        self._write_kubeconfig()
        self._spawn()
        kube.apply(nodeclass(self.boot_delay))
        return self

    def _apply_crds(self, kube: Kube) -> None:
        ext = kubernetes.client.ApiextensionsV1Api(kube.api)
        crds = sorted((self.bins / "karpenter-crds").glob("*.yaml"))
        for path in crds:
            kube.apply(yaml.safe_load(path.read_text()))
        for path in crds:
            name = yaml.safe_load(path.read_text())["metadata"]["name"]
            wait_for(
                lambda name=name: any(
                    c.type == "Established" and c.status == "True"
                    for c in ext.read_custom_resource_definition(name).status.conditions or []
                ),
                60,
                f"CRD {name} to be established",
            )

    def _write_kubeconfig(self) -> None:
        from cluster import kubeconfig

        pki = self.cluster.pki
        config = kubeconfig(
            self.cluster.server,
            pki / "ca.crt",
            {
                "client-certificate": str(pki / "karpenter.crt"),
                "client-key": str(pki / "karpenter.key"),
            },
        )
        (self.cluster.workdir / "karpenter.kubeconfig").write_text(yaml.safe_dump(config))

    def _spawn(self) -> None:
        self.ports = {"metrics": free_port(), "health": free_port()}
        env = {
            "KUBECONFIG": str(self.cluster.workdir / "karpenter.kubeconfig"),
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(self.ports["metrics"]),
            "HEALTH_PROBE_PORT": str(self.ports["health"]),
            "FEATURE_GATES": FEATURE_GATES,
            "LOG_LEVEL": "debug",
            "BATCH_IDLE_DURATION": f"{self.batch_idle:g}s",
            "BATCH_MAX_DURATION": f"{self.batch_max:g}s",
            "KUBE_CLIENT_QPS": "200",
            "KUBE_CLIENT_BURST": "300",
            "CPU_REQUESTS": "1000",
        }
        proc = self.cluster.spawn(self.name, [str(self.bins / "karpenter")], env)
        try:
            self._wait(self._healthy, "its /readyz is ok")
        except ClusterError as exc:
            raise KarpenterError(str(exc)) from None
        del proc

    def _healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.ports['health']}/readyz"
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200

    def _wait(self, ready: Any, what: str) -> None:
        try:
            self.cluster.wait(self.proc, ready, what)
        except ClusterError as exc:
            raise KarpenterError(str(exc)) from None

    def pool(
        self, name: str, consolidate_after: float = 3600.0,
        instance_types: tuple[str, ...] = ("c-8x-amd64-linux",),
    ) -> None:  # fmt: skip
        """Apply the NodePool `name` (see `nodepool`) and wait until Karpenter calls it Ready."""
        kube = Kube(self.cluster.api())
        kube.apply(nodepool(name, list(instance_types), consolidate_after))
        self._wait(lambda: self._nodepool_ready(kube, name), f"its NodePool {name} is Ready")

    def delete_pool(self, name: str, timeout: float = 120.0) -> None:
        """Delete the NodePool `name`; Karpenter removes its nodes (waited for)."""
        custom = kubernetes.client.CustomObjectsApi(self.cluster.api())
        try:
            custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", name)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
        wait_for(
            lambda: not self.nodes(name, deleting=True), timeout, f"NodePool {name}'s nodes gone"
        )

    @staticmethod
    def _nodepool_ready(kube: Kube, name: str) -> bool:
        pool = kube.get({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                         "metadata": {"name": name}})  # fmt: skip
        conditions = ((pool or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def save_metrics(self) -> None:
        """Karpenter's /metrics into logs/karpenter-metrics.txt (kept with its log)."""
        if not self.ports or self.name not in self.cluster.procs or not self.proc.alive():
            return
        url = f"http://127.0.0.1:{self.ports['metrics']}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                (self.cluster.workdir / "logs" / "karpenter-metrics.txt").write_bytes(resp.read())
        except OSError:
            pass

    def stop(self) -> None:
        self.save_metrics()
        if self.name in self.cluster.procs:
            self.proc.stop()

    def restart(self, down: float = 0.0) -> None:
        """Stop Karpenter (SIGTERM), wait `down` s, start it again; its objects stay."""
        self.stop()
        time.sleep(down)
        self._spawn()

    def set_consolidate_after(self, name: str, seconds: float) -> None:
        custom = kubernetes.client.CustomObjectsApi(self.cluster.api())
        patch = {"spec": {"disruption": {"consolidateAfter": f"{seconds:g}s"}}}
        custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name, patch)

    # -- what it made -----------------------------------------------------------------------

    def nodeclaims(self, pool: str) -> list[dict[str, Any]]:
        custom = kubernetes.client.CustomObjectsApi(self.cluster.api())
        return custom.list_cluster_custom_object(
            "karpenter.sh", "v1", "nodeclaims", label_selector=f"karpenter.sh/nodepool={pool}"
        )["items"]

    def nodes(self, pool: str, deleting: bool = False) -> list[Any]:
        """The nodes of the NodePool `pool`; those being deleted only with `deleting`."""
        core = kubernetes.client.CoreV1Api(self.cluster.api())
        return [
            n for n in core.list_node(label_selector=f"karpenter.sh/nodepool={pool}").items
            if deleting or not n.metadata.deletion_timestamp
        ]  # fmt: skip

    def ready_nodes(self, pool: str) -> list[Any]:
        """The pool's nodes that are Ready and carry no taint but the pool's own (pods placed
        with `placement(pool)` can land there)."""
        return [
            n for n in self.nodes(pool)
            if node_ready(n) and all(t.key == POOL_KEY for t in n.spec.taints or [])
        ]  # fmt: skip

    def describe(self, pool: str) -> list[tuple[str, bool, list[str]]]:
        return [
            (n.metadata.name, node_ready(n), [t.key for t in n.spec.taints or []])
            for n in self.nodes(pool, deleting=True)
        ]
