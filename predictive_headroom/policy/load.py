"""Loading the policy file with errors that say where.

`load_policy` / `parse_policy` report every problem at once, each with the line in the file, the
field path, the bad value and what is expected, with a "did you mean" hint for misspelt keys.
Cross-field rules are also checked on the raw YAML, so parts that failed other checks still
get them reported in the same run.
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from predictive_headroom.policy.bounded_yaml import YamlLimit, compose_bounded, size_problem
from predictive_headroom.policy.config import (
    CHECK_PROMQL,
    FieldProblem,
    Policy,
    _min_max_message,
)
from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.events import window_shape_problems


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
        if part == "[key]":
            continue
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
            path = (*prefix, key.value)
            index.update(_line_index(value, path))
            index[path] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*prefix, i)))
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


def _misspelt_required(errors: list[Any]) -> set[tuple[Any, ...]]:
    """The paths of required fields reported missing that an unknown key beside them misspells
    (`desiredReplica` for `desiredReplicas`): the unknown key's did-you-mean says it, once."""
    missing = {tuple(e["loc"]) for e in errors if e["type"] == "missing"}
    found = set()
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] != "extra_forbidden" or not loc:
            continue
        model = _model_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), _known_keys(model) if model else [], n=1)
        if close and (*loc[:-1], close[0]) in missing:
            found.add((*loc[:-1], close[0]))
    return found


def _problems_from(exc: ValidationError, index: dict[tuple[Any, ...], int]) -> list[Problem]:
    problems = []
    errors = exc.errors()
    misspelt = _misspelt_required(errors)
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "missing" and loc in misspelt:
            continue
        message = err["msg"].removeprefix("Value error, ")
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblem):
            sub = tuple(
                int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", cause.field) if p
            )
            loc = loc + sub
            message = str(cause)
        elif err["type"] == "extra_forbidden":
            message = _misplaced(loc) or _belongs_below(loc) or _beside(loc) or _unknown(loc)
        elif err["type"] == "missing":
            message = "required field is missing"
        elif (
            "input" in err
            and not isinstance(err["input"], (dict, list))
            and repr(err["input"]) not in message
            and str(err["input"]) not in message
        ):
            message = f"{message} (got {cut(repr(err['input']))})"
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    return problems


def _unknown(loc: tuple[Any, ...]) -> str:
    """An unknown key's message: the keys allowed there, and the closest one when it looks misspelt."""
    model = _model_at(loc[:-1])
    known = _known_keys(model) if model else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown key {cut(repr(loc[-1]))}{hint} (allowed: {', '.join(known)})"
        if known
        else "unknown key"
    )


def _misplaced(loc: tuple[Any, ...]) -> str | None:
    """For a key unknown at `loc` but known on a mapping above it (`protection` written under
    `forecast`, where it belongs on the pool), where it belongs; None when it is known nowhere up."""
    key, parent = loc[-1], loc[-2] if len(loc) > 1 else None
    for n in range(len(loc) - 2, -1, -1):
        model = _model_at(loc[:n])
        if model is None or str(key) not in _known_keys(model):
            continue
        above = loc[:n]
        where = (
            "the pool"
            if len(above) >= 2 and above[-2] == "pools" and isinstance(above[-1], int)
            else _format_path(above) or "the top level"
        )
        up = sum(1 for part in loc[n:-1] if not isinstance(part, int))
        return (
            f"unknown key {cut(repr(key))} here: it belongs on {where} ({_format_path((*above, key))}), "
            f"not under {parent}; move it up {'one level' if up == 1 else f'{up} levels'}"
        )
    return None


def _belongs_below(loc: tuple[Any, ...]) -> str | None:
    """For a key unknown at `loc` but known on a mapping below it (`skipHolidays` on the pool,
    where it belongs on a schedule window), where it goes; None when it is known nowhere below."""
    key, model = str(loc[-1]), _model_at(loc[:-1])
    queue: list[tuple[type[BaseModel], tuple[str, ...]]] = [(model, ())] if model else []
    while queue:
        current, below = queue.pop(0)
        for name, field in current.model_fields.items():
            alias, many = field.alias or name, get_origin(field.annotation) is list
            step = f"{alias}[]" if many else alias
            for sub in _submodels(field.annotation):
                if key in _known_keys(sub):
                    where = ".".join((_format_path(loc[:-1]), *below, step, key))
                    into = f"each of the {alias} it applies to" if many else alias
                    return f"unknown key {key!r} here: it belongs under {alias} ({where}); move it into {into}"
                if len(below) < 2:
                    queue.append((sub, (*below, step)))
    return None


