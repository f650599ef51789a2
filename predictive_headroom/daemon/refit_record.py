"""What a refit leaves behind, apart from the forecasts it swaps in: the metrics it records, the
`/last-run` entry that says what it fitted, and which re-tunes and settings count from now on
(`Daemon.refit` in `daemon.loop` fits; this module records), and the report written after it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from predictive_headroom.app.fit import PoolFit, describe
from predictive_headroom.app.tuning import Tuning
from predictive_headroom.core.series import Forecast, NoForecast, from_epoch
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.wiring import ReportWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refitted:
    """One refit's results: each pool's fit, the forecasts it produced (`fresh`), those in use
    after it (`merged`) and the re-tunes that count (`tunings`)."""

    fits: Mapping[str, PoolFit]
    fresh: Mapping[str, Forecast | NoForecast]
    merged: Mapping[str, Forecast | NoForecast]
    tunings: Mapping[str, Tuning]


def record_refit(metrics: Metrics, refit: Refitted, at: float) -> dict[str, Any]:
    """Record `refit` (fitted at `at`) in `metrics` (tunings, shadows, the latest demand, fit
    seconds) and return what `/last-run` shows of it (`last_refit`, without its duration)."""
    fits, fresh = refit.fits, refit.fresh
    for tuning in refit.tunings.values():
        metrics.record_tuning(tuning)
    shadows = {n: f.shadow for n, f in fits.items() if f.tuning is None}
    for name, shadow in shadows.items():
        metrics.record_shadow(name, shadow)
    for name, fit in fits.items():
        if fit.history is not None and len(fit.history):
            metrics.observed_demand.labels(pool=name).set(float(fit.history.values[-1]))
    for name, fc in fresh.items():
        if isinstance(fc, Forecast):
            metrics.fit_seconds.labels(pool=name).set(fc.fit_seconds)
    return {
        "at": at,
        "seconds": None,
        "pools": {n: describe(refit.merged[n]) for n in fresh if n in refit.merged},
        "tuning": {n: t.to_dict() for n, t in refit.tunings.items()},
        "dropped": {n: dict(f.dropped) for n, f in fits.items() if f.dropped},
        "shadow": {n: s.to_dict() for n, s in shadows.items() if s is not None},
    }


def plausible_max(forecast: Forecast | NoForecast | None) -> float | None:
    """The highest plausible demand sample of a pool's forecast in use (None: none or not judged)."""
    return forecast.plausible_max if isinstance(forecast, Forecast) else None


def kept_tunings(
    fits: Mapping[str, PoolFit], fresh: Mapping[str, Forecast | NoForecast]
) -> dict[str, Tuning]:
    """The re-tunes of a refit that count: a tuning counts with the forecast fitted at its
    quantile (`fresh`, the forecasts kept); a failed fit keeps the old pair."""
    return {
        n: f.tuning
        for n, f in fits.items()
        if f.tuning is not None and isinstance(fresh.get(n), Forecast)
    }


def settled(
    fits: Mapping[str, PoolFit],
    fresh: Mapping[str, Forecast | NoForecast],
    tunings: Mapping[str, Tuning],
) -> dict[str, PlanSettings]:
    """The settings each fit of a refit resolved (`app.fit.fit_one`, once), for the pools whose
    they are from now on: fits kept (`fresh`) whose re-tune, if any, counts (`tunings`)."""
    return {
        n: f.settings
        for n, f in fits.items()
        if f.settings is not None and n in fresh and (f.tuning is None or n in tunings)
    }


def write_report(writer: ReportWriter, given: tuple[Any, ...], metrics: Metrics) -> str | None:
    """Write the report after a refit with `given` (the `ReportWriter`'s arguments, its instant
    the fourth); None when written, else why not (logged and counted; the daemon carries on)."""
    try:
        writer(*given)
    except Exception as exc:
        logger.exception("could not write the report after the refit (the daemon carries on)")
        metrics.error("report")
        return f"could not write the report of {from_epoch(given[3]):%Y-%m-%dT%H:%M:%SZ}: {type(exc).__name__}: {exc}"
    return None
