"""The package's shape: no import circles, layers that import only downward, subpackages that keep
their lanes. The size of a function is ruff's job (C901, PLR0913, PLR0915, thresholds in
pyproject.toml). The layers are drawn in `docs/design.md`, section 2."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "predictive_headroom"
# The shell wires everything; the use cases (app/) combine the edges and the replay; the others
# import only core/, policy/, pages/, protocols and their own subpackage.
SHELL = {"daemon", "commands", "cli", "__main__", "app"}
SHARED = {"core", "policy", "pages", "protocols", "__init__"}
# Deliberate crossings outside the shell, each a default that a caller can replace.
ALLOWED_CROSSINGS = {
    ("backtest", "forecast"),  # the backtest's default forecaster and its model-free baseline
    ("backtest", "replay"),  # the backtest command replays, then scores and shows the replay
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """Every predictive_headroom module `path` imports, at any depth (lazy imports count too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("predictive_headroom"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("predictive_headroom"):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: _imports(path, name) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_sees_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles(GRAPH) == []


def _lane(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__init__", "policy"}),  # the user's config
    frozenset({"core"}),  # pure values and decisions
    frozenset({"protocols", "pages"}),  # the interfaces to the edges; words and numbers for people
    frozenset({"forecast", "sources", "kube", "report"}),  # the edges and the report
    frozenset({"replay"}),  # the simulated cluster, the walk-forward replay, the promise rule
    frozenset({"backtest"}),  # the backtest: results, text, page, frontier and tune's rule
    frozenset({"app"}),  # the use cases: fit every pool, re-tune, tune's choice (on the backtest)
    frozenset({"daemon"}),  # the daemon shell
    frozenset({"commands", "cli", "__main__"}),  # the CLI shell (demo runs the others via cli)
)
"""Lowest first. A module imports its own subpackage and lower layers only; in the top layer the
CLI's parts call each other."""
LEVEL = {lane: k for k, layer in enumerate(LAYERS) for lane in layer}


def test_every_subpackage_has_a_layer() -> None:
    assert {_lane(name) for name in MODULES} <= set(LEVEL)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of `graph` that goes to a higher layer, or sideways below the top layer."""
    found = set()
    top = len(LAYERS) - 1
    for name, deps in graph.items():
        lane = _lane(name)
        for dep in deps:
            other = _lane(dep)
            if other == lane or LEVEL[other] < LEVEL[lane] or LEVEL[lane] == LEVEL[other] == top:
                continue
            found.add(f"{name} -> {dep}")
    return sorted(found)


def test_the_layer_check_sees_upward_and_sideways_imports() -> None:
    pkg = "predictive_headroom"
    graph = {
        f"{pkg}.app.fit": {f"{pkg}.commands"},  # a use case importing a shell
        f"{pkg}.core.engine": {f"{pkg}.protocols"},  # the core importing upward
        f"{pkg}.sources.csvsource": {f"{pkg}.kube.api"},  # one edge importing another
        f"{pkg}.daemon.loop": {f"{pkg}.app.fit", f"{pkg}.core.engine"},  # downward: fine
        f"{pkg}.commands.demo": {f"{pkg}.cli"},  # inside the CLI shell: fine
    }
    assert _upward(graph) == [
        f"{pkg}.app.fit -> {pkg}.commands",
        f"{pkg}.core.engine -> {pkg}.protocols",
        f"{pkg}.sources.csvsource -> {pkg}.kube.api",
    ]


def test_layers_import_only_downward() -> None:
    assert _upward(GRAPH) == []


def test_subpackages_import_only_shared_modules_and_their_own() -> None:
    crossings = set()
    for name, deps in GRAPH.items():
        lane = _lane(name)
        if lane in SHELL:
            continue
        for dep in deps:
            other = _lane(dep)
            if other != lane and other not in SHARED and (lane, other) not in ALLOWED_CROSSINGS:
                crossings.add(f"{name} -> {dep}")
    assert sorted(crossings) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", ["run", "validate", "size", "plan", "forecast", "report", "backtest", "demo"]
)
def test_every_command_has_help(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "predictive_headroom", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: predictive-headroom" in done.stdout
