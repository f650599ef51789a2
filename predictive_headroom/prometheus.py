"""Demand history from Prometheus (or an API-compatible server: Thanos, Cortex, Mimir, VictoriaMetrics).

Pure helpers build the query windows and read the JSON; `PrometheusSource` only does the HTTP calls
(through prometheus-api-client, with urllib3's Retry for connection errors and 5xx answers).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from predictive_headroom.config import ForecastSpec, Settings
from predictive_headroom.durations import format_duration
from predictive_headroom.protocols import SourceError
from predictive_headroom.series import History, from_epoch

logger = logging.getLogger(__name__)

MAX_POINTS_PER_REQUEST = 10_000
"""Points per series per request; Prometheus refuses range queries of more than 11,000."""
GAP_STEPS = 3
"""Holes longer than this many steps are reported as gaps."""
RETRY_STATUSES = (500, 502, 503, 504)

LabelSet = tuple[tuple[str, str], ...]


# ---------------------------------------------------------------------------------------------
# Pure helpers.


def redact_url(url: str) -> str:
    """Return `url` without user:password and query string, fit for logs and error messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def query_window(end: float, history_seconds: float, step: float) -> tuple[float, float]:
    """Return (start, end) of a range query on the step grid: the last grid point at or before `end`
    and the grid point `history_seconds` before it (whole steps)."""
    stop = math.floor(end / step) * step
    return stop - math.floor(history_seconds / step) * step, stop


def chunk_ranges(start: float, end: float, step: float, max_points: int = MAX_POINTS_PER_REQUEST) -> list[tuple[float, float]]:
    """Split the grid `start, start+step, ... <= end` into inclusive (first, last) pieces of at most
    `max_points` points each; consecutive pieces share no point."""
    total = math.floor((end - start) / step) + 1 if end >= start else 0
    return [
        (start + i * step, start + (min(i + max_points, total) - 1) * step)
        for i in range(0, total, max_points)
    ]


def parse_matrix(result: Sequence[Mapping[str, Any]]) -> dict[LabelSet, tuple[np.ndarray, np.ndarray]]:
    """Turn a range query's `data.result` into float arrays keyed by each series' sorted labels."""
    out: dict[LabelSet, tuple[np.ndarray, np.ndarray]] = {}
    for series in result:
        labels = tuple(sorted(series.get("metric", {}).items()))
        pairs = series.get("values", [])
        times = np.array([float(t) for t, _ in pairs], dtype=float)
        values = np.array([float(v) for _, v in pairs], dtype=float)
        out[labels] = (times, values)
    return out


def differing_labels(label_sets: Sequence[LabelSet]) -> dict[str, list[str]]:
    """Return the labels whose values differ between series, with the values seen ('' = absent)."""
    dicts = [dict(labels) for labels in label_sets]
    names = sorted({name for d in dicts for name in d})
    return {
        name: sorted({d.get(name, "") for d in dicts})
        for name in names
        if len({d.get(name, "") for d in dicts}) > 1
    }


def find_gaps(times: np.ndarray, step: float, min_steps: int = GAP_STEPS) -> list[tuple[float, float]]:
    """Return (last point before, first point after) for every hole longer than `min_steps` steps."""
    if times.size < 2:
        return []
    holes = np.flatnonzero(np.diff(times) > min_steps * step)
    return [(float(times[i]), float(times[i + 1])) for i in holes]


