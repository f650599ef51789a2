"""PrometheusSource against a real Prometheus (backfilled from a shared dataset), plus its pure helpers."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from promfixture import (
    ALL_NAN,
    DEMAND,
    DEMAND_DATASET,
    GAPPY,
    MULTIPLE,
    NONFINITE,
    NONFINITE_COUNT,
    STEP,
    GatewayProxy,
    PromServer,
    free_port,
)

from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import read_csv_history
from predictive_headroom.sources.prometheus import PrometheusSource, from_settings
from predictive_headroom.sources.prometheus_http import redact_url
from predictive_headroom.sources.prometheus_query import (
    MAX_POINTS_PER_REQUEST,
    chunk_ranges,
    differing_labels,
    query_window,
)

DAY = 86_400.0


def spec(query: str = DEMAND, history: str = "2d", step: str = "5m") -> ForecastSpec:
    return ForecastSpec(query=query, demand_per_replica=1, history=history, step=step)


def source(url: str, **settings: object) -> PrometheusSource:
    values: dict[object, object] = {"prometheus_retries": 0, "prometheus_timeout": 10.0, **settings}
    return PrometheusSource(url, Settings(**values), backoff_factor=0.01)


# ---------------------------------------------------------------------------------------------
# Pure helpers.


@pytest.mark.parametrize(
    ("start", "end", "step", "max_points", "pieces"),
    [
        (0, 0, 60, 10, [(0, 0)]),
        (0, 540, 60, 10, [(0, 540)]),
        (0, 600, 60, 10, [(0, 540), (600, 600)]),
        (0, 1250, 60, 10, [(0, 540), (600, 1140), (1200, 1200)]),
        (100, 50, 60, 10, []),
    ],
)
def test_chunk_ranges_cover_the_grid_once(start, end, step, max_points, pieces):
    assert chunk_ranges(start, end, step, max_points) == pieces


def test_default_chunks_stay_below_prometheus_point_limit():
    start, end = query_window(1_700_000_123.0, 60 * DAY, 60)
    pieces = chunk_ranges(start, end, 60)
    counts = [round((b - a) / 60) + 1 for a, b in pieces]
    assert max(counts) == MAX_POINTS_PER_REQUEST < 11_000
    assert sum(counts) == 60 * 1440 + 1
    assert end <= 1_700_000_123.0 and end % 60 == 0


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://prom:9090", "http://prom:9090"),
        ("https://alice:hunter2@prom.example/prometheus?x=1", "https://prom.example/prometheus"),
        ("http://u:p@127.0.0.1:9090/", "http://127.0.0.1:9090/"),
    ],
)
def test_redact_url_drops_credentials(url, shown):
    assert redact_url(url) == shown


def test_differing_labels_names_only_labels_that_differ():
    sets = [
        (("__name__", "up"), ("job", "web"), ("zone", "a")),
        (("__name__", "up"), ("job", "api"), ("zone", "a")),
        (("__name__", "up"), ("job", "web")),
    ]
    assert differing_labels(sets) == {"job": ["api", "web"], "zone": ["", "a"]}


def test_from_settings_prefers_the_explicit_url():
    assert from_settings(Settings(prometheus_url=None)) is None
    assert from_settings(Settings(prometheus_url="http://a:9090")).url == "http://a:9090"
    assert (
        from_settings(Settings(prometheus_url="http://a:9090"), "http://b:9090/").url
        == "http://b:9090"
    )


@pytest.mark.parametrize(
    "url, message",
    [
        ("prometheus:9090", "has no scheme; write it with http:// or https://"),
        ("localhost:9090/prom", "has no scheme"),
        ("ftp://prom:21", "uses ftp://"),
    ],
)
def test_a_url_without_scheme_is_refused_before_any_request(url, message):
    """`--prometheus-url prometheus:9090` says how to write it instead of 'not a Prometheus
    query API response'."""
    with pytest.raises(SourceError, match=message):
        from_settings(Settings(prometheus_url=None), url)


