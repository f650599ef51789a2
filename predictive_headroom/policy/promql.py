"""PromQL checked when the policy is loaded (by `validate` and at daemon start), not at the first
refit: a query Prometheus would reject stops the start with the query and where it goes wrong.

The parser is `promql-parser` (GreptimeTeam's Rust PromQL parser, Python bindings). It does not
report positions, so unbalanced brackets and quotes, the usual copy-paste slips, are located by
`_unbalanced` below. Functions it does not know are accepted: Prometheus-compatible backends
(VictoriaMetrics' MetricsQL, Thanos) add their own, and the backend has the last word.
"""

from __future__ import annotations

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


def check_promql(query: str) -> str:
    """Return `query` when it parses as PromQL; raise ValueError naming the error, its position
    (column, 1-based) and the query with a caret under that position when it is known."""
    try:
        promql_parser.parse(query)
    except (ValueError, RuntimeError) as exc:
        reason = str(exc) or "invalid query"
        if reason.startswith("unknown function with name"):
            return query
        located = _unbalanced(query)
        if located is None:
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
