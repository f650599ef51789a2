"""Settings chosen once in the shells too (issue 65, item 3).

- The protection asked is chosen by one function (`core.settings.asked_protection`: the flag,
  else the pool's `protection:`, else `DEFAULT_PROTECTION`), the same chooser
  `resolve_settings` uses for the promise; `tune` and `backtest` define no default of their own
  and never read the pool's `protection:` to choose (an AST walk of both).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from predictive_headroom.core.settings import (
    DEFAULT_PROTECTION,
    Given,
    SettingSource,
    asked_protection,
    promised_protection,
    resolve_settings,
)
from predictive_headroom.policy.config import Pool

PACKAGE = Path(__file__).resolve().parents[1] / "predictive_headroom"
CHOOSERS = ("commands/tune.py", "commands/backtest.py")


def pool(protection: str | None) -> Pool:
    extra = {} if protection is None else {"protection": protection}
    return Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": "apps", "name": "web-placeholder"},
            "maxReplicas": 50,
            "forecast": {"query": "q", "demandPerReplica": 8},
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("configured", "flag", "value", "source"),
    [
        (None, None, DEFAULT_PROTECTION, SettingSource.DEFAULT),
        ("90%", None, 0.9, SettingSource.CONFIGURED),
        ("90%", 0.99, 0.99, SettingSource.FLAG),
        (None, 0.8, 0.8, SettingSource.FLAG),
    ],
)
def test_the_flag_comes_over_the_pool_which_comes_over_the_default(
    configured, flag, value, source
) -> None:
    asked = asked_protection(pool(configured), flag)
    assert (asked.value, asked.source) == (value, source)
    promised = promised_protection(pool(configured), flag)
    if source is SettingSource.DEFAULT:
        assert promised is None  # no promise: the pool plans with its burst quantile
    else:
        assert promised == asked
    # the plan's settings take the same choice
    assert resolve_settings(pool(configured), given=Given(protection=flag)).protection == promised


def test_without_a_pool_the_flag_else_the_default() -> None:
    assert asked_protection(None).value == DEFAULT_PROTECTION
    assert asked_protection(None, 0.9).value == 0.9


def _tree(relative: str) -> ast.Module:
    return ast.parse((PACKAGE / relative).read_text(), relative)


def _choices(tree: ast.Module) -> list[str]:
    """What in `tree` chooses a protection itself: a name holding a protection default, a
    literal 0.95, or a read of a pool's `protection:` field."""
    found = []
    for node in ast.walk(tree):
        stored = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        name = node.id.upper() if isinstance(node, ast.Name) else ""
        if stored and "PROTECTION" in name and "DEFAULT" in name:
            found.append(f"line {node.lineno}: defines {node.id}")
        if isinstance(node, ast.Constant) and node.value == 0.95:
            found.append(f"line {node.lineno}: the literal 0.95")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "protection"
            and isinstance(node.value, ast.Name)
            and node.value.id == "pool"
        ):
            found.append(f"line {node.lineno}: reads pool.protection")
    return found


def _calls(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(tree)
    )


@pytest.mark.parametrize("relative", CHOOSERS)
def test_tune_and_backtest_leave_the_choice_to_the_one_function(relative) -> None:
    tree = _tree(relative)
    assert _choices(tree) == [], f"{relative} chooses a protection itself"
    assert _calls(tree, "asked_protection"), f"{relative} does not call asked_protection"


def test_the_walk_finds_a_command_choosing_for_itself() -> None:
    old = ast.parse("DEFAULT_PROTECTION = 0.95\ntarget = pool.protection or DEFAULT_PROTECTION\n")
    assert len(_choices(old)) == 3
    assert not _calls(old, "asked_protection")


def _silent_fallbacks(tree: ast.AST) -> list[int]:
    """Lines of `x or resolve_settings(...)`: settings quietly taken from the configuration when a
    caller passed none."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.Or)
        and any(
            isinstance(v, ast.Call) and getattr(v.func, "id", None) == "resolve_settings"
            for v in node.values
        )
    ]


def test_no_module_falls_back_to_the_configurations_settings_when_given_none() -> None:
    """`app/inputs.py` and `replay/setup.py` planned with the configuration's settings when a
    shell passed None; now the settings a plan uses are passed, always."""
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _silent_fallbacks(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}
    assert _silent_fallbacks(ast.parse("s = settings or resolve_settings(pool)")) == [1]


def test_a_replay_plans_with_the_settings_it_is_handed() -> None:
    """`resolve_with` plans with the caller's settings (the refit's measured lead time), `resolve`
    with the pool's and the flags'."""
    from test_backtest import series

    from predictive_headroom.core.settings import with_values
    from predictive_headroom.replay.setup import WhatIf, resolve, resolve_with

    history, web = series(10), pool(None)
    measured = with_values(resolve_settings(web), SettingSource.MEASURED, lead_seconds=420.0)
    assert resolve_with(history, web, WhatIf(), measured).plan_settings == measured
    assert resolve(history, web).plan_settings == resolve_settings(web)
    flags = Given(lead=300.0)
    assert resolve(history, web, WhatIf(given=flags)).plan_settings.lead == 300.0