def _utc(seconds: float) -> str:
    return from_epoch(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    return format_duration(timedelta(seconds=round(seconds)))


def many_series_message(query: str, label_sets: Sequence[LabelSet]) -> str:
    """The error for a query that returns several series: which labels differ and how to fix it."""
    diff = differing_labels(label_sets)
    shown = "; ".join(
        f"{name}: {', '.join(repr(v) for v in values[:4])}{', ...' if len(values) > 4 else ''}"
        for name, values in diff.items()
    )
    return (
        f"query {query!r} returned {len(label_sets)} series, which differ in label(s) {shown}; "
        f"the demand query must return exactly one series: wrap it in an aggregation such as "
        f"sum({query}), or select one series with a label matcher"
    )


def quality_warnings(times: np.ndarray, start: float, end: float, step: float, query: str) -> list[str]:
    """Describe holes in a fetched series: inside it, before its first point and after its last."""
    warnings = []
    limit = GAP_STEPS * step
    gaps = find_gaps(times, step)
    if gaps:
        listed = ", ".join(f"{_utc(a)} to {_utc(b)} ({_span(b - a)})" for a, b in gaps[:3])
        more = f" and {len(gaps) - 3} more" if len(gaps) > 3 else ""
        warnings.append(
            f"query {query!r}: {len(gaps)} gap(s) longer than {_span(limit)} with no samples: {listed}{more}"
        )
    if times[0] - start > limit:
        warnings.append(
            f"query {query!r}: data starts at {_utc(times[0])}, {_span(times[0] - start)} after the "
            f"requested start {_utc(start)}; the history is shorter than asked"
        )
    if end - times[-1] > limit:
        warnings.append(
            f"query {query!r}: the last sample is at {_utc(times[-1])}, {_span(end - times[-1])} before "
            f"{_utc(end)}; is the metric still being collected?"
        )
    return warnings


# ---------------------------------------------------------------------------------------------
# HTTP.


class _HttpError(Exception):
    """A non-2xx answer, with Prometheus's own error text when it sent one."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.reason, self.detail = status, reason, detail


def _raise_for_status(response: requests.Response, *_args: Any, **_kwargs: Any) -> requests.Response:
    """requests response hook: turn an error answer into _HttpError carrying Prometheus's message."""
    if response.status_code < 400:
        return response
    try:
        body = response.json()
        detail = f"{body['error']} ({body.get('errorType', 'error')})"
    except (ValueError, KeyError, TypeError):
        detail = " ".join(response.text.split())[:300]
    raise _HttpError(response.status_code, response.reason or "", detail)


class _BearerTokenFile(requests.auth.AuthBase):
    """Sends the token stored in a file, read at every request so a rotated mounted Secret is used."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SourceError(f"cannot read the Prometheus bearer token file {self.path}: {exc.strerror or exc}") from None
        if not token:
            raise SourceError(f"the Prometheus bearer token file {self.path} is empty")
        request.headers["Authorization"] = f"Bearer {token}"
        return request


def _connection_reason(exc: BaseException) -> str:
    """A short cause for a failed connection ('Connection refused'), without URLs or secrets."""
    text = str(exc)
    if match := re.search(r"certificate verify failed: (.+?)\.? \(_ssl", text):
        return f"TLS certificate verify failed: {match.group(1).strip()}"
    if match := re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text):
        return match.group(1).strip()
    if "timed out" in text.lower():
        return "connection timed out"
    return type(exc).__name__


def _auth(settings: Settings) -> requests.auth.AuthBase | None:
    token_file, user, password = (
        settings.prometheus_bearer_token_file,
        settings.prometheus_username,
        settings.prometheus_password,
    )
    if token_file and (user or password):
        raise SourceError(
            "both a Prometheus bearer token file and a username/password are set; use only one "
            "(PH_PROMETHEUS_BEARER_TOKEN_FILE or PH_PROMETHEUS_USERNAME with PH_PROMETHEUS_PASSWORD)"
        )
    if token_file:
        return _BearerTokenFile(Path(token_file))
    if user or password:
        if not (user and password):
            raise SourceError("Prometheus basic auth needs both PH_PROMETHEUS_USERNAME and PH_PROMETHEUS_PASSWORD")
        return requests.auth.HTTPBasicAuth(user, password.get_secret_value())
    return None


def _retry(retries: int, backoff_factor: float) -> Retry:
    """Retry connection errors and 5xx answers with exponential backoff; never 4xx, never read timeouts."""
    return Retry(
        total=retries,
        connect=retries,
        read=0,
        other=0,
        status=retries,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff_factor,
        backoff_max=30,
        raise_on_status=False,
        respect_retry_after_header=False,  # a long Retry-After must not stall the daemon's loop
    )


class PrometheusSource:
    """Reads one demand series per query from a Prometheus HTTP API (implements `Source`).

    `warnings` holds the data-quality notes (dropped NaN/Inf samples, gaps) of the last fetch; they
    are also logged.
    """

    def __init__(self, url: str, settings: Settings, *, backoff_factor: float = 0.5) -> None:
        self.url = url.rstrip("/")
        self.display_url = redact_url(self.url)
        self.warnings: tuple[str, ...] = ()
        self._settings = settings
        password = settings.prometheus_password
        self._secrets = [s for s in (urlsplit(self.url).password, password and password.get_secret_value()) if s]
        auth = _auth(settings)
        session = requests.Session()
        ca_file = settings.prometheus_ca_file
        if ca_file is not None and not Path(ca_file).is_file():
            raise SourceError(f"the Prometheus CA bundle file {ca_file} does not exist (PH_PROMETHEUS_CA_FILE)")
        session.verify = str(ca_file) if ca_file else settings.prometheus_verify_tls
        if session.verify is False:
            logger.warning("TLS certificate verification is off for Prometheus at %s", self.display_url)
        session.hooks["response"].append(_raise_for_status)
        self._attempts = settings.prometheus_retries + 1
        self._client = PrometheusConnect(
            url=self.url,
            headers=dict(settings.prometheus_headers) or None,
            retry=_retry(settings.prometheus_retries, backoff_factor),
            auth=auth,
            session=session,
            timeout=settings.prometheus_timeout,  # type: ignore[arg-type]
        )

    def history(self, spec: ForecastSpec, end: float) -> History:
        """Return `spec.query` over `spec.history` up to `end` at `spec.step` (grid-aligned, nothing after `end`)."""
        step = spec.step.total_seconds()
        start, stop = query_window(end, spec.history.total_seconds(), step)
        return self.query_range(spec.query, start, stop, step)

    def query_range(self, query: str, start: float, end: float, step_seconds: float) -> History:
        """Return the single series `query` yields on the grid start, start+step, ... <= end.

        Long ranges are fetched in pieces below Prometheus's per-request point limit. NaN/Inf samples
        are dropped and gaps kept; both are noted in `warnings`. Raises SourceError when there is no
        usable single series.
        """
        step = float(round(step_seconds))
        if step < 1 or abs(step - step_seconds) > 1e-9:
            raise SourceError(f"the query step must be a whole number of seconds, got {step_seconds:g}s")
        start = float(math.ceil(start))
        series: dict[LabelSet, list[tuple[np.ndarray, np.ndarray]]] = {}
        for first, last in chunk_ranges(start, end, step):
            for labels, arrays in parse_matrix(self._fetch(query, first, last, step)).items():
                series.setdefault(labels, []).append(arrays)
            if len(series) > 1:
                raise SourceError(many_series_message(query, list(series)))
        if not series:
            raise SourceError(
                f"query {query!r} returned no data between {_utc(start)} and {_utc(end)} from "
                f"{self.display_url}; check the metric name, labels and time range in the Prometheus UI"
            )
        (parts,) = series.values()
        times, first_index = np.unique(np.concatenate([t for t, _ in parts]), return_index=True)
        values = np.concatenate([v for _, v in parts])[first_index]
        return self._clean(query, times, values, start, end, step)

    def _clean(self, query: str, times: np.ndarray, values: np.ndarray, start: float, end: float, step: float) -> History:
        finite = np.isfinite(values)
        warnings = []
        if not finite.any():
            raise SourceError(
                f"query {query!r}: all {values.size} samples between {_utc(start)} and {_utc(end)} are "
                "NaN or infinite; check for division by zero (e.g. a rate ratio with an idle denominator)"
            )
        if not finite.all():
            dropped = int(values.size - finite.sum())
            warnings.append(f"query {query!r}: dropped {dropped} NaN/infinite sample(s) of {values.size}")
            times, values = times[finite], values[finite]
        warnings += quality_warnings(times, start, end, step, query)
        for line in warnings:
            logger.warning("%s", line)
        self.warnings = tuple(warnings)
        logger.debug("query %r: %d points from %s", query, times.size, self.display_url)
        return History(times, values, source=f"prometheus {self.display_url} {query}")

    def _fetch(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """One range request; every failure becomes a SourceError that says what to check."""
        where = f"Prometheus at {self.display_url}"
        try:
            result = self._client.custom_query_range(query, from_epoch(start), from_epoch(end), f"{step:.0f}")
            if not isinstance(result, list):
                raise TypeError("result is not a list")
            return result
        except _HttpError as exc:
            message = self._http_message(exc, query)
        except requests.exceptions.SSLError as exc:
            message = (
                f"TLS connection to {where} failed ({_connection_reason(exc)}); set PH_PROMETHEUS_CA_FILE "
                "to the CA bundle that signed its certificate, or PH_PROMETHEUS_VERIFY_TLS=false to skip checks"
            )
        except requests.exceptions.ConnectTimeout as exc:
            message = f"cannot reach {where}: {_connection_reason(exc)} after {self._attempts} attempt(s); check the URL and the network path"
        except requests.exceptions.ReadTimeout:
            message = (
                f"{where} did not answer within {self._settings.prometheus_timeout:g}s; raise "
                "PH_PROMETHEUS_TIMEOUT, or make the query cheaper (larger step, recording rule)"
            )
        except requests.exceptions.ConnectionError as exc:
            message = (
                f"cannot reach {where}: {_connection_reason(exc)} after {self._attempts} attempt(s); "
                "check the URL and that Prometheus is running and reachable from here"
            )
        except (ValueError, KeyError, TypeError):
            message = f"{where} sent an answer that is not a Prometheus query API response; check the URL"
        except requests.exceptions.RequestException as exc:
            message = f"request to {where} failed: {type(exc).__name__}"
        raise SourceError(self._scrub(message))

    def _http_message(self, exc: _HttpError, query: str) -> str:
        where = f"Prometheus at {self.display_url}"
        status = f"HTTP {exc.status} {exc.reason}".strip()
        if exc.status in (400, 422):
            return f"{where} rejected the query {query!r}: {exc.detail}"
        if exc.status == 401:
            return f"{where} refused the credentials ({status}); {self._credentials_hint()}"
        if exc.status == 403:
            return f"{where} denied access ({status}): the credentials are accepted but not allowed to query"
        if exc.status == 404:
            return (
                f"{where} has no query API at /api/v1/query_range ({status}); check the URL, including any "
                "path prefix such as /prometheus or /select/0/prometheus"
            )
        if exc.status >= 500:
            return f"{where} failed ({status}) after {self._attempts} attempt(s): {exc.detail}"
        return f"{where} answered {status}: {exc.detail}"

    def _credentials_hint(self) -> str:
        s = self._settings
        if s.prometheus_bearer_token_file:
            return f"check the token in the bearer token file {s.prometheus_bearer_token_file}"
        if s.prometheus_username:
            return f"check the username {s.prometheus_username!r} and the password (PH_PROMETHEUS_PASSWORD)"
        if urlsplit(self.url).username:
            return "check the user and password in the Prometheus URL"
        return "no credentials are configured: set PH_PROMETHEUS_BEARER_TOKEN_FILE or PH_PROMETHEUS_USERNAME/PASSWORD"

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def from_settings(settings: Settings, url: str | None = None, **kwargs: Any) -> PrometheusSource | None:
    """Build the source for `url` (e.g. `--prometheus-url`) or `settings.prometheus_url`; None when neither is set."""
    chosen = url or settings.prometheus_url
    return PrometheusSource(chosen, settings, **kwargs) if chosen else None
