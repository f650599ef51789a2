"""The component seam: every component read at each instant is its registration's own pure
`read` over the inputs it declares, which each shell gives in its context (the daemon's, the
command line's, the replay's); no shell holds a component's code; and the registry carries what
the pages show of each (reason colour, legend)."""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

import predictive_headroom
from predictive_headroom.commands.components import CliContext
from predictive_headroom.core.components import (
    BY_CONTEXT,
    READ,
    REGISTRY,
    binding,
    static_cap,
    winner,
)
from predictive_headroom.core.context import Context
from predictive_headroom.core.price import Price
from predictive_headroom.core.vocabulary import Feed, Input, Kind
from predictive_headroom.daemon.components import DaemonContext, Readers, watches
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.planner import ReplayContext
from predictive_headroom.report.html import REASON_COLOURS

PACKAGE = Path(predictive_headroom.__file__).parent
SHELLS = ("daemon", "commands", "replay")
"""The packages that give the components their inputs (and must hold no component's code)."""


def _daemon_watches() -> set[str]:
    from predictive_headroom.daemon.inputs import Inputs
    from predictive_headroom.daemon.metrics import Metrics

    metrics = Metrics()
    return set(watches(Readers(Inputs(None, None, metrics), metrics)))  # type: ignore[arg-type]


def test_every_component_read_at_each_instant_is_its_own_read_over_declared_inputs() -> None:
    assert {str(r.name) for r in READ} == {"disruption", "share", "budget", "quota"}
    assert READ == BY_CONTEXT
    for r in READ:
        assert r.read is not None and r.feed == Feed.CONTEXT and r.inputs, r.name
        assert r.read.__module__.startswith("predictive_headroom.core."), r.name
    assert _daemon_watches() == {str(r.name) for r in READ}  # one watch each, on /last-run


def test_each_shell_implements_every_input_of_the_context() -> None:
    """An input is one method of `Context`; each shell's context gives every one."""
    wanted = {m for m in vars(Context) if not m.startswith("_")}
    assert wanted >= {"at", "price", "held", "requests", "leaving"}
    assert {str(i) for i in Input} <= wanted | {"time"}
    shells = (
        DaemonContext(lambda: None),
        CliContext(0.0, None, argparse.Namespace(), None),
        ReplayContext(Price(None, 8, "USD", "no prices"), None),
    )
    for shell in shells:
        given = {m for m in wanted if hasattr(shell, m)}
        assert given == wanted, f"{type(shell).__name__} lacks {wanted - given}"


def _calls(path: Path) -> list[tuple[int, str]]:
    """The plain (not attribute) calls in the module at `path`: (line, name)."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.lineno, node.func.id)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]


def test_no_shell_holds_a_registered_components_code() -> None:
    """A shell gives inputs; it never builds a component's part (`*_part(`, `*Part(`) nor calls
    a component's `read` but through the registry."""
    reads = {r.read.__name__ for r in REGISTRY if r.read is not None}
    found = []
    for shell in SHELLS:
        for path in sorted((PACKAGE / shell).glob("*.py")):
            for line, name in _calls(path):
                if name.endswith(("_part", "Part")) or name in reads:
                    found.append(f"{path.relative_to(PACKAGE)}:{line} calls {name}")
    assert not found, "component code in a shell:\n" + "\n".join(found)


def test_the_code_guard_catches_a_component_built_in_a_shell(tmp_path) -> None:
    """The guard above fails on a shell that sizes a component itself (as the old readers did)."""
    old = tmp_path / "reader.py"
    old.write_text(
        "from predictive_headroom.core.share import share_part\n"
        "def part(pool, requested):\n"
        "    return share_part(pool.share, requested, pool.placeholder.amounts)\n"
    )
    assert (3, "share_part") in _calls(old)
    assert inspect.getsource(test_no_shell_holds_a_registered_components_code)


def test_every_registered_component_has_its_colour_on_the_pages() -> None:
    for r in REGISTRY:
        assert REASON_COLOURS[str(r.name)] == r.colour
    assert len({r.colour for r in REGISTRY}) == len(REGISTRY)  # told apart in the legend


def test_the_smallest_cap_binds_and_max_is_the_first_cap() -> None:
    caps = [r for r in REGISTRY if r.kind == Kind.CAP]
    assert str(caps[0].name) == "max"
    assert binding({"max": 7}) == ("max", 7)
    pool = Pool.model_validate(
        {"name": "web", "target": {"namespace": "ns", "name": "p"}, "maxReplicas": 12}
    )
    assert static_cap(pool) == 12


def test_a_floor_read_at_each_instant_names_no_plan_of_zero() -> None:
    """Issue 63: the first reconcile logged `(disruption, follower)` for a plan of 0 with nothing
    disrupted; a read floor asking for none does not name the plan, one asking for some does."""
    assert winner({"disruption": 0, "share": 0, "min": 0}) == ("min", 0)
    assert winner({"disruption": 3, "min": 0}) == ("disruption", 3)
    assert winner({"forecast": 0, "disruption": 0, "min": 0}) == ("forecast", 0)
    assert winner({"disruption": 2, "share": 2, "min": 2}) == ("disruption", 2)
