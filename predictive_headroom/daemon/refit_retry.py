"""Retrying a failed refit with backoff until one succeeds.

A refit that could not read history or fit (Prometheus 404/503 at start, a fit error) is tried
again after 1, 2, 4, 8 and then every 15 minutes, per pool, until it succeeds; then the pool is
back on its refit schedule. Pure bookkeeping: `RefitRetries.record` takes the refit's results and
the time, and says which pools to try again and when; the scheduler does the waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from predictive_headroom.core.series import Forecast, NoForecast
from predictive_headroom.core.vocabulary import NoForecastWhy
from predictive_headroom.policy.echo import cut

FIRST_WAIT = 60.0
"""Seconds before the first retry of a failed refit."""

LONGEST_WAIT = 15 * 60.0
"""Retries of a refit that keeps failing come this often (seconds)."""

RETRIED = frozenset(
    {NoForecastWhy.FIT_ERROR, NoForecastWhy.SOURCE_ERROR, NoForecastWhy.IMPLAUSIBLE_INPUT}
)
"""`NoForecast.why` values that a later try may fix (not `disabled` or too little history; a
broken exporter's samples may be right again)."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` consecutive failed refits: 60, 120, 240, ... at most 900."""
    return min(FIRST_WAIT * 2 ** max(failures - 1, 0), LONGEST_WAIT)


@dataclass(frozen=True)
class Retry:
    """The next try of the pools whose refit failed: `at` (epoch seconds), after `failures`."""

    pools: tuple[str, ...]
    at: float
    failures: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "pools": list(self.pools),
            "next_try_at": datetime.fromtimestamp(self.at, UTC).isoformat(),
            "next_try_epoch": self.at,
            "failed_tries": self.failures,
            "why": self.why,
        }


class RefitRetries:
    """Consecutive refit failures per pool, and the retry they call for."""

    def __init__(self) -> None:
        self._failures: dict[str, int] = {}
        self._why: dict[str, str] = {}
        self.pending: Retry | None = None
        """The retry asked for by the last refit, None when every pool's last refit succeeded."""

    def record(self, results: Mapping[str, Forecast | NoForecast], now: float) -> Retry | None:
        """Count the refit `results` at `now`; the retry to schedule (None: nothing to retry)."""
        for name, result in results.items():
            if isinstance(result, NoForecast) and result.why in RETRIED:
                self._failures[name] = self._failures.get(name, 0) + 1
                self._why[name] = cut(f"{result.why}: {result.detail}", 300)
            else:
                self._failures.pop(name, None)
                self._why.pop(name, None)
        if not self._failures:
            self.pending = None
            return None
        pools = tuple(sorted(self._failures))
        most = min(self._failures[p] for p in pools)
        why = "; ".join(f"pool {p}: {self._why[p]}" for p in pools)
        self.pending = Retry(pools, now + backoff(most), most, why)
        return self.pending

    def forget(self, pools: set[str]) -> None:
        """Drop pools that are gone from the config."""
        for name in pools:
            self._failures.pop(name, None)
            self._why.pop(name, None)