@pytest.mark.slow
def test_https_against_plain_http_says_so():
    """A TLS handshake answered in plain HTTP: the message says to use http://, not to set a CA."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        src = source(f"https://127.0.0.1:{server.server_address[1]}", prometheus_retries=0)
        with pytest.raises(SourceError) as err:
            src.history(spec(), time.time())
    finally:
        server.shutdown()
    message = str(err.value)
    assert "the URL says https:// but the server is plain HTTP; write the URL with http://" in (
        message
    ), message
    assert "PH_PROMETHEUS_CA_FILE" not in message


# ---------------------------------------------------------------------------------------------
# Against a real Prometheus.


@pytest.mark.prometheus
def test_sixty_days_come_in_chunks_every_point_once_matching_the_csv(prometheus_server: PromServer):
    src = source(prometheus_server.url)
    history = src.history(spec(history="60d"), prometheus_server.end)

    csv = read_csv_history(DEMAND_DATASET)
    shifted = csv.times - csv.times[-1] + prometheus_server.end
    wanted = shifted >= prometheus_server.end - 60 * DAY
    assert len(history) == 60 * 288 + 1 > 11_000
    np.testing.assert_array_equal(history.times, shifted[wanted])
    np.testing.assert_array_equal(history.values, csv.values[wanted])
    assert src.warnings == ()


@pytest.mark.prometheus
def test_history_stops_at_end_on_the_step_grid(prometheus_server: PromServer):
    end = prometheus_server.end - 3 * DAY - 123.0
    history = source(prometheus_server.url).history(spec(history="1d"), end)
    assert history.end <= end and history.end % STEP == 0
    assert history.start == history.end - DAY
    assert len(history) == 289


@pytest.mark.prometheus
def test_several_series_name_the_label_that_differs(prometheus_server: PromServer):
    with pytest.raises(SourceError) as err:
        source(prometheus_server.url).history(spec(MULTIPLE), prometheus_server.end)
    message = str(err.value)
    assert "2 series" in message and "job: 'api', 'web'" in message and "sum(ph_demand)" in message


@pytest.mark.prometheus
def test_bad_promql_shows_prometheus_message_without_retrying(prometheus_server: PromServer):
    with GatewayProxy(prometheus_server.url) as proxy:
        with pytest.raises(SourceError) as err:
            source(proxy.url, prometheus_retries=3).history(
                spec("sum(rate(ph_demand[5m]"), prometheus_server.end
            )
        assert proxy.requests == 1
    assert "rejected the query 'sum(rate(ph_demand[5m]'" in str(err.value)
    assert "parse error" in str(err.value)


@pytest.mark.prometheus
def test_query_without_data_says_where_to_look(prometheus_server: PromServer):
    with pytest.raises(
        SourceError, match=r"returned no data .* check the metric name, labels and time range"
    ):
        source(prometheus_server.url).history(spec('ph_demand{job="nope"}'), prometheus_server.end)


@pytest.mark.prometheus
def test_non_finite_samples_are_dropped_and_counted(prometheus_server: PromServer):
    src = source(prometheus_server.url)
    history = src.history(spec(NONFINITE, history="1d"), prometheus_server.end)
    assert np.all(np.isfinite(history.values))
    assert len(history) == 289 - NONFINITE_COUNT
    assert any(
        f"dropped {NONFINITE_COUNT} NaN/infinite sample(s) of 289" in w for w in src.warnings
    )

    with pytest.raises(SourceError, match=r"all 13 samples .* are NaN or infinite"):
        src.history(spec(ALL_NAN, history="1h"), prometheus_server.end)


@pytest.mark.prometheus
def test_gaps_are_reported_and_the_data_kept(
    prometheus_server: PromServer, caplog: pytest.LogCaptureFixture
):
    src = source(prometheus_server.url)
    with caplog.at_level(logging.WARNING):
        history = src.history(spec(GAPPY, history="2d"), prometheus_server.end)
    (gap_note,) = [w for w in src.warnings if "gap(s)" in w]
    assert "1 gap(s) longer than 15m" in gap_note and "(2h)" in gap_note
    assert gap_note in caplog.text
    first_missing, last_missing = prometheus_server.gap
    holes = np.diff(history.times) > 3 * STEP
    (i,) = np.flatnonzero(holes)
    # Prometheus's 5-minute lookback may repeat the last sample before the hole at most once.
    assert first_missing - STEP <= history.times[i] <= first_missing
    assert history.times[i + 1] == last_missing + STEP
    assert len(history) > 500


def test_unreachable_server_fails_fast_naming_url_without_credentials(
    caplog: pytest.LogCaptureFixture,
):
    port = free_port()
    src = source(f"http://alice:hunter2@127.0.0.1:{port}", prometheus_retries=2)
    began = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as err:
        src.history(spec(), time.time())
    assert time.monotonic() - began < 3
    message = str(err.value)
    assert (
        f"cannot reach Prometheus at http://127.0.0.1:{port}: Connection refused after 3 attempt(s)"
        in message
    )
    assert "hunter2" not in message and "alice" not in message and "hunter2" not in caplog.text


@pytest.mark.prometheus
def test_basic_auth(prometheus_basic_auth: PromServer, caplog: pytest.LogCaptureFixture):
    server = prometheus_basic_auth
    tls = {"prometheus_ca_file": server.ca_file}
    good = source(
        server.url, prometheus_username=server.username, prometheus_password=server.password, **tls
    )
    history = good.history(spec(history="1d"), server.end)
    np.testing.assert_array_equal(history.values, server.demand_values[-289:])

    wrong = "not-" + server.password
    bad = source(server.url, prometheus_username=server.username, prometheus_password=wrong, **tls)
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as err:
        bad.history(spec(history="1d"), server.end)
    message = str(err.value)
    assert "refused the credentials (HTTP 401 Unauthorized)" in message
    assert f"check the username '{server.username}' and the password" in message
    for text in (message, caplog.text):
        assert wrong not in text and server.password not in text

    with pytest.raises(SourceError, match="no credentials are configured"):
        source(server.url, **tls).history(spec(history="1d"), server.end)


@pytest.mark.prometheus
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_verification_uses_the_ca_bundle_or_can_be_switched_off(
    prometheus_basic_auth: PromServer,
):
    server = prometheus_basic_auth
    if server.ca_file is None:
        pytest.skip("the openssl CLI is missing, so the test Prometheus runs without TLS")
    login = {"prometheus_username": server.username, "prometheus_password": server.password}
    with pytest.raises(SourceError) as err:
        source(server.url, **login).history(spec(history="1h"), server.end)
    assert (
        f"TLS connection to Prometheus at {server.url} failed (TLS certificate verify failed: "
        in str(err.value)
    )
    assert "set PH_PROMETHEUS_CA_FILE" in str(err.value)

    unverified = source(server.url, prometheus_verify_tls=False, **login)
    assert len(unverified.history(spec(history="1h"), server.end)) == 13


@pytest.mark.prometheus
def test_bearer_token_file_is_read_at_each_fetch(prometheus_server: PromServer, tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("token-one\n")
    required = {"Authorization": "Bearer token-one", "X-Scope-OrgID": "tenant-a"}
    with GatewayProxy(prometheus_server.url, required) as proxy:
        src = source(
            proxy.url,
            prometheus_bearer_token_file=token_file,
            prometheus_headers={"X-Scope-OrgID": "tenant-a"},
        )
        assert len(src.history(spec(history="1h"), prometheus_server.end)) == 13

        proxy.required["Authorization"] = "Bearer token-two"  # the Secret was rotated...
        with pytest.raises(SourceError) as err:
            src.history(spec(history="1h"), prometheus_server.end)
        assert f"check the token in the bearer token file {token_file}" in str(err.value)
        assert "token-one" not in str(err.value)

        token_file.write_text("token-two\n")  # ...and the new one mounted
        assert len(src.history(spec(history="1h"), prometheus_server.end)) == 13

    token_file.unlink()
    with pytest.raises(
        SourceError, match=f"cannot read the Prometheus bearer token file {token_file}"
    ):
        src.history(spec(history="1h"), prometheus_server.end)


@pytest.mark.prometheus
def test_server_errors_are_retried_with_backoff(prometheus_server: PromServer):
    with GatewayProxy(prometheus_server.url) as proxy:
        proxy.fail_next = [503, 502]
        history = source(proxy.url, prometheus_retries=2).history(
            spec(history="1h"), prometheus_server.end
        )
        assert len(history) == 13 and proxy.requests == 3

        proxy.fail_next = [503, 503]
        with pytest.raises(SourceError) as err:
            source(proxy.url, prometheus_retries=1).history(
                spec(history="1h"), prometheus_server.end
            )
    assert (
        "failed (HTTP 503 Service Unavailable) after 2 attempt(s): gateway says try later"
        in str(err.value)
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"prometheus_username": "u"},
            "needs both PH_PROMETHEUS_USERNAME and PH_PROMETHEUS_PASSWORD",
        ),
        (
            {
                "prometheus_username": "u",
                "prometheus_password": "p",
                "prometheus_bearer_token_file": "/t",
            },
            "use only one",
        ),
        (
            {"prometheus_ca_file": "/nonexistent/ca.pem"},
            "CA bundle file /nonexistent/ca.pem does not exist",
        ),
    ],
)
def test_inconsistent_settings_are_refused_at_construction(settings, message):
    with pytest.raises(SourceError, match=message):
        source("http://127.0.0.1:9", **settings)


@pytest.mark.parametrize(
    ("url", "settings"),
    [
        ("http://prom:9090", {"prometheus_bearer_token_file": "/t"}),
        ("HTTP://prom:9090", {"prometheus_username": "u", "prometheus_password": "p"}),
        ("http://prom:9090", {"prometheus_headers": {"authorization": "Bearer x"}}),
        ("http://alice:hunter2@prom:9090", {}),
    ],
)
def test_credentials_over_plain_http_are_refused_unless_insecure(url, settings):
    """A token or password to an http:// URL would cross the network in the clear: refused
    before any request, saying how to fix it; PH_PROMETHEUS_INSECURE=true sends it anyway."""
    with pytest.raises(SourceError) as err:
        from_settings(Settings(prometheus_url=url, **settings))
    message = str(err.value)
    assert "is plain http://" in message and "use an https:// URL" in message
    assert "PH_PROMETHEUS_INSECURE=true" in message and "hunter2" not in message
    told = from_settings(Settings(prometheus_url=url, prometheus_insecure=True, **settings))
    assert told is not None
    https = url.replace("http://", "https://").replace("HTTP://", "https://")
    assert from_settings(Settings(prometheus_url=https, **settings)) is not None


def test_plain_http_without_credentials_is_allowed():
    headers = {"X-Scope-OrgID": "tenant-a"}
    source = from_settings(Settings(prometheus_url="http://prom:9090", prometheus_headers=headers))
    assert source is not None and source.url == "http://prom:9090"
