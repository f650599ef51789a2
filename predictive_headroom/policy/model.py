"""The one pydantic base of the policy's sections (`PolicyModel`): unknown keys refused, camelCase
keys (snake_case accepted too), frozen values, no NaN or infinity.

Every section of a pool and of the policy subclasses it (`config`, `cpa`, `placeholder`,
`disruption`, `target`), so a key misspelt anywhere is refused the same way: pydantic's "Extra
inputs are not permitted" at the key's path, which `policy.load` turns into the message a user
reads.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
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
