"""List-and-watch caches of what the daemon reads from the cluster: one `Informer` per query.

An informer lists its query once (paged), then watches from the list's resourceVersion with
bookmarks, in a thread of its own, and keeps for each object only the small value its `slim`
function makes of it (the fields the daemon reads, not the object). A reconcile reads `current()`
from memory; the API server sees one long-lived watch per query instead of a LIST per reconcile.

Faults, each handled in the informer's thread and never raised to a reconcile:
- `410 Gone` (the version was compacted) or a broken watch (connection dropped, an answer that
  cannot be read, a server error): the query is listed again (a re-list) and watched from there.
- A watch that is silent for `quiet_deadline` seconds (no event and no bookmark; the API server
  sends a bookmark about once a minute): re-listed, with reason `deadline`.
- A watch the API server refuses (403: the RBAC lacks `watch`): one error naming the verb and the
  resource, then the informer is `listing`: every read lists, as before watches, and the watch is
  tried again every `retry_watch` seconds.
- A list that fails: tried again with backoff; meanwhile reads list for themselves.

The counters of re-lists go to `on_relist(resource, reason)`, which the shell points at a metric.
The client's own `kubernetes.informer.SharedInformer` is not used: it keeps whole model objects,
lists without pages or bookmarks, has no silence deadline and reconnects a refused watch at once
(docs/operations.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

import urllib3
from kubernetes.watch import Watch

from predictive_headroom.kube.api import CallOptions, _call, _Op
from predictive_headroom.kube.cluster import _json_answer
from predictive_headroom.kube.errors import (
    CLIENT_ERRORS,
    Forbidden,
    Gone,
    KubeError,
    mapped,
    short,
)
from predictive_headroom.policy.echo import cut
from predictive_headroom.protocols import ActuatorError

logger = logging.getLogger(__name__)

V = TypeVar("V")
Slim = Callable[[dict[str, Any]], Any]
"""Turns one object's JSON into the value kept for it (None: nothing is kept for it)."""


class CacheMode(StrEnum):
    """Where reads of a cache come from."""

    STARTING = "starting"
    """The first list has not completed: reads list for themselves."""
    WATCHING = "watching"
    """Listed and watched: reads come from memory."""
    LISTING = "listing"
    """The API server refused the watch (or the list): reads list for themselves."""


class RelistReason(StrEnum):
    """Why a cache listed its query (again)."""

    START = "start"
    GONE = "gone"
    """The watch's resourceVersion was compacted away (410)."""
    DEADLINE = "deadline"
    """The watch sent nothing, not even a bookmark, for `quiet_deadline` seconds."""
    BROKEN = "broken"
    """The watch broke: connection dropped, unreadable answer, server error."""
    RETRY_WATCH = "retry-watch"
    """The watch was refused earlier; trying it again."""
    FAILED = "failed"
    """The previous list failed."""


@dataclass(frozen=True)
class WatchQuery:
    """What one cache holds: a resource, in a namespace ('' = all) with optional selectors."""

    resource: str
    namespace: str = ""
    label_selector: str = ""
    field_selector: str = ""

    def describe(self) -> str:
        """`pods in team-a (labels app=x)`, for logs and /last-run."""
        where = f" in {self.namespace}" if self.namespace else ""
        picks = [f"labels {self.label_selector}"] if self.label_selector else []
        picks += [f"fields {self.field_selector}"] if self.field_selector else []
        return f"{self.resource}{where}" + (f" ({'; '.join(picks)})" if picks else "")

    def scope(self) -> str:
        """Where the `watch` permission is needed, in RBAC words."""
        return (
            f"in namespace {self.namespace} (a Role)"
            if self.namespace
            else "cluster-wide (a ClusterRole)"
        )


@dataclass(frozen=True)
class WatchOptions:
    """Timings of the caches (tests use small values)."""

    page_size: int = 500
    watch_seconds: int = 300
    """The API server ends each watch request after this long; it is resumed from its last
    resourceVersion without a list."""
    quiet_deadline: float = 150.0
    """A watch that sends nothing (no event, no bookmark) for this long is re-listed."""
    retry_watch: float = 600.0
    """Seconds between tries of a refused watch (RBAC may have been updated meanwhile)."""
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    sync_wait: float = 10.0
    """How long a read waits for a new cache's first list before listing for itself."""

    @property
    def stale_after(self) -> float:
        """A cache that heard nothing from the API server for this long is not read."""
        return 2 * self.quiet_deadline


class _Quiet(Exception):
    """The watch sent nothing for `quiet_deadline` seconds."""


class _RawWatch(Watch):
    """`kubernetes.watch.Watch` handing out each event's JSON as it came: a cache keeps a few
    fields of each object, and building the client's model objects for thousands costs seconds."""

    def get_return_type(self, func: Any) -> str:
        return ""


