"""Demand history from Prometheus (or an API-compatible server: Thanos, Cortex, Mimir, VictoriaMetrics).

`PrometheusSource` does the HTTP calls (through prometheus-api-client, with urllib3's Retry for
connection errors and 5xx answers): it fetches one series per query in chunks, drops NaN/Inf
samples (and those beyond `core.series.MAX_SAMPLE`, which overflow the arithmetic), notes gaps, and turns every failure into a `SourceError` that says what to check, with
credentials scrubbed. The pure query-window, chunking and matrix helpers are in `prometheus_query`;
auth, the retry policy, the error-answer hook and URL redaction are in `prometheus_http`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import numpy as np
import requests
from prometheus_api_client import PrometheusConnect

from predictive_headroom.core.series import MAX_SAMPLE, History, from_epoch
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.policy.settings import (
    Settings,
    check_prometheus_url,
    clear_text_refusal,
    sent_in_the_clear,
)
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.bounded_read import Deadline, DeadlineExceeded, TooLarge
from predictive_headroom.sources.prometheus_http import (
    _auth,
    _connection_reason,
    _HttpError,
    _raise_for_status,
    _retry,
    attempts_made,
    is_read_timeout,
    redact_url,
)
from predictive_headroom.sources.prometheus_query import (
    BadAnswer,
    LabelSet,
    PointsError,
    _utc,
    check_points,
    chunk_ranges,
    many_series_message,
    parse_matrix,
    quality_warnings,
    query_window,
)

logger = logging.getLogger(__name__)


class _ReadLimits(NamedTuple):
    """How one range read is made and bounded; `knob` names the setting that sets `timeout`."""

    client: PrometheusConnect
    attempts: int
    timeout: float
    knob: str
    deadline: Deadline
    budget: float


_FETCH_ERRORS = (
    DeadlineExceeded,
    PointsError,
    TooLarge,
    _HttpError,
    requests.exceptions.SSLError,
    requests.exceptions.ConnectTimeout,
    requests.exceptions.ConnectionError,
    ValueError,
    KeyError,
    TypeError,
    requests.exceptions.RequestException,
)
"""What a range read can raise, most specific first; `_fetch_message` words each one."""


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
        self._secrets = [
            s for s in (urlsplit(self.url).password, password and password.get_secret_value()) if s
        ]
        auth = _auth(settings)
        ca_file = settings.prometheus_ca_file
        if ca_file is not None and not Path(ca_file).is_file():
            raise SourceError(
                f"the Prometheus CA bundle file {ca_file} does not exist (PH_PROMETHEUS_CA_FILE)"
            )
        verify: bool | str = str(ca_file) if ca_file else settings.prometheus_verify_tls
        if verify is False:
            logger.warning(
                "TLS certificate verification is off for Prometheus at %s", self.display_url
            )
        self._attempts = settings.prometheus_retries + 1
        where = f"Prometheus at {self.display_url}"
        self._deadline = Deadline(settings.prometheus_max_bytes)
        self._fresh_deadline = Deadline(settings.prometheus_max_bytes)
        self._client = self._connect(
            verify, auth, _retry(settings.prometheus_retries, backoff_factor, where)
        )
        # The reconcile's read of the latest observations: one attempt, its own short timeout, so a
        # hung Prometheus costs a reconcile PH_FRESH_READ_TIMEOUT at most. Its own session, because
        # the retry policy is mounted on the session.
        self._fresh_client = self._connect(verify, auth, _retry(0, backoff_factor, where), True)

    def _connect(
        self,
        verify: bool | str,
        auth: requests.auth.AuthBase | None,
        retry: Any,
        fresh: bool = False,
    ) -> PrometheusConnect:
        session = requests.Session()
        session.verify = verify
        deadline = self._fresh_deadline if fresh else self._deadline
        session.hooks["response"] = [deadline.hook, _raise_for_status]
        settings = self._settings
        return PrometheusConnect(
            url=self.url,
            headers=dict(settings.prometheus_headers) or None,
            retry=retry,
            auth=auth,
            session=session,
            timeout=settings.fresh_read_timeout if fresh else settings.prometheus_timeout,  # type: ignore[arg-type]
        )

    def history(self, spec: ForecastSpec, end: float) -> History:
        """Return `spec.query` over `spec.history` up to `end` at `spec.step` (grid-aligned, nothing after `end`)."""
        return self.series(spec.query, spec.step.total_seconds(), spec.history.total_seconds(), end)

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        """Return `spec.query` over the last `span_seconds` up to `end` at `spec.step` (one short range
        query, one attempt, answered within `PH_FRESH_READ_TIMEOUT` or failed)."""
        return self.series(spec.query, spec.step.total_seconds(), span_seconds, end, fresh=True)

    def series(
        self,
        query: str,
        step_seconds: float,
        span_seconds: float,
        end: float,
        *,
        fresh: bool = False,
    ) -> History:
        """Return `query` over the last `span_seconds` up to `end` at `step_seconds` (grid-aligned,
        nothing after `end`); `fresh`: one attempt within `PH_FRESH_READ_TIMEOUT`, as `recent`."""
        start, stop = query_window(end, span_seconds, step_seconds)
        return self._query(query, start, stop, step_seconds, fresh=fresh)

    def query_range(self, query: str, start: float, end: float, step_seconds: float) -> History:
        """Return the single series `query` yields on the grid start, start+step, ... <= end.

        Long ranges are fetched in pieces below Prometheus's per-request point limit. NaN/Inf samples
        are dropped and gaps kept; both are noted in `warnings`. Raises SourceError when there is no
        usable single series.
        """
        return self._query(query, start, end, step_seconds, fresh=False)

    def _query(
        self, query: str, start: float, end: float, step_seconds: float, fresh: bool
    ) -> History:
        step = float(round(step_seconds))
        if step < 1 or abs(step - step_seconds) > 1e-9:
            raise SourceError(
                f"the query step must be a whole number of seconds, got {step_seconds:g}s"
            )
        start = float(math.ceil(start))
        series: dict[LabelSet, list[tuple[np.ndarray, np.ndarray]]] = {}
        for first, last in chunk_ranges(start, end, step):
            for labels, arrays in self._fetch(query, first, last, step, fresh).items():
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

    def _clean(
        self,
        query: str,
        times: np.ndarray,
        values: np.ndarray,
        start: float,
        end: float,
        step: float,
    ) -> History:
        finite = np.isfinite(values)
        huge = finite & (np.abs(np.where(finite, values, 0.0)) > MAX_SAMPLE)
        finite &= ~huge
        warnings = []
        if not finite.any():
            raise SourceError(
                f"query {query!r}: all {values.size} samples between {_utc(start)} and {_utc(end)} are "
                f"NaN or infinite (or beyond {MAX_SAMPLE:.0e}); check for division by zero (e.g. a "
                "rate ratio with an idle denominator)"
            )
        if not finite.all():
            dropped = int(values.size - finite.sum() - huge.sum())
            if dropped:
                warnings.append(
                    f"query {query!r}: dropped {dropped} NaN/infinite sample(s) of {values.size}"
                )
            if huge.any():
                warnings.append(
                    f"query {query!r}: dropped {int(huge.sum())} sample(s) beyond {MAX_SAMPLE:.0e} "
                    f"of {values.size} (they overflow the arithmetic); check the query's units"
                )
            times, values = times[finite], values[finite]
        warnings += quality_warnings(times, start, end, step, query)
        for line in warnings:
            logger.warning("%s", line)
        self.warnings = tuple(warnings)
        logger.debug("query %r: %d points from %s", query, times.size, self.display_url)
        return History(times, values, source=f"prometheus {self.display_url} {query}")

    def _fetch(
        self, query: str, start: float, end: float, step: float, fresh: bool = False
    ) -> dict[LabelSet, tuple[np.ndarray, np.ndarray]]:
        """One range request, its answer parsed; every failure (an odd answer included) becomes a
        SourceError that says what to check or exactly what came back."""
        limits = self._read_limits(fresh)
        try:
            result = limits.deadline.within(
                limits.budget,
                lambda: limits.client.custom_query_range(
                    query, from_epoch(start), from_epoch(end), f"{step:.0f}"
                ),
            )
            series = parse_matrix(result)
            check_points(series, query, start, end, step)
            return series
        except _FETCH_ERRORS as exc:
            message = self._fetch_message(exc, query, limits)
        raise SourceError(self._scrub(message))

    def _read_limits(self, fresh: bool) -> _ReadLimits:
        """The client, attempts, timeout (and the setting naming it) and deadline of a read: the
        fresh-read ones (one attempt) for `fresh`, else the history reads' (budget for all attempts)."""
        if fresh:
            timeout = self._settings.fresh_read_timeout
            return _ReadLimits(
                self._fresh_client,
                1,
                timeout,
                "PH_FRESH_READ_TIMEOUT",
                self._fresh_deadline,
                timeout,
            )
        timeout = self._settings.prometheus_timeout
        return _ReadLimits(
            self._client,
            self._attempts,
            timeout,
            "PH_PROMETHEUS_TIMEOUT",
            self._deadline,
            timeout * self._attempts,
        )

    def _fetch_message(self, exc: Exception, query: str, limits: _ReadLimits) -> str:
        """What went wrong with a read of `query` and what to check, for one of `_FETCH_ERRORS`
        (tested in that order, so a subclass gets its own message)."""
        where = f"Prometheus at {self.display_url}"
        attempts, timeout = limits.attempts, limits.timeout
        if isinstance(exc, DeadlineExceeded):
            return self._deadline_message(exc, limits.budget, limits.knob)
        if isinstance(exc, PointsError):
            return f"{where}: {exc}"
        if isinstance(exc, BadAnswer):
            return f"{where} answered the range query {query!r} with {exc}"
        if isinstance(exc, TooLarge):
            return (
                f"{where} sent more than {exc.cap:,} bytes for {query!r} (PH_PROMETHEUS_MAX_BYTES); "
                "the answer was refused: make the query return one series at the configured step"
            )
        if isinstance(exc, _HttpError):
            return self._http_message(exc, query, attempts)
        if isinstance(exc, requests.exceptions.SSLError):
            return _tls_message(exc, where)
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return (
                f"cannot reach {where}: connect timeout ({timeout:g}s) after "
                f"{attempts_made(exc, attempts)} attempt(s); check the URL and the network path"
            )
        if isinstance(exc, requests.exceptions.ConnectionError):
            if is_read_timeout(exc):
                return (
                    f"{where} accepted the connection but did not answer within {timeout:g}s (read "
                    f"timeout, {attempts_made(exc, 1)} attempt(s)); raise {limits.knob}, or make the "
                    "query cheaper (larger step, recording rule)"
                )
            return (
                f"cannot reach {where}: {_connection_reason(exc)} after "
                f"{attempts_made(exc, attempts)} attempt(s); check the URL and that Prometheus "
                "is running and reachable from here"
            )
        if isinstance(exc, ValueError | KeyError | TypeError):
            return (
                f"{where} sent an answer that is not a Prometheus query API response; check the URL"
            )
        return f"request to {where} failed: {type(exc).__name__}"

    def _deadline_message(self, exc: DeadlineExceeded, budget: float, knob: str) -> str:
        where = f"Prometheus at {self.display_url}"
        if exc.busy:
            return (
                f"{where}: earlier reads that missed their {budget:g}s deadline are still ending; "
                "not sending another one yet"
            )
        return (
            f"{where} did not finish answering within {budget:g}s (total deadline for connect, "
            f"headers and body; {exc.received:,} bytes received); raise {knob}, or make the query "
            "cheaper (larger step, recording rule)"
        )

    def _http_message(self, exc: _HttpError, query: str, attempts: int) -> str:
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
            return f"{where} failed ({status}) after {attempts} attempt(s): {exc.detail}"
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


