"""Cluster-size rules with cluster-proportional-autoscaler's keys and edge rules (linear, ladder).

The arithmetic is in `core.proportional`; these models read and check the rules, so a CPA
ConfigMap pasted into a pool means what it means in CPA.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from predictive_headroom.policy.errors import FieldProblem
from predictive_headroom.policy.model import Count, PolicyModel


class Linear(PolicyModel):
    """CPA linear mode, with CPA's own edge rules (its code, not only its docs).

    replicas = max(ceil(cores/coresPerReplica), ceil(nodes/nodesPerReplica)), clamped to
    [min, max], then at least 2 with preventSinglePointFailure and more than one node. As in CPA:
    `min` omitted is 1, `max: 0` means no cap, a per-replica divisor of 0 means unset.
    """

    cores_per_replica: float | None = Field(default=None, ge=0)
    nodes_per_replica: float | None = Field(default=None, ge=0)
    min: Count = 1
    max: Count | None = None
    prevent_single_point_failure: bool = False
    include_unschedulable_nodes: bool = False

    @field_validator("cores_per_replica", "nodes_per_replica", "max")
    @classmethod
    def _zero_is_unset(cls, value: float | None) -> float | None:
        return value or None

    @model_validator(mode="after")
    def _check(self) -> Linear:
        if self.cores_per_replica is None and self.nodes_per_replica is None:
            raise FieldProblem(
                "coresPerReplica",
                "set coresPerReplica or nodesPerReplica (or both) to a number above 0",
            )
        if self.max is not None and self.min > self.max:
            raise FieldProblem(
                "min", f"min {self.min} is greater than max {self.max} (max 0 means no cap)"
            )
        return self


Step = tuple[Annotated[float, Field(ge=0)], Count]


class Ladder(PolicyModel):
    """CPA ladder mode: the step with the largest threshold not above the value wins.

    Steps may be listed in any order (sorted on load, as CPA does); a threshold may appear once.
    """

    cores_to_replicas: list[Step] = Field(default_factory=list)
    nodes_to_replicas: list[Step] = Field(default_factory=list)
    include_unschedulable_nodes: bool = False

    @field_validator("cores_to_replicas", "nodes_to_replicas")
    @classmethod
    def _sorted(cls, steps: list[Step]) -> list[Step]:
        seen: dict[float, int] = {}
        for i, (threshold, replicas) in enumerate(steps):
            if threshold < 0 or replicas < 0:
                raise ValueError(f"step {i} [{threshold:g}, {replicas}] has a negative number")
            if threshold in seen:
                raise ValueError(
                    f"threshold {threshold:g} appears twice (steps {seen[threshold]} and {i}); "
                    "keep one step per threshold"
                )
            seen[threshold] = i
        return sorted(steps)

    @model_validator(mode="after")
    def _some(self) -> Ladder:
        if not self.cores_to_replicas and not self.nodes_to_replicas:
            raise FieldProblem(
                "coresToReplicas", "set coresToReplicas or nodesToReplicas (or both)"
            )
        return self


class Proportional(PolicyModel):
    """Cluster-size floor, as cluster-proportional-autoscaler computes it (one of linear / ladder)."""

    linear: Linear | None = None
    ladder: Ladder | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_mode(self) -> Proportional:
        if (self.linear is None) == (self.ladder is None):
            raise FieldProblem("linear", "set exactly one of 'linear' or 'ladder'")
        return self

    @property
    def include_unschedulable_nodes(self) -> bool:
        mode = self.linear or self.ladder
        return bool(mode and mode.include_unschedulable_nodes)

    @property
    def label_selector(self) -> str:
        """The node label selector in Kubernetes' `k=v,k2=v2` form ('' selects all nodes)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.node_selector.items()))
