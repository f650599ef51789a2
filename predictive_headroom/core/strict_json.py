"""JSON that strict parsers accept: Python writes NaN and infinities as the bare words `NaN` and
`Infinity`, which are not JSON (`JSON.parse`, Go's `encoding/json` and `jq` refuse them). Every
JSON the daemon serves or writes (/last-run, report.json, `--output json`) goes through here:
a value that is not a finite number is `null`."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every float that is NaN or infinite (in dicts, lists and tuples) made None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, indent: int | None = 2) -> str:
    """`value` as strict JSON (NaN and infinities as null; other objects as their `str`)."""
    return json.dumps(finite(value), indent=indent, default=str, allow_nan=False)
