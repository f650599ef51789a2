"""Leader election on a coordination.k8s.io/v1 Lease, so two daemon replicas never both scale.

Implemented directly on the Lease API (read, create, replace with resourceVersion) with the
rules of client-go's leaderelection, because the `kubernetes` client's own helper runs a
blocking loop with no way to stop it or release the Lease, builds its own global API client,
sets no request timeouts and only accepts whole-second periods.

Rules:
- A candidate takes the Lease when it does not exist, when its holder is empty (released), or
  when the record (holder, resourceVersion) has not changed for `leaseDurationSeconds` as seen
  by this candidate's own monotonic clock (no comparison of clocks between machines).
- The leader renews every `retry_period`. It is leader only until `renew_deadline` after the
  start of its last successful renewal, which is shorter than the lease duration a follower
  waits, so a leader that cannot renew (API errors, slow answers) stops being leader before
  anyone else can start: `is_leader` is computed from that deadline at the moment it is read.
- Writes are fenced: `write_budget()` says how long this replica may still send writes (the time
  left before its renew deadline), and every write attempt is cut to fit in it
  (`kube.api._call`), so no write is sent or waited on after a follower could take over.
- A replica whose work is stuck does not hold on: `healthy()` (the daemon's loop check) is asked
  before every acquire or renewal, and a replica that is not healthy neither takes nor renews the
  Lease, so another replica takes over within one lease duration.
- An answer that cannot be read (truncated JSON, a proxy's error page) is one log line with the
  cause, like any failed renewal.
- A Lease whose `renewTime` or `acquireTime` cannot be parsed is read anyway (the times are never
  compared, as in client-go): one WARNING per such record naming the field and value,
  `on_unreadable` is told (the daemon counts `errors_total{kind="lease"}`), and the Lease is
  taken over once its record has not changed for the lease duration, as observed locally.
- `stop()` first stops leading, then releases the Lease (empty holder) so a follower takes
  over on its next try instead of waiting for the lease to expire.
- What a leader keeps for the next one rides on its own Lease writes: `carry(key, value)` sets
  an annotation written with each renewal and the release (no request of its own); every write
  keeps the Lease's other annotations, and `annotation(key)` is the Lease's as last read.
"""

from __future__ import annotations

import json
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import kubernetes.client
from kubernetes.client import (
    ApiClient,
    V1Lease,
    V1LeaseSpec,
    V1ObjectMeta,
)

from predictive_headroom.kube.errors import (
    CLIENT_ERRORS,
    BadAnswer,
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    mapped,
    short,
)
from predictive_headroom.policy.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class LeaseRecord:
    """What the election reads of a Lease (the raw JSON, so an unparseable time cannot stop it)."""

    holder: str
    resource_version: str
    duration: int | None
    transitions: int
    acquire_time: datetime | None
    unreadable: tuple[str, ...]
    """`field 'value'` of each time that could not be parsed."""
    annotations: tuple[tuple[str, str], ...] = ()
    """The Lease's annotations (what a leader keeps for the next one, `carry`)."""

    @classmethod
    def from_json(cls, lease: dict[str, Any]) -> LeaseRecord:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        unreadable, times = [], {}
        for field in ("acquireTime", "renewTime"):
            text = spec.get(field)
            times[field] = _lease_time(text)
            if text is not None and times[field] is None:
                unreadable.append(f"spec.{field} {text!r}")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            duration=duration if isinstance(duration, int) and duration > 0 else None,
            transitions=transitions if isinstance(transitions, int) else 0,
            acquire_time=times["acquireTime"],
            unreadable=tuple(unreadable),
            annotations=tuple((str(k), str(v)) for k, v in (meta.get("annotations") or {}).items()),
        )


def _lease_time(text: Any) -> datetime | None:
    """A Lease's MicroTime (`2026-11-24T20:00:00.000000Z`), None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LeaseTiming:
    """Seconds: how long a lease is valid, how long a leader may fail to renew, how often to try."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"need 0 < retry_period ({self.retry_period:g}s) < renew_deadline ({self.renew_deadline:g}s) "
                f"< lease_duration ({self.lease_duration:g}s)"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> LeaseTiming:
        """Timing from `PH_LEASE_DURATION`, with client-go's proportions (15 s / 10 s / 2 s)."""
        duration = settings.lease_duration
        return cls(duration, duration * 2 / 3, duration * 2 / 15)


