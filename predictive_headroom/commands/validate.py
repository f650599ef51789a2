"""`predictive-headroom validate FILE...`: check policy files and Helm values files, naming every
problem (line, field path, bad value, what is expected)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from predictive_headroom.policy.chart import (
    DEFAULT_NAMESPACE,
    DEFAULT_RELEASE,
    values_problems,
    values_to_policy,
)
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.load import (
    ConfigError,
    Problem,
    policy_problems,
    read_config_text,
    read_yaml,
    validate_policy,
)

HELP = (
    "check policy files or Helm values files (- reads stdin); exit 2 with every problem "
    "(line, field path, bad value, what is expected)"
)
POLICY_KEYS = {"pools", "cost"}


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
        help="read every FILE as the chart's Helm values (default: a file with keys other "
        "than pools and cost is one)",
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


def load_any(
    text: str, source: str, kind: str | None, release: str, namespace: str
) -> tuple[Policy | None, bool]:
    """The policy in a policy file or a Helm values file (None: values without pools, the chart's
    default applies) and whether it was a values file; ConfigError with every problem if not valid."""
    data, index = read_yaml(text, source)
    is_values = kind == "values" or (kind is None and bool(set(data) - POLICY_KEYS))
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


def check(text: str, source: str, kind: str | None, release: str, namespace: str) -> str:
    """Validate one file; return the line to print when it is fine, raise ConfigError if not."""
    parsed, is_values = load_any(text, source, kind, release, namespace)
    if parsed is None:
        return f"{source}: ok: Helm values without pools (the chart's default pool applies)"
    windows = sum(len(p.schedules) for p in parsed.pools)
    forecasts = sum(1 for p in parsed.pools if p.forecast and p.forecast.enabled)
    what = "Helm values" if is_values else "policy"
    return (
        f"{source}: ok ({what}): {len(parsed.pools)} pool(s), {windows} schedule window(s), "
        f"{forecasts} forecast(s)"
    )


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
