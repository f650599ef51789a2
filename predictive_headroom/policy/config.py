"""The headroom policy: pydantic models for the YAML file users edit (Policy, Pool, Target, ...).

Each model checks its own fields and the rules that relate them; a rule that knows which
sub-field is wrong raises FieldProblem so the message can name it. `Target` (and the
CapacityBuffer API versions) lives in `policy.target`. Reading a file and reporting
every problem with its line lives in `policy.load`; the cron syntax in `policy.cron`.
"""

from __future__ import annotations

import difflib
from datetime import timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from kubernetes.utils import parse_quantity
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from predictive_headroom.policy.cron import cron_trigger
from predictive_headroom.policy.durations import Duration
from predictive_headroom.policy.target import DNS_LABEL, Target


class FieldProblem(ValueError):
    """A cross-field check that knows which sub-field is wrong (so the message can name it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _same_start_end_message(end: str) -> str:
    return f"end {end!r} equals start; a window needs different start and end times"


def _min_max_message(lo: int, hi: int) -> str:
    return (
        f"minReplicas {lo} is greater than maxReplicas {hi}; raise maxReplicas or lower minReplicas"
    )


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class ScheduleWindow(_Model):
    """A KEDA-cron style window: open from a `start` firing until the next `end` firing."""

    name: str = Field(min_length=1)
    timezone: str = "UTC"
    start: str
    end: str
    desired_replicas: int = Field(ge=0)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            close = difflib.get_close_matches(value, sorted(available_timezones()), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown IANA time zone {value!r}{hint} (e.g. 'Europe/Berlin')"
            ) from None
        return value

    @field_validator("start", "end")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        cron_trigger(value)
        return value

    @model_validator(mode="after")
    def _distinct(self) -> ScheduleWindow:
        if self.start.split() == self.end.split():
            raise FieldProblem("end", _same_start_end_message(self.end))
        return self


class Linear(_Model):
    """CPA linear mode: replicas = max(ceil(cores/coresPerReplica), ceil(nodes/nodesPerReplica))."""

    cores_per_replica: float | None = Field(default=None, gt=0)
    nodes_per_replica: float | None = Field(default=None, gt=0)
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)
    prevent_single_point_failure: bool = False
    include_unschedulable_nodes: bool = False

    @model_validator(mode="after")
    def _check(self) -> Linear:
        if self.cores_per_replica is None and self.nodes_per_replica is None:
            raise FieldProblem(
                "coresPerReplica", "set coresPerReplica or nodesPerReplica (or both)"
            )
        if self.max is not None and self.min > self.max:
            raise FieldProblem("min", f"min {self.min} is greater than max {self.max}")
        return self


Step = tuple[float, int]


class Ladder(_Model):
    """CPA ladder mode: the step with the largest threshold not above the value wins."""

    cores_to_replicas: list[Step] = Field(default_factory=list)
    nodes_to_replicas: list[Step] = Field(default_factory=list)
    include_unschedulable_nodes: bool = False

    @field_validator("cores_to_replicas", "nodes_to_replicas")
    @classmethod
    def _ascending(cls, steps: list[Step]) -> list[Step]:
        for i, (threshold, replicas) in enumerate(steps):
            if threshold < 0 or replicas < 0:
                raise ValueError(f"step {i} [{threshold:g}, {replicas}] has a negative number")
            if i and threshold <= steps[i - 1][0]:
                raise ValueError(
                    f"thresholds must be strictly ascending: step {i} threshold {threshold:g} "
                    f"is not above step {i - 1} threshold {steps[i - 1][0]:g}"
                )
        return steps

    @model_validator(mode="after")
    def _some(self) -> Ladder:
        if not self.cores_to_replicas and not self.nodes_to_replicas:
            raise FieldProblem(
                "coresToReplicas", "set coresToReplicas or nodesToReplicas (or both)"
            )
        return self


class Proportional(_Model):
    """Cluster-size floor, as cluster-proportional-autoscaler computes it (one of linear / ladder)."""

    linear: Linear | None = None
    ladder: Ladder | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_mode(self) -> Proportional:
        if (self.linear is None) == (self.ladder is None):
            raise FieldProblem("linear", "set exactly one of 'linear' or 'ladder'")
        return self

    @property
    def include_unschedulable_nodes(self) -> bool:
        mode = self.linear or self.ladder
        return bool(mode and mode.include_unschedulable_nodes)

    @property
    def label_selector(self) -> str:
        """The node label selector in Kubernetes' `k=v,k2=v2` form ('' selects all nodes)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.node_selector.items()))


