"""The one rule between what the components want and what is written (`core.stabilise`), in its
step form (the planner's, one instant at a time) and its array form (the engine's whole timeline,
the re-tune's replay), each proved against the definition:

    written[i] = min(max(min(wanted[j] + reserve, cap) for the j within the window), cap)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from predictive_headroom.core.stabilise import hold, hold_all, settle, window_steps
from predictive_headroom.replay.tuning import stabilise

STEP = 60.0


@dataclass(frozen=True)
class Rec:
    at: float
    replicas: int


def definition(wanted: list[int], reserve: int, cap: int, window: float) -> list[int]:
    """The rule as docs/design.md states it, written the slow way."""
    raw = [min(w + reserve, cap) for w in wanted]
    return [
        min(max(raw[j] for j in range(len(raw)) if j == i or 0 < (i - j) * STEP < window), cap)
        for i in range(len(raw))
    ]


def step_form(wanted: list[int], reserve: int, cap: int, window: float) -> list[int]:
    """The planner's way: one instant at a time, the raw counts kept as records."""
    records: list[Rec] = []
    out = []
    for i, w in enumerate(wanted):
        raw = settle(w, reserve, cap)
        held = hold(raw, i * STEP, records, window, cap)
        out.append(raw if held is None else held)
        records.append(Rec(i * STEP, raw))
    return out


@given(
    wanted=st.lists(st.integers(0, 50), min_size=1, max_size=40),
    reserve=st.integers(0, 10),
    cap=st.integers(0, 45),
    window=st.sampled_from([0.0, 30.0, 60.0, 90.0, 300.0, 1800.0]),
)
def test_both_forms_write_the_definition(wanted, reserve, cap, window):
    expected = definition(wanted, reserve, cap, window)
    assert step_form(wanted, reserve, cap, window) == expected
    raw = settle(np.array(wanted), reserve, cap)
    assert hold_all(raw, window_steps(window, STEP), cap).tolist() == expected
    assert stabilise(raw, window, cap, STEP).tolist() == expected  # the re-tune's replay


@pytest.mark.parametrize(
    ("window", "steps"), [(0.0, 1), (30.0, 1), (60.0, 1), (61.0, 2), (300.0, 5), (1800.0, 30)]
)
def test_a_window_holds_the_instants_strictly_less_than_it_before(window, steps):
    assert window_steps(window, STEP) == steps


def test_a_lowered_cap_takes_the_held_count_down_to_it():
    # A record from before maxReplicas was lowered asks for more than the cap: held, but capped.
    assert hold(3, 100.0, [Rec(50.0, 9)], 300.0, 5) == 5
    assert hold(3, 100.0, [Rec(50.0, 2)], 300.0, 5) is None  # nothing asks for more
    assert hold(3, 400.0, [Rec(50.0, 9)], 300.0, 5) is None  # out of the window
