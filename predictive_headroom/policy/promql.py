"""PromQL checked when the policy is loaded (by `validate` and at daemon start), not at the first
refit: a query Prometheus would reject stops the start with the query and where it goes wrong.

The parser is `promql-parser` (GreptimeTeam's Rust PromQL parser, Python bindings). It does not
report positions, so unbalanced brackets and quotes, the usual copy-paste slips, are located by
`_unbalanced` below, a grouping clause without its parentheses (`by ingress`) by `_bare_grouping`, and
anything else at the end of the longest prefix that still parses (`_longest_valid_prefix`).
Functions it does not know are accepted: Prometheus-compatible backends
(VictoriaMetrics' MetricsQL, Thanos) add their own, and the backend has the last word.
"""

from __future__ import annotations

import re

import promql_parser

_PAIRS = {")": "(", "]": "[", "}": "{"}
_NAMES = {"(": "parenthesis", "[": "bracket", "{": "brace"}


def _unbalanced(query: str) -> tuple[int, str] | None:
    """(0-based offset, what) of the first unbalanced bracket or unclosed string in `query`."""
    stack: list[tuple[str, int]] = []
    quote: tuple[str, int] | None = None
    escaped = False
    for i, ch in enumerate(query):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\" and quote[0] != "`":
                escaped = True
            elif ch == quote[0]:
                quote = None
            continue
        if ch in "\"'`":
            quote = (ch, i)
        elif ch == "#":
            break
        elif ch in _NAMES:
            stack.append((ch, i))
        elif ch in _PAIRS:
            if not stack or stack[-1][0] != _PAIRS[ch]:
                return i, f"unexpected closing {ch!r}"
            stack.pop()
    if quote is not None:
        return quote[1], f"string opened with {quote[0]} is never closed"
    if stack:
        ch, i = stack[-1]
        return i, f"{_NAMES[ch]} {ch!r} is never closed"
    return None


_SYNTAX = "invalid promql query"
"""The parser's message for a syntax error, which it does not locate."""
_GROUPING = re.compile(r"\b(by|without|on|ignoring)\s+(?=[A-Za-z_])")


def _parses(query: str) -> bool:
    try:
        promql_parser.parse(query)
    except (ValueError, RuntimeError) as exc:
        return str(exc).startswith("unknown function with name")
    return True


def _bare_grouping(query: str) -> tuple[int, str] | None:
    """(offset, what) of the first `by`, `without`, `on` or `ignoring` followed by a label name
    instead of a parenthesised list, the form other query languages use."""
    for match in _GROUPING.finditer(query):
        label = re.match(r"[A-Za-z_][A-Za-z0-9_]*", query[match.end() :])
        if label and not _parses(query[: match.start()] + query[match.end() :]):
            keyword = match.group(1)
            return match.end(), (
                f"{keyword} takes its labels in parentheses: write {keyword} ({label.group(0)})"
            )
    return None


def _closers(prefix: str) -> str | None:
    """The brackets that close what `prefix` opened (None when it ends inside a string)."""
    stack: list[str] = []
    quote = None
    for ch in prefix:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'`":
            quote = ch
        elif ch in _NAMES:
            stack.append({"(": ")", "[": "]", "{": "}"}[ch])
        elif ch in _PAIRS and stack:
            stack.pop()
    return None if quote else "".join(reversed(stack))


def _longest_valid_prefix(query: str) -> tuple[int, str]:
    """(offset, what): the first token after the longest prefix of `query` that parses once its
    brackets are closed, where the query stops making sense."""
    tokens = list(re.finditer(r"[A-Za-z0-9_:.]+|[^\sA-Za-z0-9_:.]", query))
    for token in reversed(tokens):
        prefix = query[: token.start()]
        closers = _closers(prefix)
        if prefix.strip() and closers is not None and _parses(prefix + closers):
            return token.start(), f"the query stops parsing at {token.group(0)!r}"
    return (tokens[0].start() if tokens else 0), "the query does not start as PromQL"


def check_promql(query: str) -> str:
    """Return `query` when it parses as PromQL; raise ValueError naming the error, its position
    (column, 1-based) and the query with a caret under that position."""
    try:
        promql_parser.parse(query)
    except (ValueError, RuntimeError) as exc:
        reason = str(exc) or "invalid query"
        if reason.startswith("unknown function with name"):
            return query
        located = _unbalanced(query) or _bare_grouping(query)
        if located is None and reason == _SYNTAX:
            located = _longest_valid_prefix(query)
        if located is None:  # a type error (rate over a vector): the parser's words say where
            raise ValueError(f"not valid PromQL: {reason}: {query}") from None
        offset, what = located
        line = query.count("\n", 0, offset) + 1
        start = query.rfind("\n", 0, offset) + 1
        end = query.find("\n", offset)
        text = query[start : end if end >= 0 else len(query)]
        where = f"line {line}, column {offset - start + 1}" if "\n" in query else ""
        where = where or f"column {offset + 1}"
        raise ValueError(
            f"not valid PromQL at {where}: {what} ({reason}):\n      {text}\n"
            f"      {' ' * (offset - start)}^"
        ) from None
    return query