@dataclass(frozen=True)
class CacheStatus:
    """One cache as /last-run shows it."""

    query: str
    mode: CacheMode
    objects: int
    age_seconds: float | None
    """Seconds since the cache last heard from the API server (event, bookmark or list)."""
    last_relist_seconds_ago: float | None
    last_relist_reason: str | None
    relists: int
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        def rounded(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "query": self.query,
            "mode": self.mode,
            "objects": self.objects,
            "age_seconds": rounded(self.age_seconds),
            "last_relist_seconds_ago": rounded(self.last_relist_seconds_ago),
            "last_relist_reason": self.last_relist_reason,
            "relists": self.relists,
            "last_error": self.last_error,
        }


class Informer(Generic[V]):
    """A list-and-watch cache of one `WatchQuery`, kept by its own thread (`start`, `stop`).

    `list_fn` is the client's list method for the query's resource (with its namespace bound);
    `slim` makes the value kept per object.
    """

    def __init__(
        self,
        query: WatchQuery,
        list_fn: Callable[..., Any],
        slim: Callable[[dict[str, Any]], V | None],
        options: WatchOptions | None = None,
        call_options: CallOptions | None = None,
        on_relist: Callable[[str, str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.query, self.list_fn, self.slim = query, list_fn, slim
        self.options, self.call_options = options or WatchOptions(), call_options or CallOptions()
        self.on_relist, self.monotonic = on_relist, monotonic
        self._items: dict[tuple[str, str], V] = {}
        self._snapshot: tuple[V, ...] | None = None
        """The values in (namespace, name) order, the order of a LIST; None after a change."""
        self._lock = threading.Lock()
        self._settled = threading.Event()
        """Set once reads need not wait: the first list is in, or the API server refused it."""
        self._stopping = threading.Event()
        self.mode = CacheMode.STARTING
        self._heard: float | None = None
        self._relisted: float | None = None
        self._relist_reason: str | None = None
        self.relists = 0
        self.last_error: str | None = None
        self.last_read = monotonic()
        self._watch: _RawWatch | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"watch {query.describe()}", daemon=True
        )

    # -- what readers see ------------------------------------------------------------------------

    def start(self) -> Informer[V]:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (its watch connection is shut at once)."""
        self._stopping.set()
        if self._watch is not None:
            self._watch.stop()

    def current(self, wait: float = 0.0) -> tuple[V, ...] | None:
        """The values kept, in the order a LIST gives (namespace, name), when the cache is watching
        and fresh (waiting up to `wait` seconds for the first list); None when the caller must
        list for itself."""
        self.last_read = self.monotonic()
        if self.mode == CacheMode.STARTING and wait > 0:
            self._settled.wait(wait)
        if self.mode != CacheMode.WATCHING or self.age() > self.options.stale_after:
            return None
        with self._lock:
            if self._snapshot is None:
                self._snapshot = tuple(self._items[k] for k in sorted(self._items))
            return self._snapshot

    def age(self) -> float:
        """Seconds since the cache last heard from the API server (inf before the first list)."""
        heard = self._heard
        return float("inf") if heard is None else self.monotonic() - heard

    def status(self) -> CacheStatus:
        now, relisted = self.monotonic(), self._relisted
        with self._lock:
            count = len(self._items)
        return CacheStatus(
            self.query.describe(),
            self.mode,
            count,
            None if self._heard is None else now - self._heard,
            None if relisted is None else now - relisted,
            self._relist_reason,
            self.relists,
            self.last_error,
        )

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        reason, failures = RelistReason.START, 0
        while not self._stopping.is_set():
            try:
                version = self._relist(reason)
            except ActuatorError as exc:
                failures += 1
                if isinstance(
                    exc, Forbidden
                ):  # not a wait: reads list (and fail) as before watches
                    self.mode = CacheMode.LISTING
                    self._settled.set()
                self._failed(
                    f"{self._why_not_listed(exc)}; reads list for themselves", failures == 1
                )
                reason = RelistReason.FAILED
                self._stopping.wait(self._backoff(failures))
                continue
            failures = 0
            reason = self._follow(version)

    def _why_not_listed(self, exc: ActuatorError) -> str:
        """What a failed list of the cache means, naming the permission when it was refused."""
        if isinstance(exc, Forbidden):
            return (
                f"list {self.query.resource} forbidden: the daemon's ServiceAccount needs 'list' on "
                f"{self.query.resource} {self.query.scope()} — see deploy/ (server said: {exc.reason})"
            )
        return f"list failed ({exc})"

    def _backoff(self, failures: int) -> float:
        return min(self.options.backoff_max, self.options.backoff_initial * 2 ** (failures - 1))

    def _failed(self, why: str, first: bool) -> None:
        self.last_error = why
        log = logger.warning if first else logger.debug
        log("cache of %s: %s", self.query.describe(), why)

    def _relist(self, reason: RelistReason) -> str:
        """List the query (every page) into the cache; return the version to watch from."""
        op = _Op("list", self.query.resource, "", "", "", self.query.describe(), "")
        items: dict[tuple[str, str], V] = {}
        version, token = "", None
        while True:
            response = _call(
                op,
                self.call_options,
                self.list_fn,
                label_selector=self.query.label_selector or None,
                field_selector=self.query.field_selector or None,
                limit=self.options.page_size,
                _continue=token,
                _preload_content=False,
            )
            page = _json_answer(op, response, KubeError)
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            for obj in page.get("items") or ():
                if isinstance(obj, dict):
                    self._keep(items, obj)
            token = meta.get("continue")
            if not token:
                break
        with self._lock:
            self._items, self._snapshot = items, None
        self._heard = self._relisted = self.monotonic()
        self._relist_reason, self.relists = reason, self.relists + 1
        if self.mode != CacheMode.LISTING:
            self.mode = CacheMode.WATCHING
        self._settled.set()
        if self.on_relist is not None:
            self.on_relist(self.query.resource, reason)
        log = logger.info if reason != RelistReason.START else logger.debug
        log("cache of %s listed (%s): %d object(s)", self.query.describe(), reason, len(items))
        return version

    def _keep(self, items: dict[tuple[str, str], V], obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        value = self.slim(obj)
        if value is None:
            items.pop(key, None)
        else:
            items[key] = value

    def _follow(self, version: str) -> RelistReason:
        """Watch from `version` (resuming after each normal end) until it must be re-listed; why."""
        while not self._stopping.is_set():
            try:
                version = self._watch_once(version)
            except _Quiet:
                self._failed(
                    f"the watch sent nothing for {self.options.quiet_deadline:g}s (no event, no "
                    "bookmark); listing again",
                    first=True,
                )
                return RelistReason.DEADLINE
            except CLIENT_ERRORS as exc:
                if self._stopping.is_set():
                    break
                typed = mapped(exc, short(exc))
                if isinstance(typed, Gone):
                    logger.info("cache of %s: %s; listing again", self.query.describe(), short(exc))
                    return RelistReason.GONE
                if isinstance(typed, Forbidden):
                    self._refused(typed)
                    self._stopping.wait(self.options.retry_watch)
                    return RelistReason.RETRY_WATCH
                self._failed(f"the watch broke ({short(exc)}); listing again", first=True)
                return RelistReason.BROKEN
        return RelistReason.START

    def _refused(self, err: Forbidden) -> None:
        """The API server refused `watch`: say so once, and read by listing until it allows it."""
        self.last_error = (
            f"watch {self.query.resource} forbidden: the daemon's ServiceAccount needs 'watch' on "
            f"{self.query.resource} {self.query.scope()} — see deploy/ (server said: {err.reason})"
        )
        if self.mode != CacheMode.LISTING:
            logger.error("cache of %s: %s", self.query.describe(), self.last_error)
            logger.warning(
                "cache of %s: falling back to a LIST on every read; the watch is tried again "
                "every %gs",
                self.query.describe(),
                self.options.retry_watch,
            )
        self.mode = CacheMode.LISTING

    def _watch_once(self, version: str) -> str:
        """One watch request from `version`, applied to the cache; the version it ended at."""
        watch = self._watch = _RawWatch()
        try:
            for event in watch.stream(
                self.list_fn,
                label_selector=self.query.label_selector or None,
                field_selector=self.query.field_selector or None,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.options.watch_seconds,
                _request_timeout=(self.call_options.timeout, self.options.quiet_deadline),
            ):
                if self._stopping.is_set():
                    break
                version = self._apply(event, version)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise _Quiet() from exc
        finally:
            self._watch = None
        self._allowed()
        return version

    def _allowed(self) -> None:
        """The watch works: a cache that was listing reads from memory again."""
        if self.mode == CacheMode.LISTING:
            logger.info(
                "cache of %s: watching again (the API server allows it now)", self.query.describe()
            )
            self.mode, self.last_error = CacheMode.WATCHING, None

    def _apply(self, event: Any, version: str) -> str:
        """Apply one watch event to the cache; the resourceVersion it carries (else `version`)."""
        if not isinstance(event, dict) or not isinstance(event.get("raw_object"), dict):
            raise ValueError(f"the watch sent a line that is not an event: {cut(event)!r}")
        obj, kind = event["raw_object"], event.get("type")
        self._heard = self.monotonic()
        self._allowed()
        if kind != "BOOKMARK":
            with self._lock:
                self._snapshot = None
                if kind == "DELETED":
                    meta = obj.get("metadata") or {}
                    self._items.pop(
                        (str(meta.get("namespace") or ""), str(meta.get("name") or "")), None
                    )
                else:
                    self._keep(self._items, obj)
        return str((obj.get("metadata") or {}).get("resourceVersion") or version)
