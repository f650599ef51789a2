"""The placeholder pod of a pool: what it requests and where it may run.

The daemon reads only the requests (to show the cost of headroom); the Helm chart renders the
whole pod from this section, so one schema describes a pool in the policy file and in the chart's
values. `cpu` and `memory` are the policy file's original shorthand for `requests.cpu` and
`requests.memory`, kept so existing files stay valid.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from predictive_headroom.policy.errors import FieldProblem
from predictive_headroom.policy.model import PolicyModel
from predictive_headroom.policy.units import (
    BARE_BYTES_SCHEMA,
    BARE_CORES_SCHEMA,
    parse_quantity,
    unit_problem,
)

QUANTITY_PATTERN = r"^\+?((\d+(\.\d*)?)|(\.\d+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?\d+))?$"
RESOURCE_NAME_PATTERN = (
    r"^(cpu|memory|ephemeral-storage|hugepages-[0-9A-Za-z.]+"
    r"|[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$"
)
# Resources the kubelet may overcommit; every other one (GPUs, hugepages, device plugins) needs
# limits equal to requests, so the chart copies the request into the limit.
OVERCOMMITTABLE = ("cpu", "memory", "ephemeral-storage")
# What the chart reads only to render the placeholder pods: with `existing: true` it renders none,
# so these would be ignored and are refused. The requests stay: the daemon prices headroom and
# counts shares with them, so they must say what the existing pods request.
RENDERED_ONLY = (
    "limits",
    "labels",
    "annotations",
    "node_selector",
    "tolerations",
    "affinity",
    "topology_spread_constraints",
    "spread",
    "image_pull_secrets",
)
# The labels the chart's selector uses; a placeholder's own labels may not replace them.
SELECTOR_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "predictive-headroom.io/pool",
)


def quantity(value: Any) -> str:
    """`value` as a Kubernetes quantity string; ValueError saying how to write one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a Kubernetes quantity such as '500m', '2', '1Gi'")
    text = str(value)
    try:
        amount = parse_quantity(text) if re.match(QUANTITY_PATTERN, text) else None
        if amount is None or amount < 0 or not math.isfinite(float(amount)):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{text!r} is not a Kubernetes quantity such as '500m', '2', '1Gi'"
        ) from None
    return text


def resource_quantity(resource: str, value: Any, *, per_pod: bool = True) -> str:
    """`value` as a quantity of `resource`; ValueError saying how to write one, or what a bare
    number that cannot be meant was likely meant to be (`policy.units`: `64` bytes of memory,
    did you mean 64Gi?)."""
    text = quantity(value)
    problem = unit_problem(resource, text, per_pod=per_pod)
    if problem:
        raise ValueError(problem)
    return text


def _is_resource_quantity(resource: str, value: Any) -> bool:
    try:
        resource_quantity(resource, value)
    except ValueError:
        return False
    return True


_QUANTITY_SCHEMA = {
    "type": ["string", "number"],
    "pattern": QUANTITY_PATTERN,
    "minimum": 0,
    "description": "a Kubernetes quantity such as 500m, 2, 1Gi",
}
_CPU_SCHEMA = {
    **_QUANTITY_SCHEMA,
    "not": BARE_CORES_SCHEMA,
    "description": "a Kubernetes quantity such as 500m, 2 (a bare number is cores: at most 1000)",
}
_BYTES_SCHEMA = {
    **_QUANTITY_SCHEMA,
    "not": BARE_BYTES_SCHEMA,
    "description": "a Kubernetes quantity with its unit such as 512Mi, 64Gi (a bare number is "
    "bytes: one below 1Mi is refused)",
}
Quantity = Annotated[str, BeforeValidator(quantity), WithJsonSchema(_QUANTITY_SCHEMA)]
CpuQuantity = Annotated[
    str, BeforeValidator(lambda v: resource_quantity("cpu", v)), WithJsonSchema(_CPU_SCHEMA)
]
MemoryQuantity = Annotated[
    str,
    BeforeValidator(lambda v: resource_quantity("memory", v)),
    WithJsonSchema(_BYTES_SCHEMA),
]
NodeMemoryQuantity = Annotated[
    str,
    BeforeValidator(lambda v: resource_quantity("memory", v, per_pod=False)),
    WithJsonSchema(_BYTES_SCHEMA),
]
"""A node's memory: a small bare number suggests Gi (`nodeMemory: 64`, did you mean 64Gi?)."""


def _resource_name(name: str) -> str:
    if not re.match(RESOURCE_NAME_PATTERN, name):
        raise ValueError(
            f"{name!r} is not a resource name: use cpu, memory, ephemeral-storage, "
            "hugepages-<size> or a domain-prefixed name such as nvidia.com/gpu"
        )
    return name


ResourceName = Annotated[str, AfterValidator(_resource_name)]
# Keys checked by pattern, so Helm names the bad key and where it is.
_RESOURCES = {
    "properties": {"cpu": _CPU_SCHEMA, "memory": _BYTES_SCHEMA, "ephemeral-storage": _BYTES_SCHEMA},
    "patternProperties": {RESOURCE_NAME_PATTERN: _QUANTITY_SCHEMA},
    "additionalProperties": False,
}
FreeForm = dict[str, Any]