def _tls_message(exc: BaseException, where: str) -> str:
    """What to do about a failed TLS handshake; an https:// URL pointed at plain HTTP gets its own."""
    text = str(exc).lower()
    if any(s in text for s in ("wrong version number", "record layer failure", "http request")):
        return (
            f"{where} does not speak TLS (the handshake got a plain-HTTP answer): the URL says "
            "https:// but the server is plain HTTP; write the URL with http://"
        )
    return (
        f"TLS connection to {where} failed ({_connection_reason(exc)}); set PH_PROMETHEUS_CA_FILE "
        "to the CA bundle that signed its certificate, or PH_PROMETHEUS_VERIFY_TLS=false to skip checks"
    )


def from_settings(
    settings: Settings, url: str | None = None, **kwargs: Any
) -> PrometheusSource | None:
    """Build the source for `url` (e.g. `--prometheus-url`) or `settings.prometheus_url`; None when neither is set.

    A URL without a scheme or host, or a plain http:// URL with credentials (unless
    PH_PROMETHEUS_INSECURE), is refused here with how to write it (SourceError), before any
    request is made."""
    chosen = url or settings.prometheus_url
    if chosen:
        try:
            check_prometheus_url(chosen)
        except ValueError as exc:
            raise SourceError(str(exc)) from None
        sent = sent_in_the_clear(
            chosen,
            token_file=settings.prometheus_bearer_token_file is not None,
            basic=bool(settings.prometheus_username or settings.prometheus_password),
            headers=settings.prometheus_headers,
        )
        if sent and not settings.prometheus_insecure:
            raise SourceError(
                clear_text_refusal(
                    chosen,
                    sent,
                    ca="PH_PROMETHEUS_CA_FILE",
                    allow="PH_PROMETHEUS_INSECURE=true (the chart's prometheus.insecure)",
                )
            )
    return PrometheusSource(chosen, settings, **kwargs) if chosen else None


class OneQuery:
    """`source` answering every pool with `query`, whatever its forecast section asks, over the
    span and at the step that section says (implements `Source`): `backtest --query` replays that
    series, and the daemon's view of the pool at the end (`app.review.daemon_now`) reads it too."""

    def __init__(self, source: PrometheusSource, query: str) -> None:
        self.source = source
        self.query = query

    def history(self, spec: ForecastSpec, end: float) -> History:
        """`query` over `spec.history` up to `end` at `spec.step`."""
        return self.source.series(
            self.query, spec.step.total_seconds(), spec.history.total_seconds(), end
        )

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        """`query` over the last `span_seconds` up to `end` at `spec.step`, as `recent` reads."""
        return self.source.series(
            self.query, spec.step.total_seconds(), span_seconds, end, fresh=True
        )
