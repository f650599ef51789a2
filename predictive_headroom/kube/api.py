"""Calls to the Kubernetes API and what their failures mean: `_call` runs one call with the
timeout and retries of `CallOptions`, and `_Op` turns a failure into a message that names the
pool, the object and the missing permission or CRD. Which CapacityBuffer version a cluster
serves is found by `kube.discovery`.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3
from kubernetes.client import ApiException
from kubernetes.client.exceptions import ConflictException
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from predictive_headroom.protocols import ActuatorError, LeaseLost

T = TypeVar("T")

Fence = Callable[[], float]
"""Seconds this replica may still send writes for: `math.inf` without leader election, at most the
time left before its Lease could pass to another replica, 0 when it does not lead."""

MIN_WRITE_SECONDS = 0.2
"""A write is not started with less lease time left than this."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallOptions:
    """Timeout and retry budget for every API call (tests use small values)."""

    timeout: float = 10.0
    attempts: int = 4
    backoff_initial: float = 0.5
    backoff_max: float = 5.0
    conflict_attempts: int = 5
    events: bool = True
    instance: str = field(default_factory=socket.gethostname)

    def retrying(self) -> Retrying:
        """Retry 5xx, 429 and connection/timeout errors with exponential backoff and jitter."""
        return Retrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential_jitter(
                multiplier=self.backoff_initial, max=self.backoff_max, jitter=self.backoff_initial
            ),
            before_sleep=lambda state: logger.info(
                "retrying Kubernetes call (attempt %d failed: %s)",
                state.attempt_number,
                _short(state.outcome.exception() or RuntimeError("?")) if state.outcome else "?",
            ),
            reraise=True,
        )


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status == 429 or (exc.status or 0) >= 500
    return isinstance(exc, urllib3.exceptions.HTTPError)


def _status_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return str(exc.reason or "").strip()


def _short(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {_status_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class _Op:
    """One API operation on a pool's target, for messages that say what failed."""

    verb: str
    resource: str
    group: str
    kind: str
    namespace: str
    name: str
    pool: str
    api_version: str = ""
    namespaced: bool = True
    """False for a cluster-scoped target (a CapacityBuffer version that discovery says is cluster-wide)."""

    def describe(self) -> str:
        """`pool <name>: <verb> <resource> <namespace>/<name>`, for messages."""
        if not self.namespace:
            return f"{self.verb} {self.resource} (label selector {self.name!r})"
        obj = f"{self.namespace}/{self.name}" if self.namespaced else self.name
        return f"pool {self.pool}: {self.verb} {self.resource} {obj}"

    def explain(self, exc: BaseException, options: CallOptions) -> str:
        obj = f"{self.namespace}/{self.name}" if self.namespaced else self.name
        if not self.namespace:  # cluster-scoped: listing nodes
            where = f"{self.verb} {self.resource} (label selector {self.name!r})"
            if isinstance(exc, ApiException) and exc.status == 403:
                return (
                    f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                    f"cluster-wide (a ClusterRole) — see deploy/ (server said: {_status_message(exc)})"
                )
        else:
            where = f"pool {self.pool}: {self.verb} {self.resource} {obj}" + (
                "" if self.namespaced else " (cluster-scoped)"
            )
        if isinstance(exc, ApiException) and exc.status == 403:
            if not self.namespaced:
                return (
                    f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                    f"(API group '{self.group}') named {self.name} cluster-wide: {self.api_version} "
                    f"{self.resource} are cluster-scoped, so this takes a ClusterRole with resourceNames (Helm "
                    f"value capacityBuffer.scope: Cluster; see deploy/) (server said: {_status_message(exc)})"
                )
            return (
                f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                f"(API group '{self.group}') named {self.name} in namespace {self.namespace} — see the Role "
                f"in deploy/ (server said: {_status_message(exc)})"
            )
        if isinstance(exc, ApiException) and exc.status == 404:
            details = _status_details(exc)
            if self.kind == "CapacityBuffer" and not details.get("name"):
                return (
                    f"{where}: the API {self.api_version} {self.resource} is no longer served by this cluster "
                    "(the autoscaler was upgraded or its CRD changed); the version is looked up again by API "
                    "discovery on the next reconcile"
                )
            return (
                f"{where}: {self.kind} {obj} not found: create the placeholder "
                f"{self.kind} or fix the target of pool {self.pool}"
            )
        if _transient(exc):
            return f"{where}: failed after {options.attempts} attempt(s) (timeout {options.timeout:g}s): {_short(exc)}"
        return f"{where}: {_short(exc)}"


def _status_details(exc: ApiException) -> dict[str, Any]:
    try:
        details = json.loads(exc.body or "").get("details")
    except (ValueError, AttributeError):
        return {}
    return details if isinstance(details, dict) else {}


def _call(
    op: _Op,
    options: CallOptions,
    fn: Callable[..., T],
    error: type[ActuatorError] = ActuatorError,
    fence: Fence | None = None,
    forbidden: type[ActuatorError] | None = None,
    **kwargs: Any,
) -> T:
    """Run one API call with timeout and retries; turn failures into `error` (409 passes through),
    a 403 into `forbidden` when given (for callers that carry on without the permission).

    With a `fence` (writes), every attempt first asks it how long this replica may still write:
    below `MIN_WRITE_SECONDS` the attempt is not sent and `LeaseLost` is raised; otherwise the
    attempt's timeout ends before the lease could pass to another replica, so the client never
    waits on a write past its leadership (the write's resourceVersion guards one the apiserver
    is still holding).
    """
    try:
        for attempt in options.retrying():
            with attempt:
                timeout = options.timeout
                if fence is not None:
                    left = fence()
                    if left < MIN_WRITE_SECONDS:
                        raise LeaseLost(
                            f"{op.describe()}: not sent (attempt {attempt.retry_state.attempt_number}): "
                            "this replica no longer holds the leader Lease; the new leader writes"
                        )
                    timeout = min(timeout, left)
                return fn(**kwargs, _request_timeout=timeout)
    except (ConflictException, LeaseLost):
        raise
    except (ApiException, urllib3.exceptions.HTTPError) as exc:
        denied = forbidden is not None and isinstance(exc, ApiException) and exc.status == 403
        raise (forbidden if denied and forbidden else error)(op.explain(exc, options)) from exc
    except ValueError as exc:  # the client could not decode the answer (truncated, not JSON)
        raise error(
            f"{op.describe()}: the API server sent an answer that could not be read ({exc}); "
            "will try again next reconcile"
        ) from exc
    raise AssertionError("unreachable: tenacity either returns or raises")
