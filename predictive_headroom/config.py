"""Configuration: the headroom policy (YAML, edited by users) and runtime settings (env `PH_*`).

Everything is validated at load time; `load_policy` reports every problem at once, each with the
field path, the line in the file, the bad value and what is expected.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import yaml
from apscheduler.triggers.cron import CronTrigger
from kubernetes.utils import parse_quantity
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, SettingsConfigDict

from predictive_headroom.durations import Duration

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class FieldProblem(ValueError):
    """A cross-field check that knows which sub-field is wrong (so the message can name it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _weekday_number(token: str) -> int:
    token = token.strip().lower()
    if token[:3] in _WEEKDAYS and not token.isdigit():
        return _WEEKDAYS.index(token[:3])
    day = int(token)
    if not 0 <= day <= 7:
        raise ValueError(f"day of week {day} is out of range 0-7")
    return day % 7


def _standard_day_of_week(field: str) -> str:
    """Cron's day-of-week field (0 or 7 = Sunday) as APScheduler 3 day names.

    APScheduler 3 numbers days from Monday = 0, so `1-5` would mean Tuesday to Saturday there;
    naming the days keeps the standard cron meaning users copy from KEDA.
    """
    days: set[int] = set()
    for part in field.split(","):
        rng, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step {step} in day of week must be at least 1")
        if rng == "*":
            lo, hi = 0, 6
        elif "-" in rng:
            a, b = rng.split("-", 1)
            lo, hi = _weekday_number(a), _weekday_number(b)
            if b.strip() == "7":
                hi = 7
            if hi < lo:
                raise ValueError(f"day-of-week range {rng!r} runs backwards")
        else:
            lo = hi = _weekday_number(rng)
            if step_text:
                hi = 6
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_WEEKDAYS[d] for d in sorted(days))


def cron_trigger(expression: str, tz: str = "UTC") -> CronTrigger:
    """Return APScheduler's trigger for a standard 5-field cron expression in time zone `tz`."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron expression {expression!r} has {len(fields)} fields; expected 5 "
            "(minute hour day-of-month month day-of-week), e.g. '0 8 * * 1-5'"
        )
    minute, hour, day, month, day_of_week = fields
    try:
        return CronTrigger(
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=_standard_day_of_week(day_of_week),
            timezone=ZoneInfo(tz),
        )
    except ValueError as exc:
        raise ValueError(f"invalid cron expression {expression!r}: {exc}") from None


def _same_start_end_message(end: str) -> str:
    return f"end {end!r} equals start; a window needs different start and end times"


def _min_max_message(lo: int, hi: int) -> str:
    return f"minReplicas {lo} is greater than maxReplicas {hi}; raise maxReplicas or lower minReplicas"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Target(_Model):
    """The object whose replica count the daemon sets."""

    kind: Literal["Deployment", "CapacityBuffer"] = "Deployment"
    namespace: str = Field(pattern=_DNS_LABEL.pattern, description="namespace of the target")
    name: str = Field(pattern=_DNS_SUBDOMAIN.pattern, description="name of the Deployment or CapacityBuffer")


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
            raise ValueError(f"unknown IANA time zone {value!r}{hint} (e.g. 'Europe/Berlin')") from None
        return value

    @field_validator("start", "end")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        cron_trigger(value)
        return value

    @model_validator(mode="after")
    def _distinct(self) -> "ScheduleWindow":
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
    def _check(self) -> "Linear":
        if self.cores_per_replica is None and self.nodes_per_replica is None:
            raise FieldProblem("coresPerReplica", "set coresPerReplica or nodesPerReplica (or both)")
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
    def _some(self) -> "Ladder":
        if not self.cores_to_replicas and not self.nodes_to_replicas:
            raise FieldProblem("coresToReplicas", "set coresToReplicas or nodesToReplicas (or both)")
        return self


class Proportional(_Model):
    """Cluster-size floor, as cluster-proportional-autoscaler computes it (one of linear / ladder)."""

    linear: Linear | None = None
    ladder: Ladder | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_mode(self) -> "Proportional":
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
            raise ValueError(f"no holiday calendar for country code {value!r}; use an ISO 3166 code such as US, DE, GB")
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
            raise ValueError(f"{value!r} is not a Kubernetes quantity such as '500m', '2', '1Gi'") from None
        return value

    @property
    def cpu_cores(self) -> float:
        return float(parse_quantity(self.cpu))

    @property
    def memory_gib(self) -> float:
        return float(parse_quantity(self.memory)) / 2**30


class Pool(_Model):
    """One placeholder Deployment (one node pool) and the rules that size it."""

    name: str = Field(pattern=_DNS_LABEL.pattern)
    target: Target
    min_replicas: int = Field(default=0, ge=0)
    max_replicas: int = Field(ge=0)
    lead_time: Duration = timedelta(minutes=5)
    scale_down_stabilization: Duration = timedelta(minutes=30)
    schedules: list[ScheduleWindow] = Field(default_factory=list)
    proportional: Proportional | None = None
    forecast: ForecastSpec | None = None
    placeholder: Resources = Field(default_factory=Resources)

    @model_validator(mode="after")
    def _check(self) -> "Pool":
        if self.min_replicas > self.max_replicas:
            raise FieldProblem("minReplicas", _min_max_message(self.min_replicas, self.max_replicas))
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
    def _unique(self) -> "Policy":
        names: set[str] = set()
        targets: set[tuple[str, str, str]] = set()
        for i, pool in enumerate(self.pools):
            if pool.name in names:
                raise FieldProblem(f"pools[{i}].name", f"duplicate pool name {pool.name!r}")
            key = (pool.target.kind, pool.target.namespace, pool.target.name)
            if key in targets:
                raise FieldProblem(f"pools[{i}].target", f"target {key[1]}/{key[2]} is already used by another pool")
            names.add(pool.name)
            targets.add(key)
        return self

    def pool(self, name: str) -> Pool:
        """Return the pool called `name` or raise KeyError naming the ones that exist."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool named {name!r}; pools: {', '.join(p.name for p in self.pools)}")


