"""Which API each pool's target is written through, as API discovery found it (CapacityBuffer versions).

`TargetApiTracker` asks at start and after a config reload, asks again at every reconcile while a
pool has no usable API (the CRD may be installed meanwhile), logs each pool's API when it changes
(the start-up log names the version) and keeps the latest finding for /last-run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import TargetApis

logger = logging.getLogger(__name__)

_CHOSEN_BY = {
    "target.apiVersion": "pinned by target.apiVersion",
    "server-preferred": "the server's preferred version",
    "newest-supported": "the newest served version this daemon supports",
}


class TargetApiTracker:
    """Keeps what API discovery found per pool, re-asks while something is missing, logs what changed."""

    def __init__(self, apis: TargetApis | None) -> None:
        self.apis = apis
        self.found: dict[str, dict[str, Any]] = {}
        self._fresh = False

    def invalidate(self) -> None:
        """Ask the server again on the next `update` (after a config reload)."""
        self._fresh = False

    def update(self, pools: Iterable[Pool]) -> dict[str, dict[str, Any]]:
        """Per pool, the API in use or why there is none; asks the server when stale or incomplete."""
        if self.apis is None:
            return self.found
        pools = list(pools)
        if not self._fresh or any(entry.get("error") for entry in self.found.values()):
            self.apis.refresh()
        try:
            found = self.apis.describe(pools)
        except (
            Exception
        ) as exc:  # an unexpected answer must not stop the other pools; each pool reports it
            logger.exception("API discovery failed")
            found = {
                p.name: {
                    "kind": p.target.kind,
                    "api_version": None,
                    "scope": None,
                    "chosen_by": None,
                    "error": f"pool {p.name}: API discovery failed: {type(exc).__name__}: {exc}",
                }
                for p in pools
                if p.target.kind == "CapacityBuffer"
            }
        for name, entry in sorted(found.items()):
            if self.found.get(name) == entry:
                continue
            if entry.get("error"):
                logger.error("%s", entry["error"])
            else:
                logger.info(
                    "pool %s: CapacityBuffer API %s (%s, %s)",
                    name,
                    entry["api_version"],
                    "namespaced" if entry["scope"] == "Namespaced" else "cluster-scoped",
                    _CHOSEN_BY.get(entry["chosen_by"], entry["chosen_by"]),
                )
        self.found, self._fresh = found, True
        return found
