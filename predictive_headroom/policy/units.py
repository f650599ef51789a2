"""Resource amounts whose bare number is almost certainly a mistake, refused with what was meant.

A Kubernetes quantity without a unit is bytes for memory and cores for CPU, so `memory: 64`
is 64 bytes (a node of it holds no placeholder, every node-hour figure comes out wrong) and
`cpu: 4000` is four thousand cores. A bare number is refused where it cannot be meant: memory
(and other byte amounts) below 1Mi, CPU above 1,000 cores; the message suggests the reading the
user almost certainly meant (`did you mean 64Gi?`), as durations (`did you mean 4m or 4s?`) and
shares (`did you mean 95%?`) already do. An amount with a unit (`512Ki`, `2k`) is taken as written.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

BARE_NUMBER = re.compile(r"^\+?(\d+(\.\d*)?|\.\d+)$")
"""A quantity with no suffix at all: no unit, no exponent."""
SMALLEST_BARE_BYTES = 2**20
"""A bare byte amount below 1Mi is refused (no pod or node is that small)."""
LARGEST_BARE_CORES = 1000
"""A bare CPU amount above this many cores is refused (no node is that large)."""
LARGEST_POD_GI = 64
"""For one pod's memory, a bare number up to this suggests Gi, a larger one Mi (64 -> 64Gi,
512 -> 512Mi); a node's or a pool's total memory always suggests Gi."""


def _kubernetes_parse_quantity() -> Callable[[Any], Decimal]:
    """The kubernetes client's own `parse_quantity`, read from its module file
    (`kubernetes/utils/quantity.py`, which needs only `decimal`): importing
    `kubernetes.utils` first runs the package's `__init__`, which imports the whole client,
    its configuration loaders and their HTTP libraries (over a second of a 2-core machine's
    start-up), for one pure function every policy check needs. The module already imported
    is used when it is there."""
    loaded = sys.modules.get("kubernetes.utils.quantity")
    if loaded is not None:
        return loaded.parse_quantity  # type: ignore[no-any-return]
    package = importlib.util.find_spec("kubernetes")  # found, not imported
    if package is None or package.origin is None:
        raise ModuleNotFoundError("the kubernetes client is not installed", name="kubernetes")
    path = Path(package.origin).parent / "utils" / "quantity.py"
    spec = importlib.util.spec_from_file_location("predictive_headroom._kubernetes_quantity", path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"cannot load {path}", name="kubernetes.utils.quantity")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_quantity  # type: ignore[no-any-return]


parse_quantity = _kubernetes_parse_quantity()
"""`kubernetes.utils.parse_quantity`: a Kubernetes quantity (`"500m"`, `2`, `"1Gi"`) as a
Decimal; ValueError when it is not one."""


BARE_BYTES_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": SMALLEST_BARE_BYTES},
        {"type": "string", "pattern": r"^\+?0*([1-9][0-9]{0,5}(\.[0-9]*)?|\.0*[1-9][0-9]*)$"},
    ]
}
"""What a JSON schema (the chart's, which Helm checks) refuses of a byte amount under `not`: a
bare number below 1Mi (a bare string of up to six digits)."""
BARE_CORES_SCHEMA: dict[str, Any] = {"type": "number", "exclusiveMinimum": LARGEST_BARE_CORES}
"""What a JSON schema refuses of a CPU amount under `not`: a bare number above 1,000 cores."""


def in_bytes(resource: str) -> bool:
    """True when `resource`'s amounts are bytes (memory, ephemeral-storage, hugepages-*)."""
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def unit_problem(resource: str, value: Any, *, per_pod: bool = True) -> str | None:
    """Why `value` as an amount of `resource` cannot be meant, with the reading suggested; None
    when it may be. Only a bare number is judged: memory below 1Mi, CPU above 1,000 cores.
    `per_pod`: the amount is one pod's (a small bare memory number suggests Gi, a larger Mi), not
    a node's or a pool's total (always Gi). Pure."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    if not BARE_NUMBER.match(text):
        return None
    number = float(text)
    if in_bytes(resource) and 0 < number < SMALLEST_BARE_BYTES:
        unit = "Mi" if per_pod and number > LARGEST_POD_GI else "Gi"
        return (
            f"{text} has no unit, so it is {text} bytes: did you mean {text}{unit}? "
            f"(write {resource} with its unit, e.g. 512Mi or 64Gi)"
        )
    if resource == "cpu" and number > LARGEST_BARE_CORES:
        return (
            f"{text} has no unit, so it is {text} cores: did you mean {text}m? "
            "(CPU is cores, 2, or millicores, 2000m)"
        )
    return None


def cores_problem(value: float) -> str | None:
    """Why `value` cores (a node's CPU, given as a number of cores) cannot be meant, with the
    reading suggested; None when it may be. Pure."""
    if value <= LARGEST_BARE_CORES:
        return None
    return (
        f"{value:g} cores is no node: did you mean {value / 1000:g}? (this counts cores; "
        f"{value:g} millicores is {value / 1000:g})"
    )
