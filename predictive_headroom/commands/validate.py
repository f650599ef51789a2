"""`predictive-headroom validate FILE...`: check policy files and Helm values files, naming every
problem (line, field path, bad value, what is expected)."""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from typing import Any

from predictive_headroom.core.spend import policy_spend
from predictive_headroom.policy.chart import (
    DEFAULT_NAMESPACE,
    DEFAULT_RELEASE,
    values_problems,
    values_schema,
    values_to_policy,
)
from predictive_headroom.policy.chart import (
    POLICY_KEYS as CHART_POLICY_KEYS,
)
from predictive_headroom.policy.chart_security import security_findings
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.lint import Finding, Level, policy_findings
from predictive_headroom.policy.load import (
    ConfigError,
    Problem,
    policy_problems,
    read_config_text,
    read_yaml,
    validate_policy,
)
from predictive_headroom.policy.target import adopt_command

HELP = (
    "check policy files or Helm values files (- reads stdin); exit 2 with every problem "
    "(line, field path, bad value, what is expected)"
)
POLICY_KEYS = set(CHART_POLICY_KEYS)
EXAMPLE = (
    "predictive-headroom validate config/example.yaml my-values.yaml   # a policy and a Helm values file\n"
    "helm get values predictive-headroom -n predictive-headroom -o yaml | predictive-headroom validate --values -"
)
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="policy or Helm values YAML file(s); - for stdin"
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--values",
        dest="kind",
        action="store_const",
        const="values",
        help="read every FILE as the chart's Helm values (default: told from its keys, and "
        "validate says which it assumed)",
    )
    kind.add_argument(
        "--policy", dest="kind", action="store_const", const="policy", help="read as policy files"
    )
    parser.add_argument(
        "--release",
        default=DEFAULT_RELEASE,
        help=f"Helm release name, for the target names the chart fills in (default {DEFAULT_RELEASE})",
    )
    parser.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"release namespace, for the targets the chart fills in (default {DEFAULT_NAMESPACE})",
    )


def detect_kind(data: dict[str, Any]) -> tuple[str, str]:
    """Which file `data` is, `values` or `policy`, and why, from its top-level keys: a key of the
    chart's own settings (or one close to it, a typo such as `dryrun`) makes it Helm values;
    otherwise it is a policy (whose keys are `pools`, `cost` and `removedPools`)."""
    chart_keys = sorted(set(values_schema()["properties"]) - POLICY_KEYS)
    lowered = {k.lower(): k for k in chart_keys}
    seen = []
    for key in map(str, data):
        if key in chart_keys:
            seen.append(key)
        elif key.lower() in lowered or difflib.get_close_matches(key, chart_keys, n=1, cutoff=0.8):
            near = (
                lowered.get(key.lower())
                or difflib.get_close_matches(key, chart_keys, n=1, cutoff=0.8)[0]
            )
            seen.append(f"{key} (like {near})")
    if seen:
        return "values", f"it has Helm values keys ({_few(seen)}); --policy to read it as a policy"
    keys = _few(list(map(str, data))) or "none"
    return (
        "policy",
        f"its keys ({keys}) are none of the chart's settings; --values to read it as Helm values",
    )


def _few(items: list[str], n: int = 4) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def load_any(
    text: str, source: str, kind: str | None, release: str, namespace: str
) -> tuple[Policy | None, bool]:
    """The policy in a policy file or a Helm values file (None: values without pools, the chart's
    default applies) and whether it was a values file (`kind` None: told by `detect_kind`);
    ConfigError with every problem if not valid."""
    data, index = read_yaml(text, source)
    is_values = (kind or detect_kind(data)[0]) == "values"
    if is_values:
        problems = values_problems(data, index, release, namespace)
        policy: dict[str, Any] = values_to_policy(data, release, namespace)
    else:
        problems = [_hint_values(p, kind) for p in policy_problems(data, index)]
        policy = data
    if problems:
        raise ConfigError(source, sorted(problems, key=lambda p: (p.line or 0, p.path)))
    if is_values and "pools" not in data:
        return None, True
    return validate_policy(policy), is_values


