"""Policies that validate but can never be right: each finding names the field and why, for
`validate` to print as a warning (or a note) while the policy still loads.

Pure: the time is passed in. Errors, where nothing could be meant (a cron that never fires), are
the models' own checks; these are the cases a user could mean but almost certainly does not.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo

import promql_parser

from predictive_headroom.policy.config import Cost, Policy, Pool
from predictive_headroom.policy.cron import cron_trigger, expand
from predictive_headroom.policy.events import gap_move

MAX_SENSIBLE_REPLICAS = 10_000
"""More placeholders than this in one pool is a typo, not a plan (Kubernetes' tested limits are
5,000 nodes and 150,000 pods a cluster)."""

MAX_NODES = 5_000
"""The largest cluster Kubernetes is tested with (its 'considerations for large clusters')."""

COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase"})
"""What turns a counter (a `_total` series) into demand per unit of time."""


class Level(StrEnum):
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Finding:
    """One thing worth a look in a valid policy: the field path, what is wrong and the level."""

    path: str
    message: str
    level: Level = Level.WARNING

    def __str__(self) -> str:
        return f"{self.level}: {self.path}: {self.message}"


def policy_findings(policy: Policy, now: float) -> list[Finding]:
    """Every finding of `policy` at time `now` (POSIX seconds), pool by pool."""
    return [
        finding
        for i, pool in enumerate(policy.pools)
        for check in (
            _past_events,
            _moved_events,
            _raw_counter,
            _replica_bounds,
            _selectors,
            _above_cap,
            _one_day_crons,
        )
        for finding in check(pool, f"pools[{i}]", policy.cost, now)
    ]


def _past_events(pool: Pool, at: str, _cost: Cost | None, now: float) -> Iterator[Finding]:
    for j, window in enumerate(pool.schedules):
        if window.dated and window.event_span()[1] <= now:
            yield Finding(
                f"{at}.schedules[{j}].to",
                f"the event {window.name!r} ended at {window.to} {window.timezone}, before now: it "
                "will never open again; remove it or give it this year's dates",
                Level.NOTE,
            )


def _moved_events(pool: Pool, at: str, _cost: Cost | None, _now: float) -> Iterator[Finding]:
    """A dated event's `from` or `to` in a daylight-saving gap: where it moves."""
    for j, window in enumerate(pool.schedules):
        for field, value in (("from", window.from_), ("to", window.to)):
            moved = gap_move(value, window.timezone)
            if moved:
                yield Finding(f"{at}.schedules[{j}].{field}", moved, Level.NOTE)


def raw_counters(query: str) -> list[str]:
    """The `_total` series (counters, by Prometheus's naming rules) that `query` reads without
    `rate`, `irate` or `increase` around them; empty when it parses as none (or not at all)."""
    try:
        expr = promql_parser.parse(query)
    except (ValueError, RuntimeError):
        return []
    return sorted(set(_bare_counters(expr, inside_rate=False)))


def _bare_counters(expr: object, inside_rate: bool) -> Iterator[str]:
    kind = type(expr).__name__
    if kind == "VectorSelector":
        name = expr.name or ""  # type: ignore[attr-defined]
        if name.endswith("_total") and not inside_rate:
            yield name
        return
    if kind == "Call":
        inside_rate = expr.func.name in COUNTER_FUNCTIONS  # type: ignore[attr-defined]
        for arg in expr.args:  # type: ignore[attr-defined]
            yield from _bare_counters(arg, inside_rate)
        return
    for part in ("lhs", "rhs", "expr", "vector_selector", "param"):
        child = getattr(expr, part, None)
        if child is not None and type(child).__module__.startswith("promql_parser"):
            yield from _bare_counters(child, inside_rate)


def _raw_counter(pool: Pool, at: str, _cost: Cost | None, _now: float) -> Iterator[Finding]:
    if pool.forecast is None or not pool.forecast.enabled:
        return
    names = raw_counters(pool.forecast.query)
    if names:
        series = ", ".join(names)
        yield Finding(
            f"{at}.forecast.query",
            f"{series} is a counter (a _total series only ever grows), read here without rate(): "
            f"the forecast would take its running total for demand; write e.g. "
            f"sum(rate({names[0]}[5m]))",
        )


def placeholders_per_node(pool: Pool, cost: Cost | None) -> int | None:
    """How many of the pool's placeholders one node holds, by the node shape of `cost`
    (`nodeCpu`, `nodeMemory`); None when the policy does not give a node shape."""
    if cost is None or cost.node_cpu is None or cost.node_memory_gib is None:
        return None
    spec = pool.placeholder
    fits = [cost.node_cpu / spec.cpu_cores if spec.cpu_cores else math.inf]
    fits.append(cost.node_memory_gib / spec.memory_gib if spec.memory_gib else math.inf)
    return int(min(fits)) if min(fits) < math.inf else None


