"""Who may write: the `Elector` interface the daemon asks before every write, and `AlwaysLeader` for a
single replica. The Lease-based elector is `kube.leader.LeaderElector`."""

from __future__ import annotations

import math
from typing import Protocol


class Elector(Protocol):
    """Leader election: only the leader writes."""

    @property
    def is_leader(self) -> bool: ...

    def write_budget(self) -> float:
        """Seconds this replica may still send writes for (0 when it does not lead)."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class AlwaysLeader:
    """The elector for a single replica (leader election off, or `--once`)."""

    is_leader = True

    def write_budget(self) -> float:
        """No other replica: writes are never cut short."""
        return math.inf

    def start(self) -> None:
        """Nothing to campaign for."""

    def stop(self) -> None:
        """Nothing to release."""
