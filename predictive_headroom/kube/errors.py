"""Kubernetes API failures as a small typed hierarchy, mapped in one place.

`mapped(exc, message)` turns what the `kubernetes` client raises (`ApiException`, a urllib3
transport error, a `ValueError` for an answer it could not decode) into a `KubeError` subclass with
the HTTP status and, for 429/503, the `Retry-After` the server asked for. Every place that calls
the client maps through here with the cause chained; callers catch these types and never look at
`ApiException` or `__cause__` themselves.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client import ApiException

from predictive_headroom.policy.echo import cut
from predictive_headroom.protocols import ActuatorError

MAX_RETRY_AFTER = 300.0
"""A Retry-After above this (seconds) is read as this: a server asking for hours is misconfigured."""


class KubeError(ActuatorError):
    """A Kubernetes API call failed; `status` is the HTTP status (None: no answer was had)."""

    status: int | None = None

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status if status is not None else type(self).status
        self.reason = reason
        """The server's own message (the Status body's `message`), when it sent one."""
        self.details: dict[str, Any] = {}
        """The Status body's `details` (`name`, `kind`), when it sent them."""


class NotFound(KubeError):
    """404: the object (or, with no `details['name']`, the whole API version) is not there."""

    status = 404


class Conflict(KubeError):
    """409: a write based on a stale read, or an object that already exists."""

    status = 409


class Forbidden(KubeError):
    """403: the ServiceAccount lacks a permission."""

    status = 403


class Gone(KubeError):
    """410: a list continue token or watch resource version that expired."""

    status = 410


class Throttled(KubeError):
    """429, or 503 with Retry-After: the server asked to be called again after `retry_after`
    seconds (None: a 429 that did not say)."""

    def __init__(
        self,
        message: str,
        status: int | None = 429,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status, reason)
        self.retry_after = retry_after


class ServerError(KubeError):
    """5xx (without Retry-After): the API server or something in front of it failed."""


class Unreachable(KubeError):
    """No answer: connection refused or reset, a timeout, TLS."""


class BadAnswer(KubeError):
    """An answer the client could not decode (truncated, not JSON)."""


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (`Retry-After` on a 429/503), capped; None when it did not."""
    if not isinstance(exc, ApiException) or exc.status not in (429, 503):
        return None
    headers = exc.headers or {}
    raw = headers.get("Retry-After") or headers.get("retry-after")
    try:
        seconds = float(str(raw).strip())
    except (TypeError, ValueError):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def transient(exc: BaseException) -> bool:
    """True for a failure worth another attempt: 429, 5xx, or no answer (connection, timeout)."""
    if isinstance(exc, ApiException):
        return exc.status == 429 or (exc.status or 0) >= 500
    return isinstance(exc, urllib3.exceptions.HTTPError)


def status_message(exc: ApiException) -> str:
    """The Status body's `message`, or the HTTP reason when the body has none."""
    try:
        return str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return str(exc.reason or "").strip()


def _details(exc: ApiException) -> dict[str, Any]:
    try:
        details = json.loads(exc.body or "").get("details")
    except (ValueError, AttributeError):
        return {}
    return details if isinstance(details, dict) else {}


_BY_STATUS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 403: Forbidden, 410: Gone}


def mapped(exc: BaseException, message: str) -> KubeError:
    """The typed error for a failure of the client (raise it `from exc`); `message` says what failed."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status, reason = exc.status, status_message(exc)
        wait = retry_after(exc)
        error: KubeError
        if status == 429 or wait is not None:
            error = Throttled(message, status, reason, wait)
        elif status in _BY_STATUS:
            error = _BY_STATUS[status](message, status, reason)
        elif (status or 0) >= 500:
            error = ServerError(message, status, reason)
        else:
            error = KubeError(message, status, reason)
        error.details = _details(exc)
        return error
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return Unreachable(message)
    return BadAnswer(message)


CLIENT_ERRORS = (ApiException, urllib3.exceptions.HTTPError, ValueError)
"""What the `kubernetes` client raises for a failed call; `mapped` types each of them."""


def short(exc: BaseException) -> str:
    """`<status> <server's message>` for an API answer, else the exception's type and text."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {cut(status_message(exc), 500)}"
    if isinstance(exc, KubeError) and exc.status is not None:
        return f"{exc.status} {cut(exc.reason, 500)}"
    return f"{type(exc).__name__}: {cut(exc, 500)}"
