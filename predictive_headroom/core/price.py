"""One price for headroom: what a node-hour and a placeholder-hour cost, and what was assumed.

Every money figure of the product (the report's next 48 hours, the promise's cost a day in the
report, `tune` and `backtest`) is priced here, so they agree on the same data. A node-hour is:

1. `cost.nodeHourPrice` (or `--node-hour-price`) when given: your provider's price for the node;
2. else the node's shape (`cost.nodeCpu` / `cost.nodeMemory`, or `--node-cpu` / `--node-memory`,
   e.g. from `predictive-headroom size`) at `costPerCpuHour` and `costPerGiBHour`;
3. else a node of `slots` placeholders (the simulated cluster's node: 8 by default) at the
   placeholder's requests and the same two prices.

A node holds `slots` placeholders: as many as fit in its shape (CPU and memory both), else the
simulated cluster's. A placeholder-hour is a node-hour over `slots`: the part of the node each
placeholder keeps warm, its unused remainder included. `assumed` says all of this in one line.
Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_SLOTS = 8
"""Placeholders a node holds when the node's shape is not given (the backtest's `--node-slots`)."""


@dataclass(frozen=True)
class NodeShape:
    """A node's allocatable CPU (cores) and memory (GiB), and where the figures came from."""

    cpu: float
    memory_gib: float
    source: str = "cost.nodeCpu/nodeMemory"


@dataclass(frozen=True)
class Price:
    """What a node-hour costs (None: no prices given), the placeholders a node holds, and the
    assumption in words."""

    node_hour: float | None
    slots: int
    currency: str
    assumed: str
    node: NodeShape | None = None
    """The node priced: the shape given, else `slots` placeholders' worth (every replay simulates
    this node: `replay.setup.priced_nodes`)."""

    @property
    def placeholder_hour(self) -> float | None:
        """A placeholder's share of a node-hour."""
        return None if self.node_hour is None else self.node_hour / self.slots

    def money(self, node_hours: float) -> float | None:
        """`node_hours` in money (None without prices)."""
        return None if self.node_hour is None else node_hours * self.node_hour

    def text(self, node_hours: float) -> str:
        """`12.40 USD` for `node_hours`, or an empty string without prices."""
        money = self.money(node_hours)
        return "" if money is None else f"{money:,.2f} {self.currency}"

    def to_dict(self) -> dict[str, object]:
        return {
            "node_hour": None if self.node_hour is None else round(self.node_hour, 6),
            "placeholder_hour": None
            if self.placeholder_hour is None
            else round(self.placeholder_hour, 6),
            "slots": self.slots,
            "currency": self.currency,
            "assumed": self.assumed,
        }


def slots_in(shape: NodeShape, cpu: float, memory_gib: float) -> int:
    """Placeholders of `cpu` cores and `memory_gib` GiB that fit on a node of `shape` (at least 1:
    a placeholder larger than the node still takes a whole node)."""
    fits = [
        shape.cpu / cpu if cpu > 0 else math.inf,
        shape.memory_gib / memory_gib if memory_gib > 0 else math.inf,
    ]
    n = min(fits)
    return max(1, int(math.floor(n + 1e-9))) if math.isfinite(n) else DEFAULT_SLOTS


def _num(value: float) -> str:
    return f"{value:,.4g}"


def price_node_hour(
    cost: object | None,
    cpu: float,
    memory_gib: float,
    *,
    shape: NodeShape | None = None,
    node_hour_price: float | None = None,
    slots: int | None = None,
) -> Price:
    """The price of a node-hour for placeholders of `cpu` cores and `memory_gib` GiB, from the
    policy's `cost:` section (`policy.config.Cost` or None) and what the command line gave
    (`shape`, `node_hour_price`, which win over the policy's); `slots` is the simulated node's
    placeholder count when no shape is known (default `DEFAULT_SLOTS`)."""
    currency = getattr(cost, "currency", None) or "USD"
    per_cpu = float(getattr(cost, "cost_per_cpu_hour", 0.0) or 0.0)
    per_gib = float(getattr(cost, "cost_per_gib_hour", 0.0) or 0.0)
    if shape is None and getattr(cost, "node_cpu", None) is not None:
        shape = NodeShape(float(cost.node_cpu), float(cost.node_memory_gib or 0.0))  # type: ignore[attr-defined]
    if node_hour_price is None:
        node_hour_price = getattr(cost, "node_hour_price", None)
    ph = f"{_num(cpu)} CPU, {_num(memory_gib)} GiB"
    if shape is not None:
        n = slots_in(shape, cpu, memory_gib)
        node = f"a node of {_num(shape.cpu)} CPU, {_num(shape.memory_gib)} GiB ({shape.source}) holding {n} placeholders of {ph}"
    else:
        n = slots or DEFAULT_SLOTS
        shape = NodeShape(n * cpu, n * memory_gib, "placeholders")
        node = (
            f"a node of {n} placeholders of {ph} (give cost.nodeHourPrice or the node's "
            "shape, cost.nodeCpu/nodeMemory, for your nodes)"
        )
    if node_hour_price is not None:
        return Price(
            float(node_hour_price),
            n,
            currency,
            f"a node-hour at {node_hour_price:,.4g} {currency} (nodeHourPrice); {node}",
            shape,
        )
    if not (per_cpu or per_gib):
        return Price(None, n, currency, f"no prices (cost: section); {node}", shape)
    value = shape.cpu * per_cpu + shape.memory_gib * per_gib
    return Price(
        value,
        n,
        currency,
        f"a node-hour at {value:,.4g} {currency} = {_num(shape.cpu)} CPU x {per_cpu:g} + "
        f"{_num(shape.memory_gib)} GiB x {per_gib:g}; {node}",
        shape,
    )


def pool_price(
    pool: object,
    cost: object | None,
    *,
    shape: NodeShape | None = None,
    node_hour_price: float | None = None,
    slots: int | None = None,
) -> Price:
    """`price_node_hour` for `pool`'s placeholder (`policy.config.Pool`): its CPU and memory
    requests."""
    placeholder = pool.placeholder  # type: ignore[attr-defined]
    return price_node_hour(
        cost,
        placeholder.cpu_cores,
        placeholder.memory_gib,
        shape=shape,
        node_hour_price=node_hour_price,
        slots=slots,
    )
