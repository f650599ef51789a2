"""What `/last-run` shows of the daemon: the last reconcile and refit, the config in force, its
readiness and each component's inputs (`Daemon.status`)."""

from __future__ import annotations

from typing import Any

from predictive_headroom.app.fit import describe


def last_run(daemon: Any) -> dict[str, Any]:
    """The JSON of /last-run of `daemon` (a `daemon.loop.Daemon`, which imports this module): last reconcile (plans, actions, errors), last refit, config,
    `target_apis`, and each cache's age and last re-list (`caches`)."""
    return {
        "config": {
            "path": str(daemon.config_path),
            "sha256": daemon.config.sha256,
            "pools": [p.name for p in daemon.policy.pools],
            "rejected_change": daemon.config.error,
        },
        "leader": bool(daemon.elector.is_leader),
        "readiness": dict(zip(("ready", "why"), daemon.readiness(), strict=True)),
        "dry_run": daemon.dry_run,
        "reconcile": daemon.last_reconcile.to_dict() if daemon.last_reconcile else None,
        "last_successful_reconcile_at": daemon.last_success_at,
        "refit": daemon.last_refit,
        "report_error": daemon.report_error,
        "forecasts": {n: describe(f) for n, f in daemon.forecasts().items()},
        "tuning": {n: t.to_dict() for n, t in daemon.tunings.items()},
        "target_apis": daemon.target_apis.found,
        "closed_loop": daemon.observer.status(daemon.clock()),
        **{name: watch.status() for name, watch in daemon.components.items()},
        "caches": daemon.caches.status() if daemon.caches is not None else None,
    }