class Settings(BaseSettings):
    """Runtime settings from environment variables with the prefix `PH_` (e.g. `PH_PROMETHEUS_URL`)."""

    model_config = SettingsConfigDict(env_prefix="PH_", extra="ignore")

    prometheus_url: str | None = None
    prometheus_bearer_token_file: Path | None = None
    prometheus_username: str | None = None
    prometheus_password: SecretStr | None = None
    prometheus_headers: dict[str, str] = Field(default_factory=dict)
    prometheus_ca_file: Path | None = None
    prometheus_verify_tls: bool = True
    prometheus_timeout: float = Field(default=30.0, gt=0)
    prometheus_retries: int = Field(default=3, ge=0)
    namespace: str = "predictive-headroom"
    dry_run: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    listen_host: str = "0.0.0.0"
    listen_port: int = Field(default=8080, ge=0, le=65535)
    reconcile_interval: float = Field(default=60.0, gt=0)
    lease_name: str = "predictive-headroom"
    lease_duration: float = Field(default=15.0, gt=0)
    leader_election: bool = True
    report_dir: Path = Path("/tmp/predictive-headroom/reports")
    report_keep: int = Field(default=5, ge=1)


# ---------------------------------------------------------------------------------------------
# Loading with errors that say where.


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config file."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.path or '(top level)'}: {self.message}"


class ConfigError(Exception):
    """A config file that cannot be used; `problems` lists every problem found."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


def _format_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _line_index(node: yaml.Node | None, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each path in a composed YAML document to its 1-based line number."""
    index: dict[tuple[Any, ...], int] = {}
    if node is None:
        return index
    index[prefix] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = prefix + (key.value,)
            index.update(_line_index(value, path))
            index[path] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, prefix + (i,)))
    return index


def _nearest_line(index: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in index:
            return index[loc[:n]]
    return None


def _known_keys(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or name for name, f in model.model_fields.items())


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at `loc` (for 'did you mean' hints)."""
    model: Any = Policy
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        nxt = None
        for c in candidates:
            for inner in (c, *getattr(c, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    nxt = inner
        if nxt is None:
            return None
        model = nxt
    return model


def _problems_from(exc: ValidationError, index: dict[tuple[Any, ...], int]) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblem):
            sub = tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", cause.field) if p)
            loc = loc + sub
            message = str(cause)
        elif err["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            known = _known_keys(model) if model else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            message = f"unknown key {loc[-1]!r}{hint} (allowed: {', '.join(known)})" if known else "unknown key"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif "input" in err and not isinstance(err["input"], (dict, list)) and repr(err["input"]) not in message:
            message = f"{message} (got {err['input']!r})"
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    return problems


def parse_policy(text: str, source: str = "<config>") -> Policy:
    """Parse and validate policy YAML text; raise ConfigError listing every problem."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        what = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [Problem("", f"not valid YAML: {what}", line)]) from None
    if not isinstance(data, dict):
        raise ConfigError(source, [Problem("", "expected a mapping with a 'pools' list at the top level")])
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        index = _line_index(root)
        problems = _problems_from(exc, index)
        # Cross-field rules of parts that failed other checks did not run in pydantic; check them
        # on the raw data as well so one run reports every problem.
        for loc, message in _cross_field_problems(data):
            problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
        unique = list({(p.path, p.message): p for p in problems}.values())
        raise ConfigError(source, sorted(unique, key=lambda p: (p.line or 0, p.path))) from None


def _cross_field_problems(data: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """The rules that relate fields to each other, checked on raw YAML data (best effort)."""
    found: list[tuple[tuple[Any, ...], str]] = []
    pools = data.get("pools")
    if not isinstance(pools, list):
        return found
    names: dict[Any, int] = {}
    for i, pool in enumerate(pools):
        if not isinstance(pool, dict):
            continue
        name = pool.get("name")
        if isinstance(name, str) and name in names:
            found.append((("pools", i, "name"), f"duplicate pool name {name!r}"))
        names.setdefault(name, i)
        lo, hi = pool.get("minReplicas", 0), pool.get("maxReplicas")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            found.append((("pools", i, "minReplicas"), _min_max_message(lo, hi)))
        windows = pool.get("schedules")
        if not isinstance(windows, list):
            continue
        seen: set[str] = set()
        for j, window in enumerate(windows):
            if not isinstance(window, dict):
                continue
            start, end, wname = window.get("start"), window.get("end"), window.get("name")
            if isinstance(start, str) and isinstance(end, str) and start.split() == end.split():
                found.append((("pools", i, "schedules", j, "end"), _same_start_end_message(end)))
            if isinstance(wname, str) and wname in seen:
                found.append((("pools", i, "schedules", j, "name"), f"duplicate window name {wname!r}"))
            seen.add(wname) if isinstance(wname, str) else None
    return found


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; raise ConfigError (with every problem) when it is unusable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(p), [Problem("", "file not found; pass the path of a policy YAML file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(p), [Problem("", f"cannot read file: {exc}")]) from None
    return parse_policy(text, str(p))
