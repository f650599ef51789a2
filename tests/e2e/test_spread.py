"""The chart's default placeholder spread under Karpenter (issue 58 item 1): ten placeholders of a
tenth of a node each, the chart's default values but for the pool's placement, pending at once;
Karpenter (kwok provider, `c-8x-amd64-linux`: 7.9 allocatable CPU) launches what they need. With
the default (`spread.mode: none`) one node holds them; with hostname topology spread
(`ScheduleAnyway`, the chart's default before) Karpenter's default `--preference-policy Respect`
launches a node for each. The counts are printed for docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

from apps import running
from install import install, set_replicas
from karpenter import placement
from kube import wait_for

POOL = "spread"
PLACEHOLDERS = "app.kubernetes.io/name=predictive-headroom-placeholder"
COUNT = 10
TENTH = {"cpu": "700m", "memory": "1Gi"}
"""A tenth of a c-8x-amd64-linux node (8 CPU, 7.9 allocatable; 32Gi): ten fit on one."""


def nodes_for_ten(cluster, karpenter, workdir, spread: dict[str, Any] | None) -> tuple[int, Any]:
    """NodeClaims Karpenter launched for COUNT placeholders pending at once, with the chart's
    default values but the pool's placement (and `spread`, when given), and its nodes then."""
    karpenter.pool(POOL)
    placeholder = {"requests": TENTH, **placement(POOL), **({"spread": spread} if spread else {})}
    namespace = f"spread-{spread['mode'].lower() if spread else 'default'}"
    release = install(
        cluster,
        workdir,
        {"pools": [{"name": "general", "maxReplicas": COUNT, "placeholder": placeholder}]},
        namespace=namespace,
        release=namespace,
    )
    api = cluster.api()
    try:
        set_replicas(api, namespace, release.placeholder(), COUNT)
        wait_for(
            lambda: running(api, namespace, PLACEHOLDERS) == COUNT,
            karpenter.boot + 180,
            f"{COUNT} placeholders run",
        )
        return len(karpenter.nodeclaims(POOL)), karpenter.describe(POOL)
    finally:
        set_replicas(api, namespace, release.placeholder(), 0)
        karpenter.delete_pool(POOL, timeout=180)


def test_the_default_spread_puts_ten_tenth_node_placeholders_on_one_node(
    cluster, karpenter, tmp_path
) -> None:
    nodes, seen = nodes_for_ten(cluster, karpenter, tmp_path, None)
    print(f"default spread (none): {COUNT} placeholders of a tenth of a node, {nodes} node(s)")
    assert nodes == 1, seen


def test_hostname_topology_spread_buys_a_node_per_placeholder(cluster, karpenter, tmp_path) -> None:
    """Why it is not the default: the same ten with the old default spread."""
    spread = {
        "mode": "topologySpread",
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    nodes, seen = nodes_for_ten(cluster, karpenter, tmp_path, spread)
    print(f"topologySpread (ScheduleAnyway): {COUNT} placeholders, {nodes} node(s)")
    assert nodes >= COUNT // 2, seen
