"""One way for the tests to build a `Daemon`: its edges and options named in one keyword list.

`new_daemon(config, source=..., forecaster=..., actuator=..., cluster=..., clock=..., interval=...)`
sorts each keyword into `wiring.Edges` or `wiring.DaemonOptions` by its field name (a name that is
neither is an error), so a test names only what it fakes or changes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.wiring import DaemonOptions, Edges
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.load import load_policy

EDGE_FIELDS = {f.name for f in dataclasses.fields(Edges)}
OPTION_FIELDS = {f.name for f in dataclasses.fields(DaemonOptions)}


def new_daemon(
    config: str | Path,
    policy: Policy | None = None,
    *,
    metrics: Metrics | None = None,
    **parts: Any,
) -> Daemon:
    """A daemon serving the policy file `config` (`policy`: its content, default read from it)."""
    unknown = set(parts) - EDGE_FIELDS - OPTION_FIELDS
    if unknown:
        raise TypeError(f"new_daemon: neither an edge nor an option: {', '.join(sorted(unknown))}")
    edges = Edges(**{k: v for k, v in parts.items() if k in EDGE_FIELDS})
    options = DaemonOptions(**{k: v for k, v in parts.items() if k in OPTION_FIELDS})
    return Daemon(
        config, policy if policy is not None else load_policy(config), edges, options, metrics
    )
