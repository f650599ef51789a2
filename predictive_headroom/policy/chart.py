"""The Helm chart's values, described by the policy's own models.

A chart pool is a policy pool whose `target` may be left out (the chart fills in the placeholder
Deployment it creates); the chart copies every pool into the daemon's policy file as it is. So
`values_schema()` generates the chart's `values.schema.json` from the pydantic models (plus the
chart-only settings in `chart_values.base.json`), and `values_problems()` checks a values file
with those same models, every problem with its line and field path.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import json
import math
import re
from functools import cache
from importlib.resources import files
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from predictive_headroom.policy.chart_security import security_problems
from predictive_headroom.policy.config import Cost, Policy, Pool
from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.load import Problem, _format_path, _nearest_line, policy_problems
from predictive_headroom.policy.target import DNS_LABEL, DNS_SUBDOMAIN, REFUSED_NAMESPACES, Target

CHART_NAME = "predictive-headroom"
POLICY_KEYS = ("pools", "cost", "removedPools")
"""The values the chart copies into the policy file; the policy's own models check them."""
DEFAULT_RELEASE = "predictive-headroom"
DEFAULT_NAMESPACE = "predictive-headroom"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

# Pool keys of chart versions before the pool schema was the policy's, and where they went.
MOVED = {
    "resources": "placeholder.requests",
    "policy": "the pool itself (leadTime, schedules, proportional, forecast are pool fields)",
    "targetName": "target.name",
    "namespace": "target.namespace",
    "kind": "target.kind",
    "apiVersion": "target.apiVersion",
    "nodeSelector": "placeholder.nodeSelector",
    "tolerations": "placeholder.tolerations",
    "affinity": "placeholder.affinity",
    "spread": "placeholder.spread",
}


class ChartTarget(Target):
    """A pool's target in the chart: every field optional (the chart's placeholder by default)."""

    namespace: str | None = Field(
        default=None, pattern=DNS_LABEL.pattern, description="default: the release namespace"
    )
    name: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN.pattern,
        description="default: <release fullname>-placeholder-<pool name>",
    )


class ChartPool(Pool):
    """A pool in the chart's values: a policy pool whose target may be left out."""

    target: ChartTarget = Field(default_factory=ChartTarget)  # type: ignore[assignment]


class ChartPolicy(BaseModel):
    """The part of the chart's values that becomes the daemon's policy file."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, allow_inf_nan=False)

    pools: list[ChartPool] = Field(min_length=1)
    cost: Cost | None = None
    removed_pools: Literal["scaleToZero", "keep"] = Field(
        default="scaleToZero", description=Policy.model_fields["removed_pools"].description
    )


def fullname(release: str) -> str:
    """The chart's `ph.fullname`: the release name, or `<release>-predictive-headroom`."""
    name = release if CHART_NAME in release else f"{release}-{CHART_NAME}"
    return name[:63].rstrip("-")


def default_target_name(release: str, pool: str) -> str:
    """The placeholder Deployment the chart creates for `pool`."""
    return f"{fullname(release)}-placeholder-{pool}"[:63].rstrip("-")


