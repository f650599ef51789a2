"""A pool's `limits:` section: the most the pool's placeholders may request in total.

    limits: {cpu: 64, memory: 256Gi, nvidia.com/gpu: 8}

Each value is a positive Kubernetes quantity (`64`, `500m`, `256Gi`) for a resource the
placeholder requests; the plan holds at most as many placeholders as fit within every limit
(`core.limits`: the floor of limit / request, the smallest over the resources), a cap like
maxReplicas. A CapacityBuffer's own `spec.limits` have this meaning: for such a target the daemon
also writes them there, where the served version has the field (`kube.targets`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field, RootModel, model_validator
from pydantic_core import PydanticUndefined

from predictive_headroom.policy.placeholder import QUANTITY_PATTERN, RESOURCE_NAME_PATTERN, quantity
from predictive_headroom.policy.units import (
    BARE_BYTES_SCHEMA,
    BARE_CORES_SCHEMA,
    parse_quantity,
    unit_problem,
)

_LIMIT = {"type": ["string", "number"], "pattern": QUANTITY_PATTERN, "exclusiveMinimum": 0}
_SCHEMA = {
    "type": "object",
    "description": "the most the pool's placeholders may request in total, per resource (a "
    "positive Kubernetes quantity for a resource the placeholder requests), e.g. {cpu: 64, "
    "memory: 256Gi}: a cap on the plan, as a CapacityBuffer's spec.limits",
    "properties": {  # a bare number that cannot be meant (`policy.units`)
        "cpu": {**_LIMIT, "not": BARE_CORES_SCHEMA},
        "memory": {**_LIMIT, "not": BARE_BYTES_SCHEMA},
    },
    "patternProperties": {RESOURCE_NAME_PATTERN: _LIMIT},
    "additionalProperties": False,
}


def parse_limit(resource: str, value: Any) -> float:
    """The amount `value` allows of `resource` (cores for cpu, bytes for memory, units
    otherwise); ValueError naming `limits.<resource>` and how to write it."""
    text = str(value).strip() if isinstance(value, (str, int, float)) else None
    if isinstance(value, bool) or text is None:
        raise ValueError(
            f"limits.{resource}: {value!r} is not a quantity; write it like 64 or 256Gi"
        )
    if text.startswith("-"):
        raise ValueError(
            f"limits.{resource}: {text} is negative; write the most the placeholders may request "
            "in total, a positive quantity such as 64 or 256Gi"
        )
    try:
        amount = float(parse_quantity(quantity(text)))
    except ValueError:
        raise ValueError(
            f"limits.{resource}: {text!r} is not a Kubernetes quantity; write it like 64, 500m "
            "or 256Gi"
        ) from None
    problem = unit_problem(resource, text, per_pod=False)
    if problem:
        raise ValueError(f"limits.{resource}: {problem}")
    if amount <= 0:
        raise ValueError(
            f"limits.{resource}: {text} allows no placeholder at all; write a positive quantity "
            f"such as 64 or 256Gi, or remove limits.{resource}"
        )
    return amount


def fitting(limits: Mapping[str, float], request: Mapping[str, float]) -> dict[str, int]:
    """Per resource of `limits`, how many placeholders requesting `request` fit within it (the
    floor of limit / request; a resource the placeholder does not request is left out)."""
    return {
        name: math.floor(limit / request[name] + 1e-9)
        for name, limit in limits.items()
        if request.get(name, 0.0) > 0
    }


class Limits(RootModel[dict[str, str]]):
    """The `limits:` section: per resource name, the most the placeholders request in total."""

    model_config = ConfigDict(frozen=True)
    root: dict[str, str] = Field(default_factory=dict, json_schema_extra=_SCHEMA)

    @model_validator(mode="before")
    @classmethod
    def _limits(cls, data: Any) -> Any:
        if data is None or data is PydanticUndefined:
            return {}
        if not isinstance(data, dict):
            raise ValueError("limits must map resource names to quantities, e.g. {cpu: 64}")
        for name, value in data.items():
            if not re.match(RESOURCE_NAME_PATTERN, str(name)):
                raise ValueError(
                    f"limits: {name!r} is not a resource name: use one the placeholder requests, "
                    "such as cpu, memory or nvidia.com/gpu"
                )
            parse_limit(str(name), value)
        return {str(k): str(v).strip() for k, v in data.items()}

    @property
    def enabled(self) -> bool:
        """Whether the pool caps its placeholders' total requests (any resource named)."""
        return bool(self.root)

    def on_buffer(self, requested: Mapping[str, str]) -> dict[str, str | None]:
        """The CapacityBuffer `spec.limits` merge patch these limits make: each limit, and null
        (removed) for the other resources the placeholder requests, so the buffer's limits are
        exactly these."""
        return {**dict.fromkeys(requested), **self.root}

    @property
    def amounts(self) -> dict[str, float]:
        """Each resource's limit as a number (cores for cpu, bytes for memory, units otherwise)."""
        return {name: parse_limit(name, value) for name, value in self.root.items()}
