"""Values from outside as messages echo them: cut to a bound, with their whole length.

A label, a key or row of a file, a server's answer: one hostile value must not flood an error,
`/last-run`, an Event or a log line.

Every message that quotes a value it did not make itself passes it through `cut` (it lives in the
lowest layer so that every layer can). Pure.
"""

from __future__ import annotations

ECHO_LIMIT = 200
"""Characters of a value a message shows (a label value is at most 63, a name 253)."""


def cut(value: object, limit: int = ECHO_LIMIT) -> str:
    """`str(value)` when it has at most `limit` characters; else its first `limit` characters and
    `...(10,556 characters)`, the whole length, so the reader knows it was cut and by how much."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text):,} characters)"