def _beside(loc: tuple[Any, ...]) -> str | None:
    """For a key unknown inside a pool's section but known elsewhere in the pool
    (`skipHolidays` under forecast), where it goes; None otherwise."""
    if len(loc) > 3 and loc[0] == "pools" and isinstance(loc[1], int):
        return _belongs_below((*loc[:2], loc[-1]))
    return None


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds (`list[Window] | None` holds Window)."""
    found = []
    for inner in (annotation, *get_args(annotation)):
        for sub in (inner, *get_args(inner)):
            if isinstance(sub, type) and issubclass(sub, BaseModel) and sub not in found:
                found.append(sub)
    return found


def _window_shapes_only(problems: list[Problem], data: dict[str, Any]) -> list[Problem]:
    """`problems` without those of the start/end/from/to values of a window that mixes recurring
    and dated keys: the message that fixes the window is its shape's (a date under `end` is not a
    cron because it belongs under `to`)."""
    pools = data.get("pools")
    drop: set[str] = set()
    keep: set[tuple[str, str]] = set()
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        windows = pool.get("schedules") if isinstance(pool, dict) else None
        for j, window in enumerate(windows if isinstance(windows, list) else []):
            given = (
                {str(k) for k, v in window.items() if v is not None}
                if isinstance(window, dict)
                else set()
            )
            if not (given & {"start", "end"} and given & {"from", "to"}):
                continue
            at = f"pools[{i}].schedules[{j}]"
            drop |= {f"{at}.{k}" for k in ("start", "end", "from", "to")}
            keep |= {
                (f"{at}.{key}", message)
                for key, message in window_shape_problems(
                    given, window.get("start"), window.get("end")
                )
            }
    return [p for p in problems if p.path not in drop or (p.path, p.message) in keep]


def read_yaml(text: str, source: str) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    """The YAML mapping in `text` and the line of every path in it; ConfigError when it is not one."""
    try:
        data, root = compose_bounded(text)
    except YamlLimit as exc:
        raise ConfigError(
            source, [Problem(_format_path(exc.path), exc.message, exc.line)]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        what = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [Problem("", f"not valid YAML: {what}", line)]) from None
    if not isinstance(data, dict):
        raise ConfigError(
            source, [Problem("", "expected a mapping with a 'pools' list at the top level")]
        )
    return data, _line_index(root)


def policy_problems(data: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """Every problem of the policy `data` (none: it is valid), each with its line from `index`."""
    try:
        validate_policy(data)
    except ValidationError as exc:
        problems = _problems_from(exc, index)
        # Cross-field rules of parts that failed other checks did not run in pydantic; check them
        # on the raw data as well so one run reports every problem.
        for loc, message in _cross_field_problems(data):
            problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
        problems = _window_shapes_only(problems, data)
        return list({(p.path, p.message): p for p in problems}.values())
    return []


def parse_policy(text: str, source: str = "<config>") -> Policy:
    """Parse and validate policy YAML text; raise ConfigError listing every problem."""
    data, index = read_yaml(text, source)
    problems = policy_problems(data, index)
    if problems:
        raise ConfigError(source, sorted(problems, key=lambda p: (p.line or 0, p.path)))
    return validate_policy(data)


def validate_policy(data: dict[str, Any]) -> Policy:
    """The Policy in `data`, with every check a policy file gets (PromQL included)."""
    return Policy.model_validate(data, context={CHECK_PROMQL: True})


def _cross_field_problems(data: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """The rules that relate fields to each other, checked on raw YAML data (best effort)."""
    found: list[tuple[tuple[Any, ...], str]] = []
    pools = data.get("pools")
    if not isinstance(pools, list):
        return found
    names: dict[str, int] = {}
    for i, pool in enumerate(pools):
        if not isinstance(pool, dict):
            continue
        name = pool.get("name")
        if isinstance(name, str) and name in names:
            found.append((("pools", i, "name"), f"duplicate pool name {cut(repr(name))}"))
        if isinstance(name, str):
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
            wname = window.get("name")
            for key, message in window_shape_problems(
                {str(k) for k, v in window.items() if v is not None},
                window.get("start"),
                window.get("end"),
            ):
                found.append((("pools", i, "schedules", j, key), message))
            if isinstance(wname, str) and wname in seen:
                found.append(
                    (
                        ("pools", i, "schedules", j, "name"),
                        f"duplicate window name {cut(repr(wname))}",
                    )
                )
            seen.add(wname) if isinstance(wname, str) else None
    return found


def read_config_text(path: str) -> str:
    """The text of a policy or Helm values file (`-`: standard input); ConfigError saying what
    when it cannot be read."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ConfigError(
            path, [Problem("", "file not found; pass a policy or values file")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [Problem("", f"cannot read file: {exc}")]) from None


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; raise ConfigError (with every problem) when it is unusable."""
    p = Path(path)
    try:
        if problem := size_problem(p.stat().st_size):
            raise ConfigError(str(p), [Problem("", problem)])
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            str(p), [Problem("", "file not found; pass the path of a policy YAML file")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(p), [Problem("", f"cannot read file: {exc}")]) from None
    return parse_policy(text, str(p))
