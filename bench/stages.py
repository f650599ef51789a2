"""Where a bench's seconds go: CPU seconds spent in named functions while a block runs, each
wrapped where it is looked up and put back afterwards (`retune_bench.py`, `tune_bench.py`).

CPU seconds, Stan's optimiser (a child process) included: on a shared machine they say what the
work costs, wall seconds also say how busy the machine was.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


def cpu_seconds() -> float:
    """CPU seconds of this process and of the children it waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def stage_timers(stages: Mapping[str, list[str]]) -> Iterator[dict[str, float]]:
    """CPU seconds spent in each stage while the block runs. A stage is a list of dotted names
    (`module:attribute` or `module:Class.method`), each wrapped where it is looked up; a call
    inside another call of the same stage is counted once."""
    spent = dict.fromkeys(stages, 0.0)
    depth = dict.fromkeys(stages, 0)
    wrapped = []
    for name, targets in stages.items():
        for target in targets:
            module_name, _, path = target.partition(":")
            owner: Any = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent)
            original = getattr(owner, attr)

            def timed(*a: Any, _fn: Any = original, _name: str = name, **kw: Any) -> Any:
                depth[_name] += 1
                began = cpu_seconds()
                try:
                    return _fn(*a, **kw)
                finally:
                    depth[_name] -= 1
                    if not depth[_name]:
                        spent[_name] += cpu_seconds() - began

            setattr(owner, attr, timed)
            wrapped.append((owner, attr, original))
    try:
        yield spent
    finally:
        for owner, attr, original in reversed(wrapped):
            setattr(owner, attr, original)


def line(spent: Mapping[str, float], total: float) -> str:
    """`CPU seconds in a 1.20, b 0.30, the rest 0.50`."""
    rest = total - sum(spent.values())
    return "CPU seconds in " + ", ".join(
        [*(f"{name} {s:.2f}" for name, s in spent.items()), f"the rest {rest:.2f}"]
    )


__all__ = ["cpu_seconds", "line", "stage_timers"]
