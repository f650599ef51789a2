"""What the core knows about a cluster: the node and core counts a pool's proportional rule reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterState:
    """What the proportional rule needs to know about the nodes a pool counts."""

    nodes: int
    cores: float
    schedulable_nodes: int
    schedulable_cores: float
