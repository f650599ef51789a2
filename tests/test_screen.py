"""Inputs that cannot buy capacity (issue 64, item 5): demand samples that cannot be real are
dropped before fits, burst tables and the burst model see them, said and counted; a refit whose
inputs were mostly dropped keeps the last good forecast; values that overflow are refused at read."""

from __future__ import annotations

import json
import logging
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from fake_apiserver import FakeApiServer
from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config

from predictive_headroom.app.fit import observe_pool
from predictive_headroom.core.screen import FAR, MIN_SAMPLES, screen, upper_bound
from predictive_headroom.core.series import Forecast, History
from predictive_headroom.forecast.forecaster import ProphetForecaster
from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import read_csv_history
from predictive_headroom.sources.prometheus import PrometheusSource

STEP = 300.0
T0 = 1_790_000_000.0 - (1_790_000_000.0 % 86_400)  # a UTC midnight


def wave(days: float = 3.0, end: float = T0) -> History:
    """A daily wave between 40 and 160 every five minutes, ending at `end`."""
    times = end - np.arange(int(days * 86_400 / STEP) + 1)[::-1] * STEP
    return History(times, 100 + 60 * np.sin(2 * np.pi * (times % 86_400) / 86_400), "wave")


def poisoned(history: History, value: float, every: int = 7) -> History:
    """`history` with every `every`-th sample replaced by `value`."""
    values = history.values.copy()
    values[3::every] = value
    return History(history.times, values, history.source)


# -- the screen itself --------------------------------------------------------------------------

BOUND = upper_bound(wave().values)


def test_the_bound_is_far_scales_above_the_upper_quartile() -> None:
    # the wave: upper quartile 100 + 60 sin(pi/4), interquartile range 85, positive median 100
    assert pytest.approx(100 + 60 * math.sin(math.pi / 4) + FAR * 100, rel=0.01) == BOUND


def spiky() -> History:
    """The wave with a news day: two hours at 20 times its peak."""
    h = wave()
    values = h.values.copy()
    values[400:424] = 20 * 160
    return History(h.times, values)


@pytest.mark.parametrize(
    ("name", "history", "dropped"),
    [
        ("a clean wave", wave(), {}),
        ("a real burst (20x the peak for two hours)", spiky(), {}),
        ("-1e12 every 7th sample", poisoned(wave(), -1e12), {"negative": 124}),
        ("+1e12 every 7th sample", poisoned(wave(), 1e12), {"far-above-range": 124}),
        ("one sample just under the bound", poisoned(wave(), 0.99 * BOUND, 10_000), {}),
        (
            "one sample at twice the bound",
            poisoned(wave(), 2 * BOUND, 10_000),
            {"far-above-range": 1},
        ),
        (
            "a mostly-zero series with rare jobs",
            History(np.arange(500.0), np.where(np.arange(500) % 20, 0.0, 100.0)),
            {},
        ),
        ("all zero", History(np.arange(500.0), np.zeros(500)), {}),
    ],
)
def test_the_screen_drops_only_what_cannot_be_real(name, history, dropped) -> None:
    screened = screen(history)
    assert dict(screened.dropped) == dropped, name
    assert len(screened.history) == len(history) - sum(dropped.values())
    assert (screened.history.values >= 0).all()


def test_a_short_series_is_only_screened_for_negatives_unless_given_a_bound() -> None:
    short = History(np.arange(MIN_SAMPLES - 1.0), np.r_[np.ones(MIN_SAMPLES - 3), 1e9, -5.0])
    assert dict(screen(short).dropped) == {"negative": 1}
    assert dict(screen(short, above=1000.0).dropped) == {"negative": 1, "far-above-range": 1}
    assert dict(screen(short, above=math.inf).dropped) == {"negative": 1}


def test_mostly_dropped_and_the_message_name_the_counts_and_the_fix() -> None:
    screened = screen(poisoned(wave(), -1e12, every=1))
    assert screened.mostly_dropped
    assert not screen(poisoned(wave(), -1e12)).mostly_dropped
    text = screen(poisoned(wave(), 1e12)).describe()
    assert text.startswith("dropped 124 of 865 demand sample(s)")
    assert "124 above" in text and "check the query or its exporter" in text


# -- the daemon ---------------------------------------------------------------------------------


class SeriesSource:
    """Serves `series` as the demand history (and its tail as the latest observations)."""

    def __init__(self, series: History) -> None:
        self.series = series

    def history(self, spec: ForecastSpec, end: float) -> History:
        return self.series.until(end).since(end - spec.history.total_seconds())

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        return self.series.until(end).since(end - span_seconds)


FORECAST = {
    "query": "demand",
    "demandPerReplica": 20,
    "history": "7d",
    "horizon": "6h",
    "minHistory": "7d",  # seasonal naive: a fit in milliseconds, the same burst table
    "burstModel": "profile",
}


@pytest.fixture
def server() -> FakeApiServer:
    with FakeApiServer() as fake:
        yield fake


def dropped_metric(daemon, reason: str) -> float:
    return daemon.metrics.samples_dropped.labels(pool="web", reason=reason)._value.get()


def plan_of(tmp_path: Path, server: FakeApiServer, series: History):
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 2)
    daemon = make_daemon(
        config, server, Clock(T0), source=SeriesSource(series), forecaster=ProphetForecaster()
    )
    assert daemon.refit()
    return daemon, daemon.reconcile().pools[0].plan