def _replica_bounds(pool: Pool, at: str, cost: Cost | None, _now: float) -> Iterator[Finding]:
    per_node = placeholders_per_node(pool, cost)
    fields = [(f"{at}.minReplicas", pool.min_replicas)] + [
        (f"{at}.schedules[{j}].desiredReplicas", w.desired_replicas)
        for j, w in enumerate(pool.schedules)
    ]
    for path, replicas in fields:
        if per_node == 0 and replicas > 0:
            yield Finding(
                path,
                f"{replicas} placeholder(s) of {pool.placeholder.cpu} CPU and "
                f"{pool.placeholder.memory} memory, but a node (cost.nodeCpu, cost.nodeMemory) "
                "cannot hold even one: none could ever be scheduled; make the placeholder smaller",
            )
        elif per_node and replicas > per_node * MAX_NODES:
            yield Finding(
                path,
                f"{replicas:,} placeholders need more than {MAX_NODES:,} nodes of {per_node} "
                "placeholder(s) each, beyond the largest cluster Kubernetes supports",
            )
        elif replicas > MAX_SENSIBLE_REPLICAS:
            yield Finding(
                path,
                f"{replicas:,} placeholders is more than {MAX_SENSIBLE_REPLICAS:,}, beyond what "
                "any node pool holds (Kubernetes is tested to 5,000 nodes); check for extra digits",
            )


def _selectors(pool: Pool, at: str, _cost: Cost | None, _now: float) -> Iterator[Finding]:
    rule = pool.proportional
    if rule is None or not rule.node_selector:
        return
    if rule.node_selector != pool.placeholder.node_selector:
        yield Finding(
            f"{at}.proportional.nodeSelector",
            f"counts the nodes labelled {_labels(rule.node_selector)} but the placeholders go "
            f"to {_labels(pool.placeholder.node_selector) or 'any node'} "
            "(placeholder.nodeSelector): they warm nodes the rule does not count; give "
            "placeholder.nodeSelector the same labels",
        )


def _above_cap(pool: Pool, at: str, _cost: Cost | None, _now: float) -> Iterator[Finding]:
    cap = pool.max_replicas
    for j, window in enumerate(pool.schedules):
        if window.desired_replicas > cap:
            yield Finding(
                f"{at}.schedules[{j}].desiredReplicas",
                f"the window {window.name!r} asks for {window.desired_replicas:,} placeholders but "
                f"maxReplicas is {cap:,}: it gets {cap:,} while open; raise maxReplicas or lower "
                "desiredReplicas",
            )
    rule = pool.proportional
    asks = []
    if rule is not None and rule.linear is not None:
        asks.append(("linear.min", rule.linear.min, "as its floor"))
        if rule.linear.max is not None:
            asks.append(("linear.max", rule.linear.max, "as its own cap"))
    if rule is not None and rule.ladder is not None:
        ladders = (
            ("coresToReplicas", "cores", rule.ladder.cores_to_replicas),
            ("nodesToReplicas", "nodes", rule.ladder.nodes_to_replicas),
        )
        for key, unit, steps in ladders:
            over = [(threshold, replicas) for threshold, replicas in steps if replicas > cap]
            if over:
                asks.append((f"ladder.{key}", over[0][1], f"from {over[0][0]:g} {unit} on"))
    for key, replicas, when in asks:
        if replicas > cap:
            yield Finding(
                f"{at}.proportional.{key}",
                f"the cluster-size rule asks for {replicas:,} placeholders {when} but maxReplicas "
                f"is {cap:,}: the pool never gets more than {cap:,}; raise maxReplicas or lower the "
                "rule",
            )


def _one_day_crons(pool: Pool, at: str, _cost: Cost | None, now: float) -> Iterator[Finding]:
    for j, window in enumerate(pool.schedules):
        if window.dated or window.start is None or window.end is None:
            continue
        day = one_day_of_year(window.start)
        if day is None:
            continue
        zone = ZoneInfo(window.timezone)
        opens = cron_trigger(window.start, window.timezone).get_next_fire_time(
            None, datetime.fromtimestamp(now, zone)
        )
        closes = cron_trigger(window.end, window.timezone).get_next_fire_time(None, opens)
        yield Finding(
            f"{at}.schedules[{j}].start",
            f"{window.start!r} fires on {day} only, every year: for a one-off event write it as "
            f'a dated event, from: "{opens:%Y-%m-%d %H:%M}" and to: "{closes:%Y-%m-%d %H:%M}" '
            "in place of start and end (it opens once, and validate notes it when it is past)",
            Level.NOTE,
        )


def one_day_of_year(expression: str) -> str | None:
    """The day (`27 November`) when cron `expression` fires on one day of one month only (its
    day-of-month and month one value each, any day of week); None otherwise."""
    fields = expand(expression).split()
    if len(fields) != 5:
        return None
    day, month, weekday = fields[2], fields[3].lower(), fields[4]
    if not day.isdigit() or weekday != "*":
        return None
    names = [m.lower() for m in calendar.month_abbr]
    number = int(month) if month.isdigit() else names.index(month) if month in names else 0
    return f"{int(day)} {calendar.month_name[number]}" if 1 <= number <= 12 else None


def _labels(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