class ForecastSpec(_Model):
    """Where demand comes from and how one placeholder relates to it."""

    enabled: bool = True
    query: str = Field(min_length=1)
    demand_per_replica: float = Field(gt=0)
    history: Duration = timedelta(days=28)
    min_history: Duration = timedelta(hours=24)
    step: Duration = timedelta(minutes=5)
    horizon: Duration = timedelta(hours=48)
    interval_width: float = Field(default=0.8, gt=0, lt=1)
    burst_quantile: float = Field(default=0.95, gt=0, lt=1)
    burst_model: Literal["quantile", "profile"] = "quantile"
    """quantile: a conditional quantile model of lead-time growth, evaluated at every reconcile on
    the latest observations (the refit-time table is its fallback); profile: the table alone."""
    observation_delay: Duration = timedelta(seconds=60)
    """How late the newest sample is visible (scrape interval plus rule evaluation): the burst model
    at time t reads only samples at or before t minus this."""
    refit: str = "0 */6 * * *"
    holidays: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")

    @field_validator("refit")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        cron_trigger(value)
        return value

    @field_validator("holidays")
    @classmethod
    def _known_country(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from holidays import list_supported_countries

        if value not in list_supported_countries():
            raise ValueError(
                f"no holiday calendar for country code {value!r}; use an ISO 3166 code such as US, DE, GB"
            )
        return value

    @field_validator("step")
    @classmethod
    def _positive_step(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("step must be positive, e.g. 5m")
        return value


class Resources(_Model):
    """What one placeholder pod requests (used to show the cost of headroom)."""

    cpu: str = "1"
    memory: str = "1Gi"

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        try:
            if parse_quantity(value) < 0:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"{value!r} is not a Kubernetes quantity such as '500m', '2', '1Gi'"
            ) from None
        return value

    @property
    def cpu_cores(self) -> float:
        return float(parse_quantity(self.cpu))

    @property
    def memory_gib(self) -> float:
        return float(parse_quantity(self.memory)) / 2**30


class Pool(_Model):
    """One placeholder Deployment (one node pool) and the rules that size it."""

    name: str = Field(pattern=DNS_LABEL.pattern)
    target: Target
    min_replicas: int = Field(default=0, ge=0)
    max_replicas: int = Field(ge=0)
    lead_time: Duration = timedelta(minutes=5)
    scale_down_stabilization: Duration = timedelta(minutes=30)
    schedules: list[ScheduleWindow] = Field(default_factory=list)
    proportional: Proportional | None = None
    forecast: ForecastSpec | None = None
    placeholder: Resources = Field(default_factory=Resources)
    protection: float | None = Field(default=None, gt=0, le=1)
    """Absorb at least this share (`95%` or 0.95) of the pod-minutes that would otherwise wait for
    a node: `predictive-headroom tune` picks the cheapest burst quantile and stabilisation window
    reaching it on the pool's own history. Instead of `forecast.burstQuantile`."""

    @field_validator("protection", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            try:
                return float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
            except ValueError:
                raise ValueError(f"{value!r} is not a protection; write it like 95%") from None
        return value

    @model_validator(mode="after")
    def _check(self) -> Pool:
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
        if self.min_replicas > self.max_replicas:
            raise FieldProblem(
                "minReplicas", _min_max_message(self.min_replicas, self.max_replicas)
            )
        seen: set[str] = set()
        for i, window in enumerate(self.schedules):
            if window.name in seen:
                raise FieldProblem(f"schedules[{i}].name", f"duplicate window name {window.name!r}")
            seen.add(window.name)
        return self


class Cost(_Model):
    """Prices used by the report to show what headroom costs."""

    cost_per_cpu_hour: float = Field(default=0.0, ge=0)
    cost_per_gib_hour: float = Field(default=0.0, ge=0, alias="costPerGiBHour")
    currency: str = "USD"


class Policy(_Model):
    """The whole headroom policy file."""

    pools: list[Pool] = Field(min_length=1)
    cost: Cost | None = None

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
        return self

    def pool(self, name: str) -> Pool:
        """Return the pool called `name` or raise KeyError naming the ones that exist."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool named {name!r}; pools: {', '.join(p.name for p in self.pools)}")
