"""The error a policy model raises when it knows which sub-field is wrong."""

from __future__ import annotations


class FieldProblem(ValueError):
    """A cross-field check that knows which sub-field is wrong (so the message can name it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
