"""config/example.yaml documents every field of the policy: a field added to the models and left
out of the example fails here, by its YAML path."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel, RootModel

from predictive_headroom.policy.config import Policy

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example.yaml"


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (`Disruption`, `list[Pool]`, `Spread | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    if isinstance(annotation, types.UnionType):
        found += [m for a in annotation.__args__ for m in _models_in(a) if m not in found]
    return found


def field_paths(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    """(YAML path, key) of every field of `model` and of the models under it, by alias."""
    out = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{prefix}.{key}" if prefix else key
        out.append((path, key))
        for inner in _models_in(field.annotation):
            if not issubclass(inner, RootModel):  # a mapping (`share:`): its keys are the user's
                out += field_paths(inner, path)
    return out


def test_the_walk_finds_the_nested_fields():
    paths = {path for path, _ in field_paths(Policy)}
    for path in (
        "pools.protection",
        "pools.disruption.interruptionRate",
        "pools.forecast.reserve",
        "pools.placeholder.spread.whenUnsatisfiable",
        "pools.proportional.ladder.coresToReplicas",
        "cost.costPerGiBHour",
    ):
        assert path in paths, path


def test_every_policy_field_appears_in_the_example():
    text = EXAMPLE.read_text()
    missing = [
        path
        for path, key in field_paths(Policy)
        if not re.search(rf"(?m)^\s*(#\s*)?(-\s*)?{re.escape(key)}:", text)  # a key, or commented
        and not re.search(rf"\{{[^}}#\n]*\b{re.escape(key)}:", text)  # in a flow mapping
    ]
    assert missing == [], f"config/example.yaml does not document: {', '.join(missing)}"
