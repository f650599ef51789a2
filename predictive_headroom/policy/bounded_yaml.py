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

    def __init__(self, message: str, line: int | None = None, path: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.message, self.line, self.path = message, line, path


def size_problem(size: int) -> str | None:
    """Why a text of `size` bytes is refused, or None when it is within `MAX_BYTES`."""
    if size <= MAX_BYTES:
        return None
    return (
        f"the file is {size:,} bytes, more than the {MAX_BYTES:,}-byte (1 MiB) limit for a policy "
        "file; a policy lists pools and windows, so split or trim it"
    )


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and deep nesting while composing."""

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


def _repeated_key(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> None:
    """Raise YamlLimit at the first key repeated in one mapping of the composed tree `node`."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise YamlLimit(
                        f"key {key.value!r} appears twice in one mapping (first on line "
                        f"{seen[key.value]}); keep one",
                        line,
                        path,
                    )
                seen[key.value] = line
            _repeated_key(value, (*path, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _repeated_key(item, (*path, i))


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
        _repeated_key(root)
        data = loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()
    return data, root