class Spread(PolicyModel):
    """How placeholder pods spread over nodes; unset fields take the chart's default."""

    mode: Literal["topologySpread", "antiAffinity", "none"] | None = None
    topology_key: str | None = Field(default=None, min_length=1)
    when_unsatisfiable: Literal["ScheduleAnyway", "DoNotSchedule"] | None = None


class LocalObjectReference(PolicyModel):
    """An imagePullSecrets entry: the name of a Secret in the placeholder's namespace."""

    name: str = Field(min_length=1)


class Placeholder(PolicyModel):
    """One placeholder pod: requests (any resource names), limits and its scheduling settings."""

    existing: bool = Field(
        default=False,
        description=(
            "the placeholder Deployment exists already (e.g. the cluster-overprovisioner "
            "chart's): the chart renders none, only the rights on target.name; label it "
            "predictive-headroom.io/pool=<pool> and the daemon scales it through /scale, never "
            "touching its selector or pod template"
        ),
    )
    cpu: CpuQuantity = "1"
    memory: MemoryQuantity = "1Gi"
    requests: dict[ResourceName, Quantity] = Field(
        default_factory=dict, json_schema_extra=_RESOURCES
    )
    limits: dict[ResourceName, Quantity] = Field(default_factory=dict, json_schema_extra=_RESOURCES)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[FreeForm] = Field(default_factory=list)
    affinity: FreeForm = Field(default_factory=dict)
    topology_spread_constraints: list[FreeForm] = Field(default_factory=list)
    spread: Spread | None = None
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _fold_shorthand(cls, data: Any) -> Any:
        """`cpu`/`memory` and `requests` describe the same requests; make both say the same. A
        value that is not a quantity is left where the user wrote it (and reported there once),
        not copied to the other field."""
        if not isinstance(data, dict) or not isinstance(data.get("requests", {}), dict):
            return data
        data = dict(data)
        requests = dict(data.get("requests") or {})
        given = "requests" in data
        for key, default in (("cpu", "1"), ("memory", "1Gi")):
            if key in data and key in requests and str(data[key]) != str(requests[key]):
                raise ValueError(
                    f"{key} is set twice, as {key}: {data[key]!r} and requests.{key}: "
                    f"{requests[key]!r}; keep requests.{key} only"
                )
            if key in data:
                if _is_resource_quantity(key, data[key]):
                    requests[key] = data[key]
            else:
                if not given:
                    requests[key] = default
                if _is_resource_quantity(key, requests.get(key, "0")):
                    data[key] = requests.get(key, "0")
        data["requests"] = requests
        return data

    @field_validator("requests", "limits")
    @classmethod
    def _units(cls, amounts: dict[str, str]) -> dict[str, str]:
        """A bare number that cannot be meant (`memory: 64`, 64 bytes) is refused at its key."""
        for name, text in amounts.items():
            problem = unit_problem(name, text)
            if problem:
                raise FieldProblem(name, problem)
        return amounts

    @field_validator("labels")
    @classmethod
    def _own_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        taken = sorted(set(labels) & set(SELECTOR_LABELS))
        if taken:
            raise ValueError(
                f"label {taken[0]!r} is set by the chart to select the placeholder pods; "
                "choose another key"
            )
        return labels

    @model_validator(mode="after")
    def _nothing_to_render(self) -> Placeholder:
        """An existing placeholder is not rendered: a pod setting for it would be ignored."""
        if not self.existing:
            return self
        for name in RENDERED_ONLY:
            if name in self.model_fields_set:
                key = to_camel(name)
                raise FieldProblem(
                    key,
                    f"{key} is ignored with existing: true (the chart renders no placeholder pods; "
                    f"the existing Deployment keeps its own pod template): remove {key}, or "
                    "remove existing: true to let the chart create the placeholder with it",
                )
        return self

    @model_validator(mode="after")
    def _limits_fit(self) -> Placeholder:
        for name, limit in self.limits.items():
            request = self.requests.get(name)
            if request is None:
                continue
            if name in OVERCOMMITTABLE:
                if parse_quantity(limit) < parse_quantity(request):
                    raise FieldProblem(
                        f"limits.{name}",
                        f"limit {limit} is below the request {request}; a limit must be at "
                        "least the request",
                    )
            elif parse_quantity(limit) != parse_quantity(request):
                raise FieldProblem(
                    f"limits.{name}",
                    f"{name} cannot be overcommitted: its limit ({limit}) must equal its request "
                    f"({request}); leave the limit out and the chart sets it to the request",
                )
        return self

    @property
    def cpu_cores(self) -> float:
        return float(parse_quantity(self.cpu))

    @property
    def memory_gib(self) -> float:
        return float(parse_quantity(self.memory)) / 2**30

    @property
    def amounts(self) -> dict[str, float]:
        """The requests as numbers (cores for cpu, bytes for memory), zero requests left out."""
        parsed = {name: float(parse_quantity(q)) for name, q in self.requests.items()}
        return {name: v for name, v in parsed.items() if v > 0}

    def pod_limits(self) -> dict[str, str]:
        """The limits the chart renders: the given ones, plus requests of resources that cannot
        be overcommitted (GPUs, hugepages), whose limit must equal the request."""
        extra = {k: v for k, v in self.requests.items() if k not in OVERCOMMITTABLE}
        return {**extra, **self.limits}