def utc_notes(policy: Policy) -> list[str]:
    """A note for each schedule window without `timezone`: its times are UTC, where KEDA's cron
    scaler would refuse the trigger."""
    return [
        f"pools[{i}].schedules[{j}] ({window.name}) has no timezone, so its times are UTC "
        "(KEDA's cron scaler refuses a window without one); write timezone: UTC to say so, "
        "or your zone, e.g. Europe/Berlin"
        for i, pool in enumerate(policy.pools)
        for j, window in enumerate(pool.schedules)
        if "timezone" not in window.model_fields_set
    ]


def adoption_notes(policy: Policy) -> list[str]:
    """For each pool whose placeholder is declared existing, the label to put on that Deployment:
    without it the daemon refuses to write it."""
    return [
        f"pools[{i}] ({pool.name}) adopts the existing Deployment {pool.target.namespace}/"
        f"{pool.target.name}; label it so the daemon may scale it: {adopt_command(pool.target, pool.name)}"
        for i, pool in enumerate(policy.pools)
        if pool.placeholder.existing
    ]


def budget_beside_protection(policy: Policy) -> list[Finding]:
    """A note per pool that sets both `protection:` and `budget:`: where the budget cannot buy
    the protection, the budget wins, and the daemon says what it kept."""
    return [
        Finding(
            f"pools[{i}]",
            f"protection: {100 * pool.protection:g}% within a budget: where the budget cannot buy "
            "it, the daemon holds the most protection the budget bought on the history and says "
            "what it kept (`predictive-headroom tune` shows it before)",
            Level.NOTE,
        )
        for i, pool in enumerate(policy.pools)
        if pool.protection is not None and pool.budget is not None
    ]


def check(text: str, source: str, kind: str | None, release: str, namespace: str) -> str:
    """Validate one file; return the lines to print when it is fine (with notes on how it was
    read and defaults worth knowing), raise ConfigError if not (the kind's note on stderr)."""
    notes = []
    if kind is None:
        assumed, why = detect_kind(read_yaml(text, source)[0])
        notes.append(f"read as a {'Helm values' if assumed == 'values' else 'policy'} file: {why}")
    try:
        parsed, is_values = load_any(text, source, kind, release, namespace)
    except ConfigError:
        for note in notes:
            print(f"{source}: note: {note}", file=sys.stderr)
        raise
    findings: list[Finding] = security_findings(read_yaml(text, source)[0]) if is_values else []
    if parsed is None:
        ok = f"{source}: ok: Helm values without pools (the chart's default pool applies)"
    else:
        notes += utc_notes(parsed) + adoption_notes(parsed)
        findings += policy_findings(parsed, time.time()) + policy_spend(parsed)
        findings += budget_beside_protection(parsed)
        windows = sum(len(p.schedules) for p in parsed.pools)
        events = sum(1 for p in parsed.pools for w in p.schedules if w.dated)
        forecasts = sum(1 for p in parsed.pools if p.forecast and p.forecast.enabled)
        what = "Helm values" if is_values else "policy"
        ok = (
            f"{source}: ok ({what}): {len(parsed.pools)} pool(s), {windows} schedule window(s)"
            f"{f' ({events} dated event(s))' if events else ''}, "
            f"{forecasts} forecast(s)"
        )
    warnings = sum(1 for f in findings if f.level == Level.WARNING)
    if warnings:
        ok += f"; {warnings} warning(s): it loads, but look at them"
    return "\n".join([ok, *(f"  note: {note}" for note in notes), *(f"  {f}" for f in findings)])


def _hint_values(problem: Problem, kind: str | None) -> Problem:
    if kind is None and problem.path.endswith(".target") and "missing" in problem.message:
        return Problem(
            problem.path,
            f"{problem.message} (in a Helm values file target may be left out: pass --values)",
            problem.line,
        )
    return problem


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        source = "<stdin>" if path == "-" else path
        try:
            print(check(read_config_text(path), source, args.kind, args.release, args.namespace))
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
    return 2 if failed else 0
