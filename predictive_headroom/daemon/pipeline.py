"""Wiring shared by the commands and the daemon: build a source, fit each pool's forecast.

Failures become values (NoForecast with the reason), so one bad pool never stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import Forecaster, Source, SourceError

logger = logging.getLogger(__name__)


def source_from_args(
    data: str | None, prometheus_url: str | None, settings: Settings | None = None
) -> Source:
    """A CSV source for `data`, else a Prometheus source for `prometheus_url` (or PH_PROMETHEUS_URL)."""
    settings = settings or Settings()
    if data:
        from predictive_headroom.sources.csvsource import CsvSource

        return CsvSource(data)
    url = prometheus_url or settings.prometheus_url
    if not url:
        from predictive_headroom.commands import CommandError

        raise CommandError(
            "no demand history: pass --data CSV or --prometheus-url URL (or set PH_PROMETHEUS_URL)"
        )
    from predictive_headroom.sources.prometheus import PrometheusSource

    return PrometheusSource(url, settings)


def default_forecaster() -> Forecaster:
    """The production forecaster (Prophet with a seasonal-naive fallback)."""
    from predictive_headroom.forecast.forecaster import ProphetForecaster

    return ProphetForecaster()


def fetch_history(pool: Pool, source: Source, at: float) -> History | NoForecast:
    """The pool's demand history up to `at`, or NoForecast('source-error') saying what went wrong."""
    assert pool.forecast is not None
    try:
        return source.history(pool.forecast, at)
    except SourceError as exc:
        logger.error("pool %s: cannot read demand history: %s", pool.name, exc)
        return NoForecast("source-error", str(exc))


def fit_pool(
    pool: Pool, history: History, forecaster: Forecaster, at: float
) -> Forecast | NoForecast:
    """Fit one pool's forecast on `history` as known at `at`."""
    assert pool.forecast is not None
    return forecaster.fit(history, pool.forecast, pool.lead_time.total_seconds(), at)


def fit_policy(
    policy: Policy,
    source: Source,
    at: float,
    forecaster: Forecaster | None = None,
    histories: dict[str, History] | None = None,
) -> dict[str, Forecast | NoForecast]:
    """Fetch and fit every pool that forecasts; pools without a forecast section are left out.

    When `histories` is given it is filled with the history each pool was fitted on.
    """
    forecaster = forecaster or default_forecaster()
    out: dict[str, Forecast | NoForecast] = {}
    for pool in policy.pools:
        if pool.forecast is None:
            continue
        if not pool.forecast.enabled:
            out[pool.name] = NoForecast("disabled")
            continue
        history = fetch_history(pool, source, at)
        if isinstance(history, NoForecast):
            out[pool.name] = history
            continue
        if histories is not None:
            histories[pool.name] = history
        out[pool.name] = fit_pool(pool, history, forecaster, at)
        logger.info("pool %s: %s", pool.name, describe(out[pool.name]))
    return out


def needs_observations(pool: Pool, forecast: Forecast | NoForecast | None) -> bool:
    """True when the pool's forecast carries a burst model, which reads the latest observations."""
    return (
        isinstance(forecast, Forecast)
        and forecast.burst_model is not None
        and pool.forecast is not None
    )


def observe_pool(
    pool: Pool, forecast: Forecast | NoForecast | None, source: Source | None, at: float
) -> History | Unobserved | None:
    """The pool's latest observations up to `at` when its forecast carries a burst model: one short
    range query covering what the model's features read. None when nothing needs them; an
    `Unobserved` saying why when the read fails (the planner then uses the refit-time table)."""
    if not needs_observations(pool, forecast):
        return None
    assert isinstance(forecast, Forecast) and pool.forecast is not None
    if source is None:
        return Unobserved("no-source")
    model = forecast.burst_model
    span = model.lookback_seconds + model.delay_seconds + 2 * pool.forecast.step.total_seconds()
    try:
        return source.recent(pool.forecast, at, span)
    except Exception as exc:  # any failure: the table stands in, the floors are untouched
        logger.warning(
            "pool %s: cannot read the latest observations, using the refit-time burst table: %s",
            pool.name,
            exc,
        )
        return Unobserved("fresh-read-failed", str(exc))


def same_forecast(a: Policy, b: Policy, name: str) -> bool:
    """True when pool `name` exists in both policies with the same forecast spec and lead time."""
    pa = next((p for p in a.pools if p.name == name), None)
    pb = next((p for p in b.pools if p.name == name), None)
    return (
        pa is not None
        and pb is not None
        and pa.forecast == pb.forecast
        and pa.lead_time == pb.lead_time
    )


def describe(forecast: Forecast | NoForecast) -> str:
    """One line about a forecast for logs."""
    if isinstance(forecast, NoForecast):
        return f"no forecast ({forecast.why}){': ' + forecast.detail if forecast.detail else ''}"
    return f"{forecast.model} forecast fitted in {forecast.fit_seconds:.2f}s, {forecast.times.size} points"


def keep_usable(
    previous: Mapping[str, Forecast | NoForecast],
    fresh: Mapping[str, Forecast | NoForecast],
    at: float,
) -> dict[str, Forecast | NoForecast]:
    """Fresh forecasts, except that a failed refit keeps the last good forecast until it expires."""
    merged: dict[str, Forecast | NoForecast] = dict(fresh)
    for name, new in fresh.items():
        old = previous.get(name)
        if isinstance(new, NoForecast) and isinstance(old, Forecast) and new.why != "disabled":
            if at <= old.expires_at:
                logger.warning(
                    "pool %s: refit failed (%s); keeping the forecast fitted at %s",
                    name,
                    new.why,
                    old.history_end,
                )
                merged[name] = old
            else:
                merged[name] = NoForecast(
                    "forecast-expired", f"last good forecast expired; refit failed: {new.why}"
                )
    return merged
