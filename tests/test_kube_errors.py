"""Kubernetes client failures become one typed error each (kube/errors.py), with the cause chained
by the caller; the message a user reads is the one given."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client import ApiException

from predictive_headroom.kube.errors import (
    BadAnswer,
    Conflict,
    Forbidden,
    Gone,
    KubeError,
    NotFound,
    ServerError,
    Throttled,
    Unreachable,
    mapped,
    retry_after,
)
from predictive_headroom.protocols import ActuatorError


def api_error(status: int, retry: str | None = None, name: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="Reason")
    exc.body = json.dumps({"message": f"said {status}", "details": {"name": name} if name else {}})
    exc.headers = {"Retry-After": retry} if retry is not None else {}
    return exc


@pytest.mark.parametrize(
    ("exc", "kind", "status"),
    [
        (api_error(404, name="web"), NotFound, 404),
        (api_error(409), Conflict, 409),
        (api_error(403), Forbidden, 403),
        (api_error(410), Gone, 410),
        (api_error(429), Throttled, 429),
        (api_error(503, retry="7"), Throttled, 503),
        (api_error(503), ServerError, 503),
        (api_error(500), ServerError, 500),
        (api_error(422), KubeError, 422),
        (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), Unreachable, None),
        (ValueError("truncated JSON"), BadAnswer, None),
    ],
)
def test_each_client_failure_maps_to_one_type(exc, kind, status) -> None:
    error = mapped(exc, "pool web: patch deployments/scale apps/web-placeholder: what failed")
    assert type(error) is kind and isinstance(error, ActuatorError)
    assert error.status == status
    assert str(error) == "pool web: patch deployments/scale apps/web-placeholder: what failed"


def test_the_server_message_details_and_retry_after_are_kept() -> None:
    error = mapped(api_error(404, name="web"), "m")
    assert error.reason == "said 404" and error.details == {"name": "web"}
    throttled = mapped(api_error(429, retry="30"), "m")
    assert isinstance(throttled, Throttled) and throttled.retry_after == 30
    assert isinstance(mapped(api_error(429), "m"), Throttled)
    assert mapped(api_error(429), "m").retry_after is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("30", 30.0), (" 2 ", 2.0), ("-5", 0.0), ("86400", 300.0), ("soon", None), (None, None)],
)
def test_retry_after_is_read_in_seconds_and_capped(header: str | None, seconds) -> None:
    assert retry_after(api_error(429, retry=header)) == seconds
    assert retry_after(api_error(500, retry="3")) is None  # only 429 and 503 ask to wait
