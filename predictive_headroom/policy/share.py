"""A pool's `share:` section: headroom as a share of what the pool's pods request.

    share: {cpu: 10%}            # placeholders for 10% of the CPU the pool's pods request
    share: {memory: 15%}
    share: {nvidia.com/gpu: 1}   # an absolute amount: one GPU's worth, whatever runs

A value ending in `%` (0% to 100%) is a share of the resource requested by the pool's pods (those
on the nodes of the pool's node selector; placeholders, DaemonSet and mirror pods left out); a
value without `%` is an absolute amount, a Kubernetes quantity (`500m`, `2Gi`, `1`). For cpu and
memory the amount takes a unit (`4000m`, `2Gi`): a bare number there is refused, as `cpu: 10` is
almost always 10% meant (and would keep 10 cores); bare counts stay for extended resources such
as `nvidia.com/gpu`. Every resource named must be one the placeholder requests (the amount is
counted in placeholders). The component's arithmetic is `core.share`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from pydantic import ConfigDict, Field, RootModel, model_validator
from pydantic_core import PydanticUndefined

from predictive_headroom.policy.placeholder import QUANTITY_PATTERN, RESOURCE_NAME_PATTERN, quantity
from predictive_headroom.policy.units import parse_quantity

UNIT_REQUIRED = frozenset({"cpu", "memory"})  # a bare number here is a footgun (cpu: 10 for 10%)
PERCENT_PATTERN = r"^\s*(100(\.0+)?|[0-9]?[0-9](\.[0-9]+)?)\s*%\s*$"
_SCHEMA = {
    "type": "object",
    "description": "headroom as a share of what the pool's pods request, per resource: "
    "10% of it, or an absolute amount (a Kubernetes quantity)",
    "patternProperties": {
        RESOURCE_NAME_PATTERN: {
            "anyOf": [
                {"type": "string", "pattern": PERCENT_PATTERN},
                {"type": ["string", "number"], "pattern": QUANTITY_PATTERN, "minimum": 0},
            ]
        }
    },
    "additionalProperties": False,
}


class Term(NamedTuple):
    """One resource's term: a `fraction` of what is requested, or an absolute `amount` (cores
    for cpu, bytes for memory, units otherwise); the other is None."""

    fraction: float | None
    amount: float | None


def parse_term(resource: str, value: Any) -> Term:
    """The term `value` names for `resource` (`10%` or a quantity); ValueError naming both and
    how to write it."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"share.{resource}: {value!r} is not a share; write it like 10% or 2")
    text = str(value).strip()
    if text.endswith("%"):
        try:
            number = float(text.removesuffix("%"))
        except ValueError:
            raise ValueError(
                f"share.{resource}: {text!r} is not a number; write a share like 10%"
            ) from None
        if not 0 <= number <= 100:
            raise ValueError(
                f"share.{resource}: {text} is not between 0% and 100%; write a share like 10%"
            )
        return Term(number / 100, None)
    try:
        quantity(text)
    except ValueError:
        raise ValueError(
            f"share.{resource}: {text!r} is neither a share (10%) nor an amount (a non-negative "
            "Kubernetes quantity such as 1, 500m or 2Gi)"
        ) from None
    if resource in UNIT_REQUIRED and _is_bare_number(text):
        raise ValueError(bare_number_problem(resource, text))
    return Term(None, float(parse_quantity(text)))


def _is_bare_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def bare_number_problem(resource: str, text: str) -> str:
    """What is wrong with a bare number as `resource`'s share and how to write what was meant."""
    unit = "4000m for 4 cores" if resource == "cpu" else "2Gi"
    meant = f"did you mean {text}%? " if 0 <= float(text) <= 100 else ""
    return (
        f"share.{resource}: {text} has no unit: {meant}a share of what the pool's pods request is "
        f"written with % (10%), an amount of {resource} with its unit ({unit}); bare counts are "
        "for extended resources such as nvidia.com/gpu: 1"
    )


class Share(RootModel[dict[str, str]]):
    """The `share:` section: per resource name, a share (`10%`) or an absolute amount."""

    model_config = ConfigDict(frozen=True)
    root: dict[str, str] = Field(default_factory=dict, json_schema_extra=_SCHEMA)

    @model_validator(mode="before")
    @classmethod
    def _terms(cls, data: Any) -> Any:
        if data is None or data is PydanticUndefined:
            return {}
        if not isinstance(data, dict):
            raise ValueError("share must map resource names to shares, e.g. {cpu: 10%}")
        for name, value in data.items():
            if not re.match(RESOURCE_NAME_PATTERN, str(name)):
                raise ValueError(
                    f"share: {name!r} is not a resource name: use one the placeholder requests, "
                    "such as cpu, memory or nvidia.com/gpu"
                )
            parse_term(str(name), value)
        return {str(k): str(v).strip() for k, v in data.items()}

    @property
    def enabled(self) -> bool:
        """Whether the pool asks for the component (any resource named)."""
        return bool(self.root)

    @property
    def terms(self) -> dict[str, Term]:
        """Each resource's term, parsed."""
        return {name: parse_term(name, value) for name, value in self.root.items()}
