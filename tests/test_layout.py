"""The package's shape: no import circles, layers that import only downward, subpackages that keep
their lanes. The size of a function is ruff's job (C901, PLR0913, PLR0915, thresholds in
pyproject.toml). The layers are drawn in `docs/design.md`, section 2. And the suite's own shape:
it reads nothing outside the repository, so `make test` passes on a bare clone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testdata import SERIES_DIRS, series_path, shipped_series

PACKAGE = Path(__file__).resolve().parents[1] / "predictive_headroom"
TESTS = Path(__file__).resolve().parent
# The datasets folder beside the repository (where `make bench` reads), however code might name
# it: relative, absolute, or joined from parts (`parents[2] / <that name> / "datasets"`).
SERIES_NAME = re.compile(r"[\"']([a-z][a-z0-9]*(?:_[a-z0-9]+)*_[0-9]+min)(?:\.csv)?[\"']")
OUTSIDE = re.compile(r"(?:\.\./|/work/)shared\b|[\"']shared[\"']\s*/")
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


def _outside_references(root: Path) -> list[str]:
    """`file:line: text` of every line of code or configuration under `root` that names the folder
    beside the repository (prose, such as tests/data/SOURCES.md citing where bench reads, may)."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in {
            ".py",
            ".sh",
            ".yaml",
            ".yml",
            ".toml",
            ".json",
        }:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_no_test_reads_a_folder_beside_the_repository() -> None:
    """Issue 63: 116 tests read a datasets folder beside the repository, which a clone does not
    have. The series they read are in tests/data (`series_path`); `.ci/run` runs the suite with
    that folder hidden."""
    assert _outside_references(TESTS) == []


def test_the_outside_check_sees_each_way_of_naming_the_folder(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    folder = "shared"  # joined here, so that this file does not name the folder itself
    (tests / "test_a.py").write_text(
        f'A = Path(__file__).resolve().parents[2] / "{folder}" / "datasets"\n'
        f'B = Path("/work/{folder}/datasets/x.csv")\n'
        f"C = '../{folder}/datasets'\n"
        "D = 'a shared-buffer, shared series, the shared machine'\n"
    )
    assert [line.split(":")[1] for line in _outside_references(tests)] == ["1", "2", "3"]


def test_every_series_the_tests_read_is_in_the_repository() -> None:
    """Every series a test names (`"<source>_<n>min"`, as `series_path` takes it) is here."""
    assert all(d.is_relative_to(TESTS.parent) for d in SERIES_DIRS)
    named = {
        name
        for path in TESTS.rglob("*.py")
        if path != Path(__file__).resolve()
        for name in SERIES_NAME.findall(path.read_text())
    }
    assert {"nab_aws_asg_cpu_5min", "google2019_cluster_cpu_5min"} <= named
    assert sorted(n for n in named if f"{n}.csv" not in shipped_series()) == []
    assert {"nab_aws_asg_cpu_5min.csv", "nab_nyc_taxi_30min.csv"} <= set(shipped_series())
    assert (
        series_path("nab_aws_elb_requests_5min") == TESTS / "data" / "nab_aws_elb_requests_5min.csv"
    )
    with pytest.raises(FileNotFoundError, match=r"worldcup98.*the series here: azure_v2"):
        series_path("worldcup98_requests_1min")
