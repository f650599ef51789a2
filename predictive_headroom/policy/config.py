"""The headroom policy: pydantic models for the YAML file users edit (Policy, Pool, Target, ...).

Each model checks its own fields and the rules that relate them; a rule that knows which
sub-field is wrong raises FieldProblem so the message can name it. `Target` (and the
CapacityBuffer API versions) lives in `policy.target`. Reading a file and reporting
every problem with its line lives in `policy.load`; the cron syntax in `policy.cron`.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from predictive_headroom.policy.budget import Budget, priced_problem
from predictive_headroom.policy.calendars import CALENDAR_PATTERN, check_calendar, country_codes
from predictive_headroom.policy.cpa import Ladder, Linear, Proportional, Step
from predictive_headroom.policy.cron import CRON_PATTERN, check_fires
from predictive_headroom.policy.disruption import Disruption
from predictive_headroom.policy.durations import DEFAULT_LEAD_TIME, Duration, LeadTime
from predictive_headroom.policy.errors import FieldProblem
from predictive_headroom.policy.events import (
    LocalTime,
    date_as_cron_problem,
    event_instant,
    gap_move,
    local_time,
    looks_like_date,
    window_shape_problems,
)
from predictive_headroom.policy.limits import Limits, fitting
from predictive_headroom.policy.model import Count, PolicyModel
from predictive_headroom.policy.placeholder import NodeMemoryQuantity, Placeholder
from predictive_headroom.policy.promql import check_promql
from predictive_headroom.policy.share import Share
from predictive_headroom.policy.shares import parse_share
from predictive_headroom.policy.target import DNS_LABEL, Target
from predictive_headroom.policy.units import LARGEST_BARE_CORES, cores_problem, parse_quantity
from predictive_headroom.policy.zones import check_zone, zone_names


def _min_max_message(lo: int, hi: int) -> str:
    return (
        f"minReplicas {lo} is greater than maxReplicas {hi}; raise maxReplicas or lower minReplicas"
    )


__all__ = [
    "CHECK_PROMQL",
    "Cost",
    "Disruption",
    "FieldProblem",
    "ForecastSpec",
    "Ladder",
    "Linear",
    "Policy",
    "Pool",
    "Proportional",
    "ScheduleWindow",
    "Share",
    "Step",
]

CHECK_PROMQL = "check_promql"
"""Validation context key: parse `forecast.query` as PromQL (set when a policy file is loaded)."""


_CRON = {"pattern": CRON_PATTERN, "description": "5-field cron or a descriptor such as @daily"}


class ScheduleWindow(PolicyModel):
    """A window of `desiredReplicas` placeholders, in one of two shapes: recurring, KEDA-cron style
    (open from a `start` firing until the next `end` firing, not opening on the public holidays of
    `skipHolidays`), or a dated event (`from`/`to`, once), in the window's `timezone`."""

    name: str = Field(min_length=1)
    timezone: str = Field(default="UTC", json_schema_extra={"enum": zone_names()})
    start: str | None = Field(default=None, json_schema_extra=_CRON)
    end: str | None = Field(default=None, json_schema_extra=_CRON)
    from_: LocalTime | None = Field(default=None, alias="from")
    to: LocalTime | None = None
    skip_holidays: str | None = Field(
        default=None,
        json_schema_extra={
            "pattern": CALENDAR_PATTERN,
            "description": "a public-holiday calendar such as DE or DE-BY: the window does not "
            "open on those days",
        },
    )
    desired_replicas: Count

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        return check_zone(value)

    @field_validator("start", "end")
    @classmethod
    def _valid_cron(cls, value: str | None, info: ValidationInfo) -> str | None:
        if looks_like_date(value):
            raise ValueError(date_as_cron_problem(str(info.field_name), str(value)))
        if value is not None:
            check_fires(value)
        return value

    @field_validator("from_", "to", mode="before")
    @classmethod
    def _local_time(cls, value: object, info: ValidationInfo) -> object:
        return local_time(value, end_of_day=info.field_name == "to")

    @field_validator("skip_holidays")
    @classmethod
    def _known_calendar(cls, value: str | None) -> str | None:
        return value if value is None else check_calendar(value)

    @model_validator(mode="after")
    def _shape(self) -> ScheduleWindow:
        given = {
            type(self).model_fields[n].alias or n
            for n in self.model_fields_set
            if getattr(self, n) is not None  # `from: null`, as model_dump writes it, is not given
        }
        for problem in window_shape_problems(given, self.start, self.end):
            raise FieldProblem(*problem)
        if self.dated:
            opens, closes = self.event_span()
            if closes <= opens:
                moved = [
                    m for m in (gap_move(t, self.timezone) for t in (self.from_, self.to)) if m
                ]
                raise FieldProblem(
                    "to",
                    f"to ({self.to}) is not after from ({self.from_}); an event needs to "
                    "end after it starts" + "".join(f"; {m}" for m in moved),
                )
        return self

    @property
    def dated(self) -> bool:
        """True for a dated event (`from`/`to`), False for a recurring window (`start`/`end`)."""
        return self.from_ is not None

    def event_span(self) -> tuple[float, float]:
        """A dated event's (opens, closes) as POSIX seconds: `from` and `to` read as wall-clock
        times in `timezone` (a time with its own UTC offset keeps it; one in a spring-forward gap
        moves to the gap's end, `policy.events.event_instant`)."""
        assert self.from_ is not None and self.to is not None, "event_span of a recurring window"
        return event_instant(self.from_, self.timezone), event_instant(self.to, self.timezone)


