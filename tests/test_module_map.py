"""The module map in docs/development.md is the one the docstrings give (`tests/module_map.py`)."""

from __future__ import annotations

import module_map
import pytest


def test_every_module_has_a_docstring():
    assert module_map.missing_docstrings() == []


def test_the_module_map_in_the_development_doc_is_generated_from_the_docstrings():
    doc = module_map.DOC.read_text()
    assert doc == module_map.rewrite(doc, module_map.module_map()), (
        "docs/development.md's module map is stale: run `make module-map`"
    )


def test_the_map_names_every_subpackage_and_module():
    text = module_map.module_map()
    for package in ("app", "replay", "core", "daemon", "backtest", "report"):
        assert f"**`{package}/`**" in text
    for path in module_map.modules():
        if path.name != "__init__.py":
            assert f"`{path.name}`" in text


@pytest.mark.parametrize(
    ("docstring", "first"),
    [
        ("One sentence.", "One sentence."),
        ("First. Second one.", "First."),
        ("Wrapped\n  over lines. Then more.", "Wrapped over lines."),
        ("No full stop\n\nSecond paragraph.", "No full stop"),
        (
            "Keeps e.g. abbreviations and `x.y` names. Next.",
            "Keeps e.g. abbreviations and `x.y` names.",
        ),
    ],
)
def test_first_sentence(docstring, first):
    assert module_map.first_sentence(docstring) == first
