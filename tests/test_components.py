"""The component seam: every registered component a shell reads has a reader in each shell
(the daemon's watches, the command line's flags, the replay's source), and the registry carries
what the pages show of each (reason colour, legend)."""

from __future__ import annotations

from predictive_headroom.commands.components import CLI_READERS
from predictive_headroom.core.components import (
    BY_CONTEXT,
    BY_SHELL,
    READ,
    REGISTRY,
    binding,
    static_cap,
    winner,
)
from predictive_headroom.core.vocabulary import Feed, Kind
from predictive_headroom.daemon.components import watches
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.planner import REPLAY_READERS
from predictive_headroom.report.html import REASON_COLOURS


def _daemon_watches() -> set[str]:
    from predictive_headroom.daemon.inputs import Inputs
    from predictive_headroom.daemon.metrics import Metrics

    metrics = Metrics()
    return set(watches(Inputs(None, None, metrics), None, metrics, False, lambda: 0.0))  # type: ignore[arg-type]


def test_every_component_a_shell_reads_has_a_reader_in_each_shell() -> None:
    by_shell = {str(r.name) for r in BY_SHELL}
    assert by_shell == {str(r.name) for r in REGISTRY if r.feed == Feed.READ}
    assert {str(n) for n in CLI_READERS} == by_shell
    assert {str(n) for n in REPLAY_READERS} == by_shell
    assert _daemon_watches() == {str(r.name) for r in READ}  # the context's too, on /last-run


def test_a_component_read_from_the_context_needs_no_shell_table() -> None:
    assert {str(r.name) for r in BY_CONTEXT} == {"budget"}
    for r in BY_CONTEXT:
        assert r.read is not None and r.feed == Feed.CONTEXT
        assert str(r.name) not in {str(n) for n in CLI_READERS} | {str(n) for n in REPLAY_READERS}
    assert {str(r.name) for r in READ} == {str(r.name) for r in BY_SHELL + BY_CONTEXT}


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
