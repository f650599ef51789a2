"""Scheduling: run a Daemon's reconcile loop and its refits until stopped.

`Runner` owns the timing only; what a reconcile or a refit does lives in `daemon.Daemon`.
The reconcile runs on its own thread, timed by the monotonic clock: a wall-clock step back or
forward neither stops nor doubles it. Refits follow their cron expressions on APScheduler (wall
time, as a cron means). Work runs in threads that are abandoned on stop, so SIGTERM never waits
for a slow fit or call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC
from typing import Any

from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.refit_requests import RefitQueue
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.cron import cron_trigger

logger = logging.getLogger(__name__)


def _refit_groups(policy: Policy) -> dict[str, list[str]]:
    """Forecasting pools grouped by their refit cron expression (UTC)."""
    groups: dict[str, list[str]] = {}
    for pool in policy.pools:
        if pool.forecast is not None and pool.forecast.enabled:
            groups.setdefault(" ".join(pool.forecast.refit.split()), []).append(pool.name)
    return groups


class Runner:
    """Runs a Daemon on an APScheduler BackgroundScheduler until `stop()`.

    The reconcile runs every `interval` seconds of the monotonic clock (first run at once; one
    that overruns is followed by the next at once, never by two); refits are APScheduler jobs, one
    `refit:<cron>` job per distinct refit cron (UTC), plus a refit at start and after a config
    change, one at a time in their own executor (refits asked while one runs coalesce into one). Each job's work runs in a daemon thread that is abandoned on
    stop, so SIGTERM never waits for a Prophet fit or a slow API call: an abandoned refit swaps
    nothing in, and a scale write is a single PATCH that the apiserver applies whole or not at all.
    """

    def __init__(self, daemon: Daemon, interval: float) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.daemon, self.interval = daemon, interval
        self.scheduler = BackgroundScheduler(
            timezone="UTC",
            executors={"default": ThreadPoolExecutor(1), "refit": ThreadPoolExecutor(1)},
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": max(30, int(interval)),
            },
        )
        daemon.on_reload = self._reloaded
        daemon.refit_soon = self._refit_now
        daemon.refit_later = self._refit_later
        self.queue = RefitQueue()
        """Refits asked for at once, coalesced while one runs."""
        self._wake = threading.Event()
        self._loop = threading.Thread(target=self._reconcile_loop, name="reconciler", daemon=True)
        self.reconciles = 0
        """Reconciles run so far."""

    def start(self) -> None:
        """Start the reconcile loop and the refit jobs, then run a refit and a reconcile at once."""
        self._schedule_refits(self.daemon.policy)
        self._refit_now(None)
        self.scheduler.start()
        self._loop.start()

    def stop(self) -> None:
        """Stop at once: no new jobs, a refit in progress is abandoned, the reconcile running ends."""
        self.daemon.stopping.set()
        self._wake.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def reconcile_now(self) -> None:
        """Reconcile at once (e.g. on becoming leader), or once more right after the one running."""
        self._wake.set()

    def _reconcile_loop(self) -> None:
        clock = self.daemon.monotonic
        due = clock()
        while not self.daemon.stopping.is_set():
            # Event.wait times out on the monotonic clock; `due` is on the daemon's monotonic clock.
            if self._wake.wait(max(0.0, due - clock())):
                self._wake.clear()
            if self.daemon.stopping.is_set():
                return
            started = clock()
            self._abandonable("reconcile", self.daemon.reconcile)
            self.reconciles += 1
            due = max(started + self.interval, clock())

    def _refit(self, pools: list[str] | None) -> None:
        self._abandonable("refit", self.daemon.refit, pools)

    def _abandonable(self, what: str, work: Callable[..., Any], *args: Any) -> None:
        """Run `work` in a daemon thread and wait for it, or give up on it when the daemon stops.

        A failure is logged and counted; it never ends the scheduler.
        """
        done = threading.Event()

        def run() -> None:
            try:
                work(*args)
            except Exception:  # a failed cycle never kills the daemon
                logger.exception("%s failed", what)
                self.daemon.metrics.error("fit" if what == "refit" else "internal")
            finally:
                done.set()

        threading.Thread(target=run, name=what, daemon=True).start()
        while not done.wait(0.1):
            if self.daemon.stopping.is_set():
                logger.info("stopping: the %s in progress is abandoned", what)
                return

    def _refit_now(self, pools: list[str] | None) -> None:
        """Refit `pools` (None: all) as soon as the refit running ends; asks made meanwhile
        coalesce into that one refit (`RefitQueue`), which fits the config in force when it starts."""
        if not self.queue.ask(pools):
            return
        self.scheduler.add_job(
            self._refit_queued,
            executor="refit",
            next_run_time=_utc_now(),
            misfire_grace_time=None,
        )

    def _refit_queued(self) -> None:
        # The policy is read before the daemon's refit reads it: a reload in between makes the
        # marker older than the config fitted, which costs at most one extra refit.
        try:
            self._refit(self.queue.take(self.daemon.policy))
        finally:
            self.queue.finished()

    def _refit_later(self, pools: list[str], seconds: float) -> None:
        """Refit `pools` once in `seconds` (a failed refit's retry; replaces an earlier retry)."""
        from datetime import timedelta

        self.scheduler.add_job(
            self._refit,
            args=[pools],
            id="refit-retry",
            replace_existing=True,
            executor="refit",
            next_run_time=_utc_now() + timedelta(seconds=max(seconds, 0.0)),
            misfire_grace_time=None,
        )
        logger.info(
            "refit of %s failed; trying again in %.0f s", ", ".join(pools), max(seconds, 0.0)
        )

    def _schedule_refits(self, policy: Policy) -> None:
        for job in self.scheduler.get_jobs():
            if job.id.startswith("refit:"):
                job.remove()
        for cron, pools in _refit_groups(policy).items():
            self.scheduler.add_job(
                self._refit,
                cron_trigger(cron, "UTC"),
                args=[pools],
                id=f"refit:{cron}",
                executor="refit",
                misfire_grace_time=600,
            )

    def _reloaded(self, refit: set[str]) -> None:
        self._schedule_refits(self.daemon.policy)
        left = self.queue.not_running(self.daemon.policy, refit) if refit else []
        if left:
            self._refit_now(left)


def _utc_now() -> Any:
    from datetime import datetime

    return datetime.now(UTC)