def values_to_policy(values: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """The policy file the chart renders from `values` (targets filled in as the chart does)."""
    given = values.get("pools")
    if not isinstance(given, list):  # the policy's own check names what is wrong
        return {
            "pools": given,
            **({"cost": values["cost"]} if values.get("cost") else {}),
            **({"removedPools": values["removedPools"]} if "removedPools" in values else {}),
        }
    pools = []
    for pool in given:
        if not isinstance(pool, dict) or not isinstance(pool.get("target", {}), dict | None):
            pools.append(pool)
            continue
        target = dict(pool.get("target") or {})
        target.setdefault("kind", "Deployment")
        target["namespace"] = target.get("namespace") or namespace
        target["name"] = target.get("name") or default_target_name(release, str(pool.get("name")))
        pools.append({**pool, "target": target})
    policy: dict[str, Any] = {"pools": pools}
    if values.get("cost") is not None:
        policy["cost"] = values["cost"]
    if values.get("removedPools") is not None:
        policy["removedPools"] = values["removedPools"]
    return policy


@cache
def values_schema() -> dict[str, Any]:
    """The chart's values.schema.json: chart-only settings plus the pools generated from the
    policy models, in JSON schema draft-07 (what Helm's validator reads)."""
    base = json.loads(files(__package__).joinpath("chart_values.base.json").read_text())
    generated = _draft07(ChartPolicy.model_json_schema(by_alias=True))
    schema = {"$schema": DRAFT_07, **base}
    schema["properties"] = {**base["properties"], **generated["properties"]}
    schema["$defs"] = generated["$defs"]
    return schema


def _draft07(node: Any) -> Any:
    """pydantic's JSON schema (2020-12) in draft-07 terms, without titles."""
    if isinstance(node, list):
        return [_draft07(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _draft07(v) for k, v in node.items() if k != "title"}
    if "prefixItems" in out:  # a fixed-length tuple, e.g. a ladder step [threshold, replicas]
        out["items"] = out.pop("prefixItems")
        out["additionalItems"] = False
    return out


def values_problems(
    values: dict[str, Any], index: dict[tuple[Any, ...], int], release: str, namespace: str
) -> list[Problem]:
    """Every problem of a chart values file: chart settings against the schema, pools and cost
    with the policy's own models (the same checks the daemon makes at start)."""
    import jsonschema

    # A values file overrides the chart's defaults key by key, so what the schema requires may
    # come from values.yaml: check what is given, not what is left out (Helm checks the merge).
    schema = _optional(copy.deepcopy(values_schema()))
    for key in POLICY_KEYS:
        schema["properties"].pop(key)
    validator = jsonschema.Draft7Validator(schema)
    problems = []
    for err in validator.iter_errors({k: v for k, v in values.items() if k not in POLICY_KEYS}):
        loc = tuple(err.absolute_path)
        if err.validator == "additionalProperties":
            problems += _unknown_keys(err.instance, err.schema, loc, index)
            continue
        if err.validator == "pattern" and loc[:-1] in CIDR_LISTS:
            continue  # parsed with ipaddress below, which says what to write
        message = cut(err.message, 300)
        if err.validator == "not":
            message = f"{err.instance!r} is not allowed here"
        if isinstance(err.schema, dict) and err.schema.get("description"):
            message += f" ({err.schema['description']})"
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    problems += _priority_problems(values, index)
    problems += _cidr_problems(values, index)
    problems += security_problems(values, index)
    problems += _non_finite_problems(
        {k: v for k, v in values.items() if k not in POLICY_KEYS}, index
    )
    if "pools" in values:
        problems += [
            _with_hint(p)
            for p in policy_problems(values_to_policy(values, release, namespace), index)
        ]
        problems += _namespace_problems(values, index, namespace)
        problems += _existing_problems(values, index)
    return problems


def _existing_problems(values: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """A problem for each pool whose placeholder is declared existing without `target.name`: the
    chart would fill in the name of the placeholder it creates, which is not the one to adopt
    (the chart refuses to render it, with the same words)."""
    problems = []
    pools = values.get("pools")
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        if not isinstance(pool, dict) or not isinstance(pool.get("placeholder"), dict):
            continue
        target = pool.get("target")
        if pool["placeholder"].get("existing") is not True or (
            isinstance(target, dict) and target.get("name")
        ):
            continue
        loc = ("pools", i, "placeholder", "existing")
        problems.append(Problem(_format_path(loc), EXISTING_NEEDS_NAME, _nearest_line(index, loc)))
    return problems


EXISTING_NEEDS_NAME = (
    "existing: true needs target.name: the name of the Deployment to adopt (left out, the "
    "target is the Deployment the chart would create)"
)


def _namespace_problems(
    values: dict[str, Any], index: dict[tuple[Any, ...], int], namespace: str
) -> list[Problem]:
    """A problem for each pool whose target is outside the release namespace and
    `allowedNamespaces` (the chart refuses to render it, with the same words). kube-system is
    refused by the policy's own check."""
    extra = values.get("allowedNamespaces")
    allowed = (
        [namespace, *(n for n in extra if isinstance(n, str))]
        if isinstance(extra, list)
        else [namespace]
    )
    problems = []
    pools = values.get("pools")
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        target = pool.get("target") if isinstance(pool, dict) else None
        ns = target.get("namespace") if isinstance(target, dict) else None
        if not isinstance(ns, str) or ns in allowed or ns in REFUSED_NAMESPACES:
            continue
        loc = ("pools", i, "target", "namespace")
        message = (
            f"{ns!r} is not in allowedNamespaces (allowed: {', '.join(allowed)}, the release "
            "namespace first); add it to allowedNamespaces to let the chart grant the daemon "
            "rights there"
        )
        problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    return problems


def _unknown_keys(
    instance: dict[str, Any],
    schema: dict[str, Any],
    loc: tuple[Any, ...],
    index: dict[tuple[Any, ...], int],
) -> list[Problem]:
    """One problem per key the schema does not know, on the key's own line, with the nearest
    known key as "did you mean" (as a policy file's unknown keys get)."""
    known = sorted(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    problems = []
    for key in instance:
        if key in known or any(p.search(key) for p in patterns):
            continue
        close = difflib.get_close_matches(key, known, n=1) or [
            k for k in known if k.lower() == key.lower()
        ]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        where = (*loc, key)
        message = f"unknown key {key!r}{hint} (allowed: {', '.join(known)})"
        problems.append(Problem(_format_path(where), message, _nearest_line(index, where)))
    return problems


# Where a values file names IP blocks: plain CIDR lists, and NetworkPolicy peers' ipBlock.
CIDR_LISTS = (("networkPolicy", "apiServer", "cidrs"),)
PEER_LISTS = (("networkPolicy", "ingressFrom"), ("networkPolicy", "prometheus", "to"))


def cidr_problem(text: Any) -> str | None:
    """What is wrong with `text` as a CIDR block (None: it is one), in words that say the fix."""
    if not isinstance(text, str):
        return f"expected a CIDR block such as 10.0.0.0/24, got {text!r}"
    if "/" not in text:
        try:
            address = ipaddress.ip_address(text.strip())
        except ValueError:
            return f"{text!r} is not a CIDR block such as 10.0.0.0/24 or fd00::/64"
        return (
            f"{text!r} is an address, not a CIDR block: write {address}/{address.max_prefixlen} "
            "for that one address, or the block it belongs to (e.g. 10.0.0.0/24)"
        )
    try:
        ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        if "host bits set" in str(exc):
            block = ipaddress.ip_network(text.strip(), strict=False)
            return f"{text!r} has host bits set: the block is {block} (write that)"
        return f"{text!r} is not a CIDR block such as 10.0.0.0/24: {exc}"
    return None


def _non_finite_problems(
    values: Any, index: dict[tuple[Any, ...], int], loc: tuple[Any, ...] = ()
) -> list[Problem]:
    """A NaN or infinity anywhere in the chart settings (YAML `.nan`, `.inf`): a JSON schema's
    number type and bounds let it through, since NaN fails no comparison."""
    if isinstance(values, float) and not math.isfinite(values):
        message = f"{values!r} is not a finite number; write a number"
        return [Problem(_format_path(loc), message, _nearest_line(index, loc))]
    if isinstance(values, dict):
        items: Any = values.items()
    elif isinstance(values, list):
        items = enumerate(values)
    else:
        return []
    return [p for key, v in items for p in _non_finite_problems(v, index, (*loc, key))]


def _cidr_problems(values: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """Every IP block in the values parsed with `ipaddress`: a bare address, host bits set or
    a typo is named with the block to write."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    for path in CIDR_LISTS:
        found += [((*path, i), c) for i, c in enumerate(_at(values, path) or [])]
    for path in PEER_LISTS:
        for i, peer in enumerate(_at(values, path) or []):
            block = peer.get("ipBlock") if isinstance(peer, dict) else None
            if isinstance(block, dict):
                found.append(((*path, i, "ipBlock", "cidr"), block.get("cidr")))
                found += [
                    ((*path, i, "ipBlock", "except", j), c)
                    for j, c in enumerate(block.get("except") or [])
                ]
    problems = []
    for loc, text in found:
        message = cidr_problem(text)
        if message:
            problems.append(Problem(_format_path(loc), message, _nearest_line(index, loc)))
    return problems


def _at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, list) else None


def _priority_problems(values: dict[str, Any], index: dict[tuple[Any, ...], int]) -> list[Problem]:
    """The template's checks: an existing class is named, and the placeholders' priority is not
    below the autoscaler's cutoff."""
    given = values.get("priorityClass")
    if not isinstance(given, dict):
        return []
    if given.get("create") is False and not given.get("name"):
        loc = ("priorityClass", "name")
        message = (
            "with priorityClass.create: false, name the existing PriorityClass the placeholder "
            "pods use (e.g. overprovisioning, the cluster-overprovisioner chart's)"
        )
        return [Problem(_format_path(loc), message, _nearest_line(index, loc))]
    value, cutoff = given.get("value", -1), given.get("expendablePodsPriorityCutoff", -10)
    if not (isinstance(value, int) and isinstance(cutoff, int)) or value >= cutoff:
        return []
    loc = ("priorityClass", "value")
    message = (
        f"{value} is below Cluster Autoscaler's --expendable-pods-priority-cutoff {cutoff}: it "
        "would add no nodes for evicted placeholders; raise the value or set "
        "priorityClass.expendablePodsPriorityCutoff to your autoscaler's flag"
    )
    return [Problem(_format_path(loc), message, _nearest_line(index, loc))]


def _optional(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _optional(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_optional(n) for n in node]
    return node


def _with_hint(problem: Problem) -> Problem:
    key = problem.path.rpartition(".")[2]
    if "unknown key" in problem.message and key in MOVED and problem.path.count(".") == 1:
        return Problem(
            problem.path, f"{key} moved to {MOVED[key]} (see deploy/README.md)", problem.line
        )
    return problem


def main() -> None:
    """Print the chart's values.schema.json (`python -m predictive_headroom.policy.chart`)."""
    print(json.dumps(values_schema(), indent=2))


if __name__ == "__main__":
    main()
