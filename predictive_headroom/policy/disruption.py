"""A pool's `disruption:` section: which nodes count as on their way out, and the spot reserve.

A node is leaving when it is cordoned (`spec.unschedulable`) or carries one of `taints` (by key).
The default keys are the ones the usual autoscalers and termination handlers set, each checked
against its upstream source (deploy/README.md lists where each is set):

- Karpenter v1 `karpenter.sh/disrupted` (NoSchedule; pkg/apis/v1/taints.go), pre-v1 (v1beta1,
  v0.32-v0.37) `karpenter.sh/disruption` (value `disrupting`; pkg/apis/v1beta1/taints.go);
- Cluster Autoscaler `ToBeDeletedByClusterAutoscaler` (NoSchedule; utils/deletetaint). Its soft
  `DeletionCandidateOfClusterAutoscaler` (PreferNoSchedule) marks a node that may go, so it is not
  in the list;
- AWS Node Termination Handler `aws-node-termination-handler/spot-itn`, `.../scheduled-maintenance`,
  `.../asg-lifecycle-termination`, `.../rebalance-recommendation` (pkg/node/node.go).

Spot capacity is detected from the capacity-type labels of the pool's nodes (`SPOT_LABELS`) or set
with `spot: true`; its reserve needs an interruption rate, measured by the closed loop or given as
`interruptionRate` (e.g. `5%/day`: the share of nodes interrupted per day).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from predictive_headroom.policy.model import PolicyModel

DEFAULT_TAINTS = (
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
    "ToBeDeletedByClusterAutoscaler",
    "aws-node-termination-handler/spot-itn",
    "aws-node-termination-handler/scheduled-maintenance",
    "aws-node-termination-handler/asg-lifecycle-termination",
    "aws-node-termination-handler/rebalance-recommendation",
)
"""Taint keys that mark a node for removal (module docstring: who sets each)."""

SPOT_LABELS: tuple[tuple[str, str], ...] = (
    ("karpenter.sh/capacity-type", "spot"),
    ("eks.amazonaws.com/capacityType", "SPOT"),
    ("cloud.google.com/gke-spot", "true"),
    ("cloud.google.com/gke-preemptible", "true"),
    ("kubernetes.azure.com/scalesetpriority", "spot"),
)
"""Node labels (key, value) that say a node runs on spot (interruptible) capacity."""

TAINT_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_RATE = re.compile(r"^\s*(?P<n>\d+(\.\d+)?)\s*(?P<pct>%)?\s*/\s*(?P<unit>day|d|hour|h)\s*$")
RATE_PATTERN = r"^\s*\d+(\.\d+)?\s*%?\s*/\s*(day|d|hour|h)\s*$"


def parse_rate(text: str | float) -> float:
    """Interruptions per node-hour from `5%/day`, `0.05/day`, `0.2%/hour` (a number: per node-hour).
    Raises ValueError saying how to write it."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not an interruption rate; write it like 5%/day")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(str(text))
        if m is None:
            raise ValueError(
                f"{text!r} is not an interruption rate; write it like 5%/day (the share of nodes "
                "interrupted per day) or 0.2%/hour"
            )
        value = float(m["n"]) / (100.0 if m["pct"] else 1.0)
        value /= 24.0 if m["unit"] in ("day", "d") else 1.0
    if not math.isfinite(value) or value < 0 or value > 1:
        raise ValueError(f"interruption rate {text!r} must be between 0 and 100% per hour")
    return value


def is_spot(labels: dict[str, Any]) -> bool:
    """True when a node's labels say it runs on spot capacity (`SPOT_LABELS`)."""
    return any(str(labels.get(k, "")) == v for k, v in SPOT_LABELS)


class Disruption(PolicyModel):
    """Room for the pods of nodes on their way out, and a reserve for spot interruptions."""

    enabled: bool = True
    taints: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TAINTS),
        json_schema_extra={"items": {"type": "string", "pattern": TAINT_KEY.pattern}},
        description="taint keys that mark a node for removal (cordoned nodes always count)",
    )
    spot: Literal["auto"] | bool = "auto"
    """auto: spot when any node of the pool carries a spot capacity-type label (`SPOT_LABELS`)."""
    interruption_rate: float | None = Field(
        default=None,
        json_schema_extra={
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": 1},
                {"type": "string", "pattern": RATE_PATTERN},
                {"type": "null"},
            ]
        },
        description="spot interruptions per node, e.g. 5%/day; a floor under the measured rate",
    )

    @field_validator("taints")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        for key in value:
            if not TAINT_KEY.match(key):
                raise ValueError(
                    f"{key!r} is not a taint key; write it like karpenter.sh/disrupted "
                    "(an optional DNS prefix and a name)"
                )
        return value

    @field_validator("interruption_rate", mode="before")
    @classmethod
    def _rate(cls, value: object) -> object:
        return value if value is None else parse_rate(value)  # type: ignore[arg-type]