def default_identity() -> str:
    """`<hostname>_<random>`: the pod name in a cluster, unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Campaigns for a Lease in a background thread; `is_leader` says whether this process may write."""

    def __init__(
        self,
        api_client: ApiClient,
        namespace: str,
        name: str,
        identity: str | None = None,
        timing: LeaseTiming | None = None,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        healthy: Callable[[], str | None] | None = None,
        on_unreadable: Callable[[str], None] | None = None,
    ) -> None:
        """`healthy()` returns None when this replica's work runs, else why not (then it lets the
        Lease go)."""
        self.namespace, self.name = namespace, name
        self.identity = identity or default_identity()
        self.timing = timing or LeaseTiming()
        self._api = kubernetes.client.CoordinationV1Api(api_client)
        self.on_started = on_started_leading
        self.on_stopped = on_stopped_leading
        self.healthy = healthy
        self.on_unreadable = on_unreadable
        """Told (with what could not be read) of each Lease record with an unparseable time."""
        self._unhealthy: str | None = None
        self._lock = threading.Lock()
        self._leading = False
        self._valid_until = 0.0
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lease_annotations: dict[str, str] = {}
        """The Lease's annotations as last read (or written) by this replica."""
        self._carried: dict[str, str] = {}
        """Annotations this replica, while it leads, writes with each renewal (`carry`)."""
        self.term = 0
        """Counts the times this replica started leading (a new term starts from the Lease)."""
        self._last_carried: dict[str, str] = {}  # what it carried when it stopped leading

    @classmethod
    def from_settings(
        cls, api_client: ApiClient, settings: Settings, **kwargs: object
    ) -> LeaderElector:
        """An elector for the Lease `settings.lease_name` in `settings.namespace`."""
        return cls(
            api_client,
            settings.namespace,
            settings.lease_name,
            timing=LeaseTiming.from_settings(settings),
            **kwargs,
        )  # type: ignore[arg-type]

    @property
    def is_leader(self) -> bool:
        """True while this process holds the Lease and renewed it within the renew deadline."""
        with self._lock:
            return self._leading and time.monotonic() < self._valid_until

    def write_budget(self) -> float:
        """Seconds this process may still send writes for (0 when it does not lead)."""
        with self._lock:
            return max(0.0, self._valid_until - time.monotonic()) if self._leading else 0.0

    def annotation(self, key: str) -> str | None:
        """The Lease's annotation `key` as this replica last read or wrote it (None: absent)."""
        with self._lock:
            return self._lease_annotations.get(key)

    def carry(self, key: str, value: str) -> None:
        """Write annotation `key` with this leader's next renewal (and its release), so the next
        leader finds it: no request of its own. Ignored unless leading; forgotten on stepping
        down (a new leader starts from what the Lease says)."""
        with self._lock:
            if self._leading:
                self._carried[key] = value

    def start(self) -> None:
        """Start campaigning in a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("LeaderElector.start() called twice")
        logger.info(
            "leader election: %s campaigning for Lease %s/%s",
            self.identity,
            self.namespace,
            self.name,
        )
        self._thread = threading.Thread(target=self._run, name=f"leader-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop campaigning; stop leading at once and (by default) release the Lease for a fast handover."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        was_leading = self._step_down("stopping")
        if release and was_leading:
            self._release()

    def wait_until_leader(self, timeout: float) -> bool:
        """Block until this process leads or `timeout` seconds pass; return `is_leader`."""
        deadline = time.monotonic() + timeout
        while not self.is_leader and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(min(0.05, self.timing.retry_period / 4))
        return self.is_leader

    # -- the campaign loop ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # one bad round must not end the campaign
                logger.exception(
                    "leader election: unexpected error for Lease %s/%s", self.namespace, self.name
                )
            if self._leading and time.monotonic() >= self._valid_until:
                self._step_down(f"could not renew the Lease within {self.timing.renew_deadline:g}s")
            period = self.timing.retry_period
            self._stop.wait(period if self._leading else random.uniform(period, period * 1.2))

    @property
    def _request_timeout(self) -> float:
        return self.timing.renew_deadline / 2

    def _sick(self) -> bool:
        """True when `healthy()` reports a problem (logged once per change): no acquire, no renewal."""
        problem = self.healthy() if self.healthy is not None else None
        if (problem is None) != (self._unhealthy is None):
            if problem:
                logger.error(
                    "leader election: %s is not healthy (%s): not %s Lease %s/%s",
                    self.identity,
                    problem,
                    "renewing" if self._leading else "campaigning for",
                    self.namespace,
                    self.name,
                )
            else:
                logger.info("leader election: %s is healthy again, campaigning", self.identity)
            self._unhealthy = problem
        if problem:
            self._step_down(f"not healthy: {problem}")
        return problem is not None

    def _tick(self) -> None:
        if self._sick():
            return
        started = time.monotonic()
        try:
            lease = self._read()
        except NotFound:
            self._create(started)
            return
        except KubeError as exc:
            self._failed("read", exc)
            return
        with self._lock:
            self._lease_annotations = dict(lease.annotations)
        holder = lease.holder
        record = (holder, lease.resource_version)
        if record != self._observed:
            self._observed, self._observed_at = record, started
            if lease.unreadable:
                self._unreadable(lease)
        if holder and holder != self.identity:
            duration = lease.duration or math.ceil(self.timing.lease_duration)
            if started < self._observed_at + duration:
                return  # someone else leads and their lease has not expired
            logger.info(
                "leader election: Lease %s/%s held by %s expired, taking it",
                self.namespace,
                self.name,
                holder,
            )
        now = _now()
        renewing = holder == self.identity
        with self._lock:  # its annotations, with what this leader carries on a renewal
            carried = self._carried if renewing and self._leading else {}
            annotations = {**dict(lease.annotations), **carried}
        replacement = V1Lease(
            metadata=V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                resource_version=lease.resource_version,
                annotations=annotations or None,
            ),
            spec=V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=math.ceil(self.timing.lease_duration),
                acquire_time=lease.acquire_time if renewing and lease.acquire_time else now,
                renew_time=now,
                lease_transitions=lease.transitions + (0 if renewing or not holder else 1),
            ),
        )
        try:
            self._client(self._api.replace_namespaced_lease, self.name, self.namespace, replacement)
        except KubeError as exc:
            self._failed("renew" if renewing else "acquire", exc)
            return
        with self._lock:
            self._lease_annotations = annotations
        self._renewed(started)

    def _read(self) -> LeaseRecord:
        """The Lease, read as JSON (the client's model refuses a time it cannot parse)."""
        answer = self._client(
            self._api.read_namespaced_lease, self.name, self.namespace, _preload_content=False
        )
        try:
            lease = json.loads(answer.data)
        except ValueError as exc:
            raise BadAnswer(
                f"the API server sent an answer that could not be read ({exc})"
            ) from None
        if not isinstance(lease, dict):
            raise BadAnswer("the API server sent a Lease that is not a JSON object")
        return LeaseRecord.from_json(lease)

    def _unreadable(self, lease: LeaseRecord) -> None:
        """Say (once per record) that the Lease has times that cannot be parsed."""
        what = ", ".join(lease.unreadable)
        logger.warning(
            "leader election: Lease %s/%s (holder %s) has %s that cannot be parsed as a time; "
            "it is %s",
            self.namespace,
            self.name,
            lease.holder or "none",
            what,
            "rewritten at the next renewal"
            if lease.holder in ("", self.identity)
            else "taken over if its record does not change within the lease duration",
        )
        if self.on_unreadable is not None:
            self.on_unreadable(what)

    def _create(self, started: float) -> None:
        now = _now()
        lease = V1Lease(
            metadata=V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=math.ceil(self.timing.lease_duration),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._client(self._api.create_namespaced_lease, self.namespace, lease)
        except KubeError as exc:
            self._failed("create", exc)
            return
        self._renewed(started)

    def _renewed(self, started: float) -> None:
        with self._lock:
            newly = not self._leading
            self._leading = True
            self._valid_until = started + self.timing.renew_deadline
            self.term += 1 if newly else 0
        if newly:
            logger.info(
                "leader election: %s is now the leader (Lease %s/%s)",
                self.identity,
                self.namespace,
                self.name,
            )
            if self.on_started:
                self.on_started()

    def _client(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """One call of the Lease API with this elector's timeout; failures typed by `kube.errors`."""
        try:
            return fn(*args, _request_timeout=self._request_timeout, **kwargs)
        except CLIENT_ERRORS as exc:
            if isinstance(exc, ValueError):
                what = f"the API server sent an answer that could not be read ({exc})"
            else:
                what = short(exc)
            raise mapped(exc, what) from exc

    def _failed(self, action: str, exc: KubeError) -> None:
        if isinstance(exc, Conflict):
            logger.debug("leader election: %s lost a race to %s the Lease", self.identity, action)
            return
        what = (
            str(exc)
            if isinstance(exc, BadAnswer) or exc.status is None
            else (f"{exc.status} {exc.reason}")
        )
        if isinstance(exc, Forbidden):
            what += (
                f" (the daemon's ServiceAccount needs get, create and update on leases in API group "
                f"coordination.k8s.io in namespace {self.namespace}; see deploy/)"
            )
        log = logger.warning if self._leading else logger.info
        log(
            "leader election: could not %s Lease %s/%s: %s", action, self.namespace, self.name, what
        )

    def _step_down(self, why: str) -> bool:
        with self._lock:
            was = self._leading
            self._leading = False
            carried, self._carried = self._carried, {}
        if was:
            self._last_carried = carried  # written once more by `_release` when stopping
            logger.warning("leader election: %s stopped leading: %s", self.identity, why)
            if self.on_stopped:
                self.on_stopped()
        return was

    def _release(self) -> None:
        """Empty the holder so a follower can take the Lease at once (only if we still hold it)."""
        try:
            lease = self._read()
            if lease.holder != self.identity:
                return
            annotations = {**dict(lease.annotations), **self._last_carried}
            released = V1Lease(
                metadata=V1ObjectMeta(
                    name=self.name,
                    namespace=self.namespace,
                    resource_version=lease.resource_version,
                    annotations=annotations or None,
                ),
                spec=V1LeaseSpec(
                    holder_identity=None,
                    lease_duration_seconds=1,
                    renew_time=_now(),
                    acquire_time=lease.acquire_time,
                    lease_transitions=lease.transitions,
                ),
            )
            self._client(self._api.replace_namespaced_lease, self.name, self.namespace, released)
            logger.info(
                "leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name
            )
        except KubeError as exc:
            logger.warning(
                "leader election: could not release Lease %s/%s (a follower takes over when it expires): %s",
                self.namespace,
                self.name,
                exc,
            )
