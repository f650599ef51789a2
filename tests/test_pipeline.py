"""The one fit path (`app.fit.fit_pools`): a result per pool, failures and warnings as values."""

from __future__ import annotations

import numpy as np

from predictive_headroom.app.fit import fit_pools
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.forecast.naive import seasonal_naive
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.protocols import SourceError

DAY = 86_400.0
AT = 30 * DAY

POLICY = parse_policy(
    """
pools:
  - {name: good, target: {namespace: n, name: a}, maxReplicas: 5, forecast: {query: good, demandPerReplica: 1}}
  - {name: broken, target: {namespace: n, name: b}, maxReplicas: 5, forecast: {query: broken, demandPerReplica: 1}}
  - {name: empty, target: {namespace: n, name: c}, maxReplicas: 5, forecast: {query: empty, demandPerReplica: 1}}
  - {name: paused, target: {namespace: n, name: d}, maxReplicas: 5, forecast: {query: good, demandPerReplica: 1, enabled: false}}
  - {name: floors, target: {namespace: n, name: e}, maxReplicas: 5}
"""
)


class Source:
    def history(self, spec, end):
        if spec.query == "broken":
            raise SourceError("Prometheus said no")
        if spec.query == "empty":
            return History(np.empty(0), np.empty(0))
        t = np.arange(end - 21 * DAY, end + 1, 300.0)
        return History(t, 100 + 10 * np.sin(2 * np.pi * t / DAY), spec.query)

    def recent(self, spec, end, span_seconds):
        raise SourceError("timeout")


class Naive:
    def fit(self, history, spec, settings, now):
        return seasonal_naive(history, spec, now, settings)


def test_each_pool_gets_a_forecast_or_the_reason_and_warnings_as_values():
    fits = fit_pools(POLICY, Source(), AT, Naive(), accuracy=True, observe=True)
    assert list(fits) == [
        "good",
        "broken",
        "empty",
        "paused",
    ]  # pools without a forecast are left out
    good = fits["good"]
    assert isinstance(good.forecast, Forecast) and len(good.history) > 0
    assert good.accuracy is not None and good.warnings == ()
    assert good.observed is None  # no burst model: nothing needs the latest observations
    broken = fits["broken"]
    assert broken.forecast == NoForecast("source-error", "Prometheus said no")
    assert broken.history is None and broken.warnings == ("pool broken: Prometheus said no",)
    assert fits["empty"].forecast.why == "source-error" and fits["empty"].warnings
    assert fits["paused"].forecast == NoForecast("disabled") and fits["paused"].warnings == ()


class Model:
    """Enough of a burst model for the fit path: how much recent history its features read."""

    lookback_seconds, delay_seconds = 7200.0, 60.0


def test_a_failed_read_of_the_latest_observations_is_a_value():
    from dataclasses import replace

    class WithModel(Naive):
        def fit(self, history, spec, settings, now):
            return replace(super().fit(history, spec, settings, now), burst_model=Model())

    fits = fit_pools(POLICY, Source(), AT, WithModel(), observe=True)
    assert fits["good"].observed == Unobserved("fresh-read-failed", "timeout")
