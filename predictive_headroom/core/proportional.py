"""Cluster-size floor with cluster-proportional-autoscaler's arithmetic (linear and ladder).

Pure functions of the node and core counts, like CPA's controllers.
"""

from __future__ import annotations

import math

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.policy.config import Ladder, Linear, Proportional, Step


def counted(rule: Proportional, cluster: ClusterState) -> tuple[int, float]:
    """The (nodes, cores) the rule looks at: schedulable ones unless includeUnschedulableNodes."""
    if rule.include_unschedulable_nodes:
        return cluster.nodes, cluster.cores
    return cluster.schedulable_nodes, cluster.schedulable_cores


def linear_replicas(params: Linear, nodes: int, cores: float) -> int:
    """CPA linear: max(ceil(cores/coresPerReplica), ceil(nodes/nodesPerReplica)) clamped to
    [min, max] (no cap when max is unset), then at least 2 with preventSinglePointFailure and
    more than one node: that rule applies after `max`, as in CPA's controller."""
    wanted = 0
    if params.cores_per_replica:
        wanted = max(wanted, math.ceil(cores / params.cores_per_replica))
    if params.nodes_per_replica:
        wanted = max(wanted, math.ceil(nodes / params.nodes_per_replica))
    if params.max is not None:
        wanted = min(wanted, params.max)
    wanted = max(wanted, params.min)
    if params.prevent_single_point_failure and nodes > 1:
        wanted = max(wanted, 2)
    return wanted


def ladder_step(steps: list[Step], value: float) -> int | None:
    """The replicas of the step with the largest threshold not above `value`.

    Below the first threshold the first step applies, as in CPA; an empty ladder gives None.
    """
    if not steps:
        return None
    chosen = steps[0][1]
    for threshold, replicas in steps:
        if value >= threshold:
            chosen = replicas
        else:
            break
    return chosen


def ladder_replicas(params: Ladder, nodes: int, cores: float) -> int:
    """CPA ladder: the larger of the cores ladder and the nodes ladder (a ladder may yield 0)."""
    results = [
        r
        for r in (
            ladder_step(params.cores_to_replicas, cores),
            ladder_step(params.nodes_to_replicas, nodes),
        )
        if r is not None
    ]
    return max(results)


def proportional_floor(rule: Proportional, cluster: ClusterState) -> int:
    """The replicas the cluster-size rule asks for."""
    nodes, cores = counted(rule, cluster)
    if rule.linear is not None:
        return linear_replicas(rule.linear, nodes, cores)
    assert rule.ladder is not None  # guaranteed by config validation
    return ladder_replicas(rule.ladder, nodes, cores)
