"""Resource amounts read from the cluster (node allocatable, pod requests), checked before use.

`kubernetes.utils.parse_quantity` accepts `NaN`, `Infinity` and `1e400` (the last fits the
Quantity grammar and overflows a float); one such value on one node made every reconcile of its
pool fail. Here an amount is a finite, non-negative float below a generous ceiling, or it is
refused with a message that names the field and the value, so the caller can leave that node or
pod out with a warning and plan on the rest.
"""

from __future__ import annotations

import math
from typing import Any

from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.units import parse_quantity

CEILINGS = {"cpu": 1e5, "pods": 1e6}
"""Amounts above these are absurd for one node or pod (cores; pods); other resources (bytes,
devices) stop at `DEFAULT_CEILING`."""
DEFAULT_CEILING = 2.0**70
"""About a zebibyte: far above any node's memory or storage, far below a float's overflow."""


class BadQuantity(ValueError):
    """An amount that cannot be used; the message names the field and the value."""


def amount(field: str, text: Any) -> float:
    """The amount of `text` (`"500m"`, `"4"`, `"16Gi"`) at `field` (e.g.
    `status.allocatable.cpu`); `BadQuantity` when it is not a quantity, not finite, negative or
    above the resource's ceiling."""
    resource = field.rsplit(".", 1)[-1]
    try:
        value = float(parse_quantity(text))
    except (ValueError, TypeError, ArithmeticError):
        raise BadQuantity(f"{field} {cut(text)!r} is not a Kubernetes quantity") from None
    if not math.isfinite(value):
        raise BadQuantity(f"{field} {text!r} is not a finite amount")
    if value < 0:
        raise BadQuantity(f"{field} {text!r} is negative")
    ceiling = CEILINGS.get(resource, DEFAULT_CEILING)
    if value > ceiling:
        raise BadQuantity(f"{field} {text!r} is above {ceiling:g}, not a real amount")
    return value


def amounts(field: str, resources: Any) -> tuple[tuple[tuple[str, float], ...], list[str]]:
    """((name, amount) sorted by name, problems) of a resource map such as `{"cpu": "500m"}` at
    `field`; each problem is a `BadQuantity` message and its entry is left out."""
    good, problems = [], []
    for name, text in resources.items() if isinstance(resources, dict) else ():
        try:
            good.append((str(name), amount(f"{field}.{name}", text)))
        except BadQuantity as exc:
            problems.append(str(exc))
    return tuple(sorted(good)), problems
