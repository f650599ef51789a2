"""When a pool's forecast is fitted again outside the refit schedule, and why.

Two things call for an early refit: the pool's settings moved away from those its forecast was
fitted for (`PlanSettings.needs_refit`, e.g. a measured lead time moving by more than a fifth:
asked at once, once per move), and a failed fit (asked again after a backoff,
`refit_retry.RefitRetries`). `RefitRequests` keeps that bookkeeping and says which pools to refit;
the daemon hands them to the scheduler (`scheduling.Runner`), which does the waiting. Refits asked
while one runs coalesce in a `RefitQueue`: one waits, for every pool asked, of the newest config.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping

from predictive_headroom.core.series import Forecast, NoForecast
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.daemon.refit_retry import RefitRetries, Retry
from predictive_headroom.policy.config import Policy

logger = logging.getLogger("predictive_headroom.daemon.loop")
"""The daemon's logger: these lines were always the loop's, and log filters select them by name."""


class RefitRequests:
    """The early refits asked for: per pool, the settings a refit was last asked for, and the
    consecutive failed fits with the retry they call for."""

    def __init__(self) -> None:
        self.retries = RefitRetries()
        self._asked: dict[str, PlanSettings] = {}
        """The settings a refit was last asked for per pool (asked once per move)."""

    def fitting(self, name: str) -> None:
        """Pool `name` is being fitted now: a later move of its settings is asked for anew."""
        self._asked.pop(name, None)

    def after_refit(self, fresh: Mapping[str, Forecast | NoForecast], now: float) -> Retry | None:
        """Count the refit's results `fresh` at `now`; the retry of the failed pools, if any."""
        return self.retries.record(fresh, now)

    def moved(
        self,
        policy: Policy,
        forecasts: Mapping[str, Forecast | NoForecast],
        in_force: Mapping[str, PlanSettings],
    ) -> list[str]:
        """The forecasting pools whose settings in force (`in_force`, those this reconcile planned
        with) moved away from those their forecast was fitted for, each named once per move."""
        stale = []
        for pool in policy.pools:
            forecast = forecasts.get(pool.name)
            settings = in_force.get(pool.name)
            if not (isinstance(forecast, Forecast) and pool.forecast and pool.forecast.enabled):
                continue
            if settings is None:  # its reconcile failed before planning: nothing to compare
                continue
            fitted = self._asked.get(pool.name, forecast.fitted_for)
            if settings.needs_refit(fitted):
                assert fitted is not None
                logger.info(
                    "pool %s: lead time in use is now %.0f s (forecast fitted for %.0f s); refitting",
                    pool.name,
                    settings.lead,
                    fitted.lead,
                )
                self._asked[pool.name] = settings  # asked once; the refit clears it
                stale.append(pool.name)
        return stale

    def forget(self, removed: Collection[str]) -> None:
        """Drop the pools that left the config."""
        for name in removed:
            self._asked.pop(name, None)


class RefitQueue:
    """Refits asked for at once (a config reload, a moved lead time) while another is running or
    waiting: they coalesce into one waiting refit, of the union of the pools asked, that fits
    the config in force when it starts, so a storm of reloads costs one refit, of the newest config.

    Thread-safe: reloads are noticed on the reconcile thread, refits run on the scheduler's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting = False
        self._pools: set[str] = set()
        self._all = False
        self._running: tuple[object, frozenset[str] | None] | None = None
        """The config the refit running now fits, and its pools (None: every pool)."""

    def ask(self, pools: Collection[str] | None) -> bool:
        """Add `pools` (None: every forecasting pool) to the waiting refit. True when no refit was
        waiting, so the caller must start one that calls `take()`; False when merged into it."""
        with self._lock:
            if pools is None:
                self._all = True
            else:
                self._pools.update(pools)
            queued, self._waiting = self._waiting, True
        if queued:
            logger.info(
                "refit of %s merged into the refit already waiting",
                "every pool" if pools is None else ", ".join(sorted(pools)),
            )
        return not queued

    def take(self, config: object) -> list[str] | None:
        """The pools of the waiting refit, which starts now with `config` (the policy in force;
        None: every pool); later asks wait for the next one."""
        with self._lock:
            pools = None if self._all else sorted(self._pools)
            self._waiting, self._all, self._pools = False, False, set()
            self._running = (config, None if pools is None else frozenset(pools))
        return pools

    def finished(self) -> None:
        """The refit taken last has ended."""
        with self._lock:
            self._running = None

    def not_running(self, config: object, pools: Collection[str]) -> list[str]:
        """Those of `pools` that the refit running now does not already fit with `config` (a
        reload applied just before that refit started asks for nothing more), with a log line
        for the others."""
        with self._lock:
            running = self._running
        if running is None or running[0] is not config:
            return sorted(pools)
        covered = running[1]
        left = sorted(p for p in pools if covered is not None and p not in covered)
        if len(left) < len(pools):
            logger.info(
                "refit of %s: the refit running now already fits this config",
                ", ".join(sorted(set(pools) - set(left))),
            )
        return left
