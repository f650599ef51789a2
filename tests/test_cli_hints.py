"""Advice printed by a command names only flags that command has: every `--flag` in the strings
of the modules whose words a command prints is one of that command's options."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from predictive_headroom.cli import build_parser

PACKAGE = Path(__file__).resolve().parents[1] / "predictive_headroom"
SHARED = ["app/tune.py", "app/review.py", "core/shortfall.py", "replay/promise_price.py"]
REPLAYED = ["replay/walkforward.py", "backtest/run.py"]  # the replay's own warnings
SPOKEN = {  # the modules whose strings each command prints (its own, then what it shows)
    "tune": [
        "commands/tune.py",
        "commands/current.py",
        "commands/replay_flags.py",
        "backtest/recommend.py",
        "backtest/promise_measure.py",
        "backtest/against_fixed.py",
        "backtest/choice.py",
        *REPLAYED,
        *SHARED,
    ],
    "backtest": [
        "commands/backtest.py",
        "commands/current.py",
        "commands/replay_flags.py",
        "backtest/text.py",
        "backtest/results.py",
        "backtest/promise_measure.py",
        "backtest/against_fixed.py",
        *REPLAYED,
        *SHARED,
    ],
    "report": ["commands/report.py", "report/notices.py", "report/html.py", *SHARED],
    "plan": ["commands/plan.py", "commands/plan_cluster.py", "commands/plan_text.py", *SHARED],
}
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")


def _options(command: str) -> set[str]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in subs.choices[command]._actions for o in a.option_strings}


def _strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out (they speak to developers)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


@pytest.mark.parametrize("command", sorted(SPOKEN))
def test_every_flag_a_command_names_is_its_own(command):
    have = _options(command)
    foreign = [
        f"{module}: {flag} in {text[:80]!r}"
        for module in SPOKEN[command]
        for text in _strings(PACKAGE / module)
        for flag in FLAG.findall(text)
        if flag not in have
    ]
    assert not foreign, "\n".join(foreign)


def test_tune_takes_every_flag_of_backtest_that_changes_the_replay():
    replay = {
        "--lag",
        "--node-slots",
        "--since",
        "--scale-down-delay",
        "--warmup",
        "--refit-every",
        "--lead-time",
        "--observation-delay",
        "--burst-model",
        "--demand-per-replica",
        "--cores-per-node",
        "--interruptions",
        "--notice",
        "--seed",
        "--node-cpu",
        "--node-memory",
        "--node-hour-price",
        "--current",
        "--current-from",
    }
    assert replay <= _options("backtest")
    assert replay <= _options("tune")
    for command in ("report", "plan"):
        assert {"--node-cpu", "--node-memory", "--node-hour-price"} <= _options(command)
