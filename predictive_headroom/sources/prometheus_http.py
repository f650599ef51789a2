"""HTTP pieces of the Prometheus source: credentials (bearer token file or basic auth), the retry
policy, the response hook that turns error answers into `_HttpError`, short connection-failure
reasons, and URL redaction for logs and messages.

`predictive_headroom.sources.prometheus.PrometheusSource` puts these together into its session and turns
each failure into a `SourceError` that says what to check.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from urllib3.exceptions import MaxRetryError, ReadTimeoutError
from urllib3.util.retry import Retry

from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import SourceError

logger = logging.getLogger(__name__)

RETRY_STATUSES = (500, 502, 503, 504)
SMALL_ANSWER = 64 * 1024
"""An answer this small is looked at for `"status": "error"` (an error answer is a few hundred
bytes; a large one is data and is parsed once, by the caller)."""


def redact_url(url: str) -> str:
    """Return `url` without user:password and query string, fit for logs and error messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _HttpError(Exception):
    """A non-2xx answer, with Prometheus's own error text when it sent one."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.reason, self.detail = status, reason, detail


def _raise_for_status(
    response: requests.Response, *_args: Any, **_kwargs: Any
) -> requests.Response:
    """requests response hook: turn an error answer into _HttpError carrying Prometheus's message,
    also one sent with HTTP 200 (`"status": "error"`, which some proxies and remote-read
    front ends do)."""
    if response.status_code < 400:
        body = response.content or b""
        if len(body) <= SMALL_ANSWER and b'"error"' in body:
            try:
                answer = response.json()
            except ValueError:
                return response
            if isinstance(answer, dict) and answer.get("status") == "error":
                detail = f"{answer.get('error')} ({answer.get('errorType', 'error')})"
                raise _HttpError(response.status_code, "with status error", detail)
        return response
    try:
        body = response.json()
        detail = f"{cut(body['error'], 300)} ({cut(body.get('errorType', 'error'))})"
    except (ValueError, KeyError, TypeError):
        detail = cut(" ".join(response.text.split()), 300)
    raise _HttpError(response.status_code, response.reason or "", detail)


class _BearerTokenFile(requests.auth.AuthBase):
    """Sends the token stored in a file, read at every request so a rotated mounted Secret is used."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SourceError(
                f"cannot read the Prometheus bearer token file {self.path}: {exc.strerror or exc}"
            ) from None
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


def attempts_made(exc: BaseException, default: int) -> int:
    """How many attempts a failed request made (`default` when the failure does not say)."""
    inner = exc.args[0] if exc.args else None
    return int(getattr(inner, "attempts", default))


def is_read_timeout(exc: BaseException) -> bool:
    """True when the connection was made but the answer did not come in time (not a connect timeout).

    requests reports a read timeout that used up urllib3's retries as a ConnectionError wrapping
    `MaxRetryError(reason=ReadTimeoutError)`; this looks inside.
    """
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return True
    inner = exc.args[0] if exc.args else None
    return isinstance(inner, MaxRetryError) and isinstance(inner.reason, ReadTimeoutError)


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
            raise SourceError(
                "Prometheus basic auth needs both PH_PROMETHEUS_USERNAME and PH_PROMETHEUS_PASSWORD"
            )
        return requests.auth.HTTPBasicAuth(user, password.get_secret_value())
    return None


class _AnnouncedRetry(Retry):
    """urllib3's Retry that says each retried attempt once, in our words, and names no query.

    urllib3 itself logs `Retrying (Retry(total=2, ...)) after connection broken by ...` with the
    full query URL; `_QuietRetries` drops those lines for this class only.
    """

    where: str = "Prometheus"

    def new(self, **kw: Any) -> _AnnouncedRetry:
        out = super().new(**kw)
        out.where = self.where
        return out

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> _AnnouncedRetry:
        try:
            new = super().increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError as exc:  # no tries left: say how many were made
            exc.attempts = len(self.history) + 1  # type: ignore[attr-defined]
            raise
        failed = len(new.history)
        cause = (
            _connection_reason(error)
            if error is not None
            else f"HTTP {getattr(response, 'status', '?')}"
        )
        wait = new.get_backoff_time()
        logger.warning(
            "%s: attempt %d of %d failed (%s); %s",
            self.where,
            failed,
            failed + (new.total or 0) + 1,
            cause,
            f"retrying in {wait:.1f}s" if wait > 0 else "retrying",
        )
        return new


class _QuietRetries(logging.Filter):
    """Drops urllib3's own `Retrying (...)` warning when `_AnnouncedRetry` has said it already."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and isinstance(args[0], _AnnouncedRetry))


_QUIET = _QuietRetries()


def _retry(retries: int, backoff_factor: float, where: str = "Prometheus") -> Retry:
    """Retry connection errors and 5xx answers with exponential backoff; never 4xx, never read timeouts.

    Each retried attempt is logged once at WARNING as `<where>: attempt n of m failed (cause)`.
    """
    pool_logger = logging.getLogger("urllib3.connectionpool")
    if _QUIET not in pool_logger.filters:
        pool_logger.addFilter(_QUIET)
    retry = _AnnouncedRetry(
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
    retry.where = where
    return retry
