"""YAML read within bounds: a policy file is small, flat and written by hand, so anything else is
refused before it can cost time or memory.

`compose_bounded` refuses a text over `MAX_BYTES`, aliases that expand to more than `MAX_VALUES`
values or refer to themselves (a few hundred bytes of nested aliases expand to gigabytes; a few
aliases, as `yaml.dump` writes for a shared value, are fine), nesting deeper than `MAX_DEPTH`
(thousands of `[` exhaust the recursion of the composer) and a key repeated in one mapping (YAML's
"last one wins" silently drops the first). Each refusal is a `YamlLimit` naming the line and the
limit.
"""

from __future__ import annotations

from typing import Any, ClassVar

import yaml

MAX_BYTES = 1024 * 1024
"""A policy file larger than this (1 MiB) is refused unread."""

MAX_VALUES = 50_000
"""Most values (scalars, lists, mappings) a policy file may hold with its aliases expanded."""

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
    """SafeLoader that refuses nesting deeper than `MAX_DEPTH` while composing, and reads dates as
    the strings they are written as (as Helm's YAML does), so `from: 2026-11-27` is checked as a
    window's date in both kinds of file."""

    yaml_implicit_resolvers: ClassVar[dict[Any, Any]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
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


def _expanded_size(
    node: yaml.Node, memo: dict[int, tuple[int, int]], open_: set[int]
) -> tuple[int, int]:
    """(values, depth) of `node` with aliases expanded; YamlLimit past `MAX_VALUES` or
    `MAX_DEPTH`, or when an alias refers to a value that contains it."""
    key = id(node)
    if key in memo:
        return memo[key]
    line = node.start_mark.line + 1
    if key in open_:
        raise YamlLimit("a YAML alias refers to the value that contains it; write it out", line)
    open_.add(key)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    size, depth = 1, 1
    for child in children:
        child_size, child_depth = _expanded_size(child, memo, open_)
        size, depth = size + child_size, max(depth, child_depth + 1)
        if size > MAX_VALUES:
            raise YamlLimit(
                f"YAML aliases expand this file to more than {MAX_VALUES:,} values; a policy file "
                "holds a few thousand: write the values out or drop the aliases",
                line,
            )
        if depth > MAX_DEPTH:
            raise YamlLimit(
                f"nested more than {MAX_DEPTH} levels deep with its aliases expanded", line
            )
    open_.discard(key)
    memo[key] = (size, depth)
    return size, depth


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
        if root is not None:
            _expanded_size(root, {}, set())
        _repeated_key(root)
        data = loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()
    return data, root
