"""YAML read within bounds: a policy file is small, flat and written by hand, so anything else is
refused before it can cost time or memory.

`compose_bounded` refuses a text over `MAX_BYTES`, any alias (`*name`: a few hundred bytes of
nested aliases expand to gigabytes), nesting deeper than `MAX_DEPTH` (thousands of `[` exhaust the
recursion of the composer) and a key repeated in one mapping (YAML's "last one wins" silently drops
the first). Each refusal is a `YamlLimit` naming the line and the limit.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent

MAX_BYTES = 1024 * 1024
"""A policy file larger than this (1 MiB) is refused unread."""

MAX_DEPTH = 32
"""Deepest nesting of mappings and lists a policy file may have (a real one uses about 6)."""


class YamlLimit(Exception):
    """The text is outside the bounds a policy file is read within; `line` is 1-based or None."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def size_problem(size: int) -> str | None:
    """Why a text of `size` bytes is refused, or None when it is within `MAX_BYTES`."""
    if size <= MAX_BYTES:
        return None
    return (
        f"the file is {size:,} bytes, more than the {MAX_BYTES:,}-byte (1 MiB) limit for a policy "
        "file; a policy lists pools and windows, so split or trim it"
    )


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, deep nesting and repeated keys while composing."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise YamlLimit(
                f"YAML aliases (*{event.anchor}) are not accepted in a policy file; "
                "write the value out where it is used",
                event.start_mark.line + 1,
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlLimit(
                f"nested more than {MAX_DEPTH} levels deep; a policy file needs about 6",
                self.peek_event().start_mark.line + 1,
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        seen: dict[Any, int] = {}
        for key, _value in node.value:
            line = key.start_mark.line + 1
            if isinstance(key, yaml.ScalarNode) and key.value in seen:
                raise YamlLimit(
                    f"key {key.value!r} appears twice in one mapping (first on line "
                    f"{seen[key.value]}); keep one",
                    line,
                )
            if isinstance(key, yaml.ScalarNode):
                seen[key.value] = line
        return node


def compose_bounded(text: str) -> tuple[Any, yaml.Node | None]:
    """(data, root node) of the YAML `text`; YamlLimit when it is outside the bounds above.

    Raises yaml.YAMLError for text that is not YAML at all.
    """
    problem = size_problem(len(text.encode("utf-8", "surrogatepass")))
    if problem:
        raise YamlLimit(problem)
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()
    return data, root
