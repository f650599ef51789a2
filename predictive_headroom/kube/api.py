"""Calls to the Kubernetes API and what their failures mean: `_call` runs one call with the
timeout and retries of `CallOptions`, and `_Op` turns a failure into a message that names the
pool, the object and the missing permission or CRD. Which CapacityBuffer version a cluster
serves is found by `kube.discovery`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from predictive_headroom.kube.errors import (
    CLIENT_ERRORS,
    Forbidden,
    KubeError,
    NotFound,
    ServerError,
    Throttled,
    Unreachable,
    mapped,
    retry_after,
    transient,
)
from predictive_headroom.kube.errors import short as _short
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
    longest_wait: float = 30.0
    """A Retry-After longer than this (seconds) is not waited for within one call: the call fails
    as `Throttled` and the next reconcile tries again."""

    def retrying(self, fence: Fence | None = None) -> Retrying:
        """Retry 5xx, 429 and connection/timeout errors with exponential backoff and jitter.

        A 429/503 with `Retry-After` waits at least that long before the next attempt, when the
        wait fits in `longest_wait` and, for a write, in the lease `fence`; otherwise no further
        attempt is made and the failure is raised.
        """
        backoff = wait_exponential_jitter(
            multiplier=self.backoff_initial, max=self.backoff_max, jitter=self.backoff_initial
        )

        def wait(state: RetryCallState) -> float:
            asked = _asked(state)
            return max(asked, backoff(state)) if asked is not None else backoff(state)

        def stop(state: RetryCallState) -> bool:
            if stop_after_attempt(self.attempts)(state):
                return True
            asked = _asked(state)
            if asked is None:
                return False
            room = self.longest_wait if fence is None else min(self.longest_wait, fence())
            return asked + MIN_WRITE_SECONDS > room

        return Retrying(
            retry=retry_if_exception(transient),
            stop=stop,
            wait=wait,
            before_sleep=lambda state: logger.info(
                "retrying Kubernetes call (attempt %d failed: %s)",
                state.attempt_number,
                _short(state.outcome.exception() or RuntimeError("?")) if state.outcome else "?",
            ),
            reraise=True,
        )


def _asked(state: RetryCallState) -> float | None:
    """The Retry-After of the failed attempt in `state`, None when it asked for none."""
    exc = state.outcome.exception() if state.outcome else None
    return retry_after(exc) if exc is not None else None


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
            return f"{self.verb} {self.resource} (selector {self.name!r})"
        obj = f"{self.namespace}/{self.name}" if self.namespaced else self.name
        return f"pool {self.pool}: {self.verb} {self.resource} {obj}"

    def explain(self, err: KubeError, options: CallOptions) -> str:
        """What failed, for a person: the object, and the permission, CRD or wait it needs."""
        obj = f"{self.namespace}/{self.name}" if self.namespaced else self.name
        if not self.namespace:  # cluster-scoped: listing nodes
            where = f"{self.verb} {self.resource} (selector {self.name!r})"
            if isinstance(err, Forbidden):
                return (
                    f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                    f"cluster-wide (a ClusterRole) — see deploy/ (server said: {err.reason})"
                )
        else:
            where = f"pool {self.pool}: {self.verb} {self.resource} {obj}" + (
                "" if self.namespaced else " (cluster-scoped)"
            )
        if isinstance(err, Forbidden):
            if not self.namespaced:
                return (
                    f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                    f"(API group '{self.group}') named {self.name} cluster-wide: {self.api_version} "
                    f"{self.resource} are cluster-scoped, so this takes a ClusterRole with resourceNames (Helm "
                    f"value capacityBuffer.scope: Cluster; see deploy/) (server said: {err.reason})"
                )
            return (
                f"{where}: forbidden: the daemon's ServiceAccount needs '{self.verb}' on {self.resource} "
                f"(API group '{self.group}') named {self.name} in namespace {self.namespace} — see the Role "
                f"in deploy/ (server said: {err.reason})"
            )
        if isinstance(err, NotFound):
            if self.kind == "CapacityBuffer" and not err.details.get("name"):
                return (
                    f"{where}: the API {self.api_version} {self.resource} is no longer served by this cluster "
                    "(the autoscaler was upgraded or its CRD changed); the version is looked up again by API "
                    "discovery on the next reconcile"
                )
            return (
                f"{where}: {self.kind} {obj} not found: create the placeholder "
                f"{self.kind} or fix the target of pool {self.pool}"
            )
        if isinstance(err, Throttled) and err.retry_after is not None:
            return (
                f"{where}: the API server is throttling ({err.status}, Retry-After "
                f"{err.retry_after:g}s, more than this call could wait); will try again next reconcile"
            )
        if isinstance(err, (Throttled, ServerError, Unreachable)):
            return f"{where}: failed after {options.attempts} attempt(s) (timeout {options.timeout:g}s): {err}"
        return f"{where}: {err}"


def _call(
    op: _Op,
    options: CallOptions,
    fn: Callable[..., T],
    error: type[ActuatorError] = ActuatorError,
    fence: Fence | None = None,
    **kwargs: Any,
) -> T:
    """Run one API call with timeout and retries; turn failures into typed `kube.errors` (with
    `error` other than ActuatorError: into `error`, chained to the typed one).

    With a `fence` (writes), every attempt first asks it how long this replica may still write:
    below `MIN_WRITE_SECONDS` the attempt is not sent and `LeaseLost` is raised; otherwise the
    attempt's timeout ends before the lease could pass to another replica, so the client never
    waits on a write past its leadership (the write's resourceVersion guards one the apiserver
    is still holding).
    """
    try:
        for attempt in options.retrying(fence):
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
    except LeaseLost:
        raise
    except CLIENT_ERRORS as exc:
        if isinstance(exc, ValueError):  # the client could not decode the answer (truncated)
            message = (
                f"{op.describe()}: the API server sent an answer that could not be read ({exc}); "
                "will try again next reconcile"
            )
        else:
            message = op.explain(mapped(exc, _short(exc)), options)
        typed = mapped(exc, message)
        if error is ActuatorError:
            raise typed from exc
        raise error(message) from typed
    raise AssertionError("unreachable: tenacity either returns or raises")