def test_a_poisoned_series_plans_what_the_clean_one_plans_said_and_counted(
    tmp_path, server, caplog
) -> None:
    """The issue's scenario: -1e12 in every 7th sample drove the pool from 2 to maxReplicas (40)
    through the refit-time burst table."""
    _, clean = plan_of(tmp_path, server, wave())
    server.delete_deployment(NS, "web-placeholder")
    caplog.set_level(logging.WARNING)
    daemon, plan = plan_of(tmp_path, server, poisoned(wave(), -1e12))
    assert plan.desired == clean.desired < 40
    assert server.replicas(NS, "web-placeholder") == plan.desired
    assert dropped_metric(daemon, "negative") == 124
    assert any("pool web: dropped 124 of" in m for m in caplog.messages)
    text = daemon.metrics.exposition().decode()
    assert 'predictive_headroom_samples_dropped_total{pool="web",reason="negative"} 124.0' in text


def test_a_refit_on_mostly_dropped_inputs_keeps_the_last_good_forecast(
    tmp_path, server, caplog
) -> None:
    source = SeriesSource(wave())
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 2)
    clock = Clock(T0)
    daemon = make_daemon(config, server, clock, source=source, forecaster=ProphetForecaster())
    daemon.refit()
    good = daemon.forecasts()["web"]
    assert isinstance(good, Forecast)

    source.series = poisoned(wave(end=T0 + 3600), 1e12, every=1)  # every sample absurd
    clock.now += 3600
    daemon.refit()  # alike, so within their own range; far above the last good fit's
    assert daemon.forecasts()["web"] is good
    assert dropped_metric(daemon, "far-above-range") == 862  # all but the first three
    assert any(
        "refit failed (implausible-input); keeping the forecast" in m for m in caplog.messages
    )
    assert daemon.last_refit is not None
    assert daemon.last_refit["next_retry"]["pools"] == ["web"]  # the exporter may be fixed
    assert daemon.last_refit["dropped"] == {"web": {"far-above-range": 862}}  # on /last-run

    source.series = poisoned(wave(end=T0 + 3600), -3.0, every=1)  # 862 of 865 negative
    daemon.refit()
    assert daemon.forecasts()["web"] is good
    assert dropped_metric(daemon, "negative") == 862
    plan = daemon.reconcile().pools[0].plan
    assert plan.desired < 40


def test_the_latest_observations_are_judged_against_the_fitted_history(caplog) -> None:
    pool = Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": NS, "name": "t"},
            "maxReplicas": 40,
            "forecast": {**FORECAST, "burstModel": "quantile"},
        }
    )

    class Model:
        lookback_seconds, delay_seconds = 3600.0, 60.0

    times = np.array([T0, T0 + 1.0])
    forecast = Forecast(
        times,
        np.ones(2),
        np.ones(2),
        np.ones(2),
        "m",
        T0,
        burst_model=Model(),
        plausible_max=5000.0,
    )
    recent = History(
        T0 - np.arange(30)[::-1] * 60.0, np.r_[np.full(27, 100.0), 4000.0, 1e12, -1e12]
    )
    counted: dict[str, int] = {}
    got = observe_pool(
        pool, forecast, SeriesSource(recent), T0, lambda w, n: counted.update({w: n})
    )
    assert isinstance(got, History)
    assert got.values.tolist() == [100.0] * 27 + [4000.0]  # the burst starting now is kept
    assert counted == {"negative": 1, "far-above-range": 1}
    assert any("latest observations: dropped 2 of 30" in m for m in caplog.messages)


# -- values that overflow are refused at read ----------------------------------------------------


def test_a_csv_value_that_overflows_is_refused_naming_its_line(tmp_path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("timestamp,value\n2024-05-01T08:00:00Z,5\n2024-05-01T08:05:00Z,1e308\n")
    with pytest.raises(SourceError) as exc:
        read_csv_history(path)
    assert ":3: value '1e308' is beyond 1e+18" in str(exc.value)


class OnePrometheus:
    """A Prometheus stand-in answering every range query with `values`, a minute apart."""

    def __init__(self, values: list[str]) -> None:
        outer = self
        self.values = values

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                start = float(self.path.split("start=")[1].split("&")[0])
                points = [[start + 60 * i, v] for i, v in enumerate(outer.values)]
                body = json.dumps(
                    {
                        "status": "success",
                        "data": {
                            "resultType": "matrix",
                            "result": [{"metric": {}, "values": points}],
                        },
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_prometheus_samples_that_overflow_are_dropped_at_read_and_said() -> None:
    prom = OnePrometheus(["5", "1e308", "-1e300", "NaN", "7"])
    try:
        source = PrometheusSource(prom.url, Settings(prometheus_retries=0))
        spec = ForecastSpec.model_validate({"query": "up", "demandPerReplica": 1, "step": "1m"})
        got = source.recent(spec, T0, 3600)
    finally:
        prom.close()
    assert got.values.tolist() == [5.0, 7.0]
    assert any("dropped 2 sample(s) beyond 1e+18 of 5" in w for w in source.warnings)
    assert any("dropped 1 NaN/infinite sample(s) of 5" in w for w in source.warnings)