_PERCENT = r"^\s*[0-9]{1,2}(\.[0-9]+)?\s*%\s*$"
Quantile = Annotated[
    float,
    Field(gt=0, lt=1),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                {"type": "string", "pattern": _PERCENT},
            ],
            "description": "a quantile such as 0.95 or 95%",
        }
    ),
]
"""A quantile between 0 and 1, also written as a percentage (`95%`)."""


class ForecastSpec(PolicyModel):
    """Where demand comes from and how one placeholder relates to it."""

    enabled: bool = True
    query: str = Field(min_length=1, description="PromQL returning one series (checked on load)")
    demand_per_replica: float = Field(gt=0)
    history: Duration = timedelta(days=28)
    min_history: Duration = timedelta(hours=24)
    step: Duration = timedelta(minutes=5)
    horizon: Duration = timedelta(hours=48)
    interval_width: Quantile = 0.8
    burst_quantile: Quantile = 0.95
    reserve: Count = 0
    """Placeholders held on top of the plan (the forecast and the floors), for traffic the forecast
    cannot foresee; `protection:` sizes it per refit (set one or the other)."""
    burst_model: Literal["quantile", "profile"] = "quantile"
    """quantile: a conditional quantile model of lead-time growth, evaluated at every reconcile on
    the latest observations (the refit-time table is its fallback); profile: the table alone."""
    observation_delay: Duration = timedelta(seconds=60)
    """How late the newest sample is visible (scrape interval plus rule evaluation): the burst model
    at time t reads only samples at or before t minus this."""
    refit: str = Field(default="0 */6 * * *", json_schema_extra=_CRON)
    holidays: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")

    @field_validator("query")
    @classmethod
    def _valid_promql(cls, value: str, info: ValidationInfo) -> str:
        # Checked for policies read from files (`policy.load`); a spec built in code for a CSV
        # series (backtest, report) names its file here instead.
        return check_promql(value) if (info.context or {}).get(CHECK_PROMQL) else value

    @field_validator("refit")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return check_fires(value)

    @field_validator("holidays")
    @classmethod
    def _known_country(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if value not in country_codes():
            raise ValueError(
                f"no holiday calendar for country code {value!r}; use an ISO 3166 code such as US, DE, GB"
            )
        return value

    @field_validator("burst_quantile", "interval_width", mode="before")
    @classmethod
    def _share(cls, value: object) -> object:
        return parse_share(value, what="a quantile")

    @field_validator("step")
    @classmethod
    def _positive_step(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("step must be positive, e.g. 5m")
        return value


class QuotaSetting(StrEnum):
    """`quota:` on a pool: `respect` (the default) caps a Deployment target's placeholders at
    the room the namespace's ResourceQuotas leave them (`core.quota`); `ignore` turns it off."""

    RESPECT = "respect"
    IGNORE = "ignore"

    @property
    def enabled(self) -> bool:
        """Whether the quota cap is on."""
        return self == QuotaSetting.RESPECT


class Pool(PolicyModel):
    """One placeholder Deployment (one node pool) and the rules that size it."""

    name: str = Field(json_schema_extra={"pattern": DNS_LABEL.pattern})
    target: Target
    min_replicas: Count = 0
    max_replicas: Count
    lead_time: LeadTime = DEFAULT_LEAD_TIME
    scale_down_stabilization: Duration = timedelta(minutes=30)
    schedules: list[ScheduleWindow] = Field(default_factory=list)
    proportional: Proportional | None = None
    forecast: ForecastSpec | None = None
    placeholder: Placeholder = Field(default_factory=Placeholder)
    disruption: Disruption = Field(default_factory=Disruption)
    """Room for the pods of nodes on their way out (cordoned or tainted for removal) and, on spot
    capacity, a reserve for interruptions within the lead time (`policy.disruption`)."""
    share: Share = Field(default_factory=Share)
    """Headroom as a share of what the pool's pods request, e.g. {cpu: 10%} (`policy.share`)."""
    limits: Limits = Field(default_factory=Limits)
    """The most the placeholders may request in total, e.g. {cpu: 64, memory: 256Gi}: a cap on
    the plan, as a CapacityBuffer's spec.limits (`policy.limits`)."""
    budget: Budget | None = None
    """The most the headroom may hold a day: {perDay: 40 USD} or {nodeHoursPerDay: 50}
    (`policy.budget`)."""
    quota: QuotaSetting = QuotaSetting.RESPECT
    """`respect`: a Deployment target's placeholders stay within the room the namespace's
    ResourceQuotas leave them (the `quota` cap); `ignore`: not read."""
    protection: float | None = Field(
        default=None,
        gt=0,
        le=1,
        json_schema_extra={
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                {"type": "string", "pattern": r"^\s*(100|[1-9]?[0-9](\.[0-9]+)?)\s*%\s*$"},
                {"type": "null"},
            ]
        },
    )
    """Absorb at least this share (`95%` or 0.95) of the pod-minutes that would otherwise wait for
    a node: `predictive-headroom tune` picks the cheapest burst quantile and stabilisation window
    reaching it on the pool's own history. Instead of `forecast.burstQuantile`."""
    protection_fallback: Literal["none", "fixed"] = "none"
    """`fixed`: when the re-tune's ledger says the forecast did not keep `protection`, or did not
    beat a fixed N, over the days judged, hold the fewest fixed placeholders that kept it over the
    days read instead, until the forecast keeps it again (docs/promise.md). Needs `protection`."""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not DNS_LABEL.match(value):
            raise ValueError(
                f"pool name {value!r} must be a DNS label: at most 63 lower-case letters, digits "
                "and '-', starting and ending with a letter or digit (it names the placeholder "
                "Deployment), e.g. 'general' or 'gpu-spot'"
            )
        return value

    @field_validator("protection", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return value if value is None else parse_share(value, what="a protection")

    @model_validator(mode="after")
    def _check(self) -> Pool:
        if self.protection_fallback != "none" and self.protection is None:
            raise FieldProblem(
                "protectionFallback",
                "protectionFallback needs protection: add protection (e.g. 95%) or remove "
                "protectionFallback",
            )
        if self.protection is not None:
            if self.forecast is None:
                raise FieldProblem(
                    "protection",
                    "protection needs a forecast: add forecast (query, demandPerReplica)",
                )
            if "burst_quantile" in self.forecast.model_fields_set:
                raise FieldProblem(
                    "forecast.burstQuantile",
                    "set protection or forecast.burstQuantile, not both: protection chooses the "
                    "quantile (burstQuantile is for experts)",
                )
            if "reserve" in self.forecast.model_fields_set:
                raise FieldProblem(
                    "forecast.reserve",
                    "set protection or forecast.reserve, not both: protection sizes the reserve "
                    "at each refit",
                )
        if self.placeholder.existing and self.target.kind != "Deployment":
            raise FieldProblem(
                "placeholder.existing",
                f"existing: true adopts a placeholder Deployment, and the target is a "
                f"{self.target.kind}: remove placeholder.existing (a {self.target.kind} you "
                "create is used as it is) or point target at the Deployment",
            )
        requested = self.placeholder.amounts
        for resource in self.share.root:
            if resource not in requested:
                raise FieldProblem(
                    f"share.{resource}",
                    f"the placeholder does not request {resource}, so a share of it cannot be "
                    f"counted in placeholders: add placeholder.requests.{resource} or remove "
                    f"share.{resource}",
                )
        if self.min_replicas > self.max_replicas:
            raise FieldProblem(
                "minReplicas", _min_max_message(self.min_replicas, self.max_replicas)
            )
        self._check_limits(requested)
        seen: set[str] = set()
        for i, window in enumerate(self.schedules):
            if window.name in seen:
                raise FieldProblem(f"schedules[{i}].name", f"duplicate window name {window.name!r}")
            seen.add(window.name)
        return self

    def _check_limits(self, requested: dict[str, float]) -> None:
        """Every limit is on a resource the placeholder requests, and allows minReplicas."""
        for resource in self.limits.root:
            if resource not in requested:
                raise FieldProblem(
                    f"limits.{resource}",
                    f"the placeholder does not request {resource}, so a limit on it cannot be "
                    f"counted in placeholders: add placeholder.requests.{resource} or remove "
                    f"limits.{resource}",
                )
        fit = fitting(self.limits.amounts, requested)
        for resource, allowed in fit.items():
            if allowed < self.min_replicas:
                raise FieldProblem(
                    f"limits.{resource}",
                    f"limits.{resource} {self.limits.root[resource]} allows {allowed} "
                    f"placeholders (each requests {self.placeholder.requests[resource]}), fewer "
                    f"than minReplicas {self.min_replicas}; raise limits.{resource} or lower "
                    "minReplicas",
                )


class Cost(PolicyModel):
    """Prices, so every page and command shows what headroom costs (`core.price`: one price)."""

    cost_per_cpu_hour: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cost_per_gib_hour: float = Field(default=0.0, ge=0, alias="costPerGiBHour", allow_inf_nan=False)
    currency: str = "USD"
    node_hour_price: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Your provider's price for one node-hour (wins over the CPU and GiB prices)."""
    node_cpu: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, json_schema_extra={"maximum": LARGEST_BARE_CORES}
    )
    """The node's allocatable CPU cores (`predictive-headroom size` shows them)."""
    node_memory: NodeMemoryQuantity | None = None
    """The node's allocatable memory, a Kubernetes quantity such as 61Gi."""

    @field_validator("node_cpu")
    @classmethod
    def _cores(cls, value: float | None) -> float | None:
        problem = None if value is None else cores_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _shape(self) -> Cost:
        if (self.node_cpu is None) != (self.node_memory is None):
            given, missing = (
                ("nodeCpu", "nodeMemory") if self.node_memory is None else ("nodeMemory", "nodeCpu")
            )
            raise FieldProblem(
                missing, f"{given} is set without {missing}: give the node's shape as both"
            )
        return self

    @property
    def node_memory_gib(self) -> float | None:
        return None if self.node_memory is None else float(parse_quantity(self.node_memory)) / 2**30


class Policy(PolicyModel):
    """The whole headroom policy file."""

    pools: list[Pool] = Field(min_length=1)
    cost: Cost | None = None
    removed_pools: Literal["scaleToZero", "keep"] = Field(
        default="scaleToZero",
        description="what the daemon does with the placeholder of a pool that leaves this file: "
        "scaleToZero (after the pool's scaleDownStabilization) or keep (as it is, unmanaged)",
    )

    @model_validator(mode="after")
    def _unique(self) -> Policy:
        names: set[str] = set()
        targets: set[tuple[str, str, str]] = set()
        for i, pool in enumerate(self.pools):
            if pool.name in names:
                raise FieldProblem(f"pools[{i}].name", f"duplicate pool name {pool.name!r}")
            key = (pool.target.kind, pool.target.namespace, pool.target.name)
            if key in targets:
                raise FieldProblem(
                    f"pools[{i}].target",
                    f"target {key[1]}/{key[2]} is already used by another pool",
                )
            names.add(pool.name)
            targets.add(key)
            problem = None if pool.budget is None else priced_problem(pool.budget, self.cost)
            if problem:
                raise FieldProblem(f"pools[{i}].budget.perDay", problem)
        return self

    def pool(self, name: str) -> Pool:
        """Return the pool called `name` or raise KeyError naming the ones that exist."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool named {name!r}; pools: {', '.join(p.name for p in self.pools)}")
