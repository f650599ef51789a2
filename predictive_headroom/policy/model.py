"""The one pydantic base of the policy's sections (`PolicyModel`): unknown keys refused, camelCase
keys (snake_case accepted too), frozen values, no NaN or infinity.

Every section of a pool and of the policy subclasses it (`config`, `cpa`, `placeholder`,
`disruption`, `target`), so a key misspelt anywhere is refused the same way: pydantic's "Extra
inputs are not permitted" at the key's path, which `policy.load` turns into the message a user
reads.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class PolicyModel(BaseModel):
    """A policy section: extra keys forbidden, camelCase aliases, frozen, finite numbers only."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        allow_inf_nan=False,
    )


INT32_MAX = 2**31 - 1
"""The largest count Kubernetes stores (`replicas` and the like are int32)."""


def _int32(value: int) -> int:
    if value > INT32_MAX:
        raise ValueError(
            f"must be at most {INT32_MAX:,}, the largest count Kubernetes accepts (replica counts "
            "are int32); check for extra digits"
        )
    return value


Count = Annotated[
    int, Field(ge=0, json_schema_extra={"maximum": INT32_MAX}), AfterValidator(_int32)
]
"""A non-negative whole number of replicas (or placeholders) Kubernetes can store: at most
`INT32_MAX`, refused with the field named past it."""
