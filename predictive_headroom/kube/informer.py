"""List-and-watch caches of what the daemon reads from the cluster: one `Informer` per query.

An informer lists its query once (paged), then watches from the list's resourceVersion with
bookmarks, in a thread of its own, and keeps for each object only the small value its `slim`
function makes of it (the fields the daemon reads, not the object). A reconcile reads `current()`
from memory; the API server sees one long-lived watch per query instead of a LIST per reconcile.

Faults, each handled in the informer's thread and never raised to a reconcile, with client-go's
manners (its reflector): every retry after a failure waits an exponential backoff with jitter
(`Backoff`: 0.8 s doubling to 30 s, each wait up to twice that with jitter, back to 0.8 s after a
healthy minute, after a list that succeeds after failed ones, and at every event or bookmark a
watch sends), kept per cache; a watch is resumed from the last resourceVersion it saw (an
event's or a bookmark's) and the query is listed again only when that version is gone.
- A watch that ends (the server's timeout) or breaks (connection dropped, an unreadable answer)
  after it was healthy (it lasted a second or sent something): resumed at once. One that ends or
  breaks at once with nothing: resumed after a wait (reason `short`, `broken`).
- A watch answered with an error (5xx, 429: at least its Retry-After) or not answered (connection
  refused, a timeout): resumed after a wait (`watch-failed`, `broken`).
- A watch that is silent for `quiet_deadline` seconds (no event and no bookmark; the API server
  sends a bookmark about once a minute): resumed at once (`quiet` in the log).
- `410 Gone` (the version was compacted) or a version the server does not know: the query is
  listed again after a wait (`gone`) and watched from the list's version.
- A watch the API server refuses (403: the RBAC lacks `watch`): one error naming the verb and the
  resource, then the informer is `listing`: every read lists, as before watches, and the watch is
  tried again every `retry_watch` seconds.
- A list that fails: tried again after a wait (`list-failed`). Reads of a cache that has listed once
  keep coming from memory, through every re-list and wait (its `age` and `stale` on /last-run);
  only a cache that never listed, or whose watch is refused, has its reads list for themselves.

The counters of re-lists go to `on_relist(resource, reason)` and of waits to
`on_backoff(cache, reason)`, which the shell points at metrics. The client's own
`kubernetes.informer.SharedInformer` is not used: it keeps whole model objects, lists without
pages or bookmarks, has no silence deadline and reconnects a refused watch at once
(docs/operations.md).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
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
    Throttled,
    mapped,
    short,
)
from predictive_headroom.kube.watch_options import (
    Backoff,
    BackoffReason,
    CacheMode,
    CacheStatus,
    RelistReason,
    WatchOptions,
    WatchQuery,
)
from predictive_headroom.policy.echo import cut
from predictive_headroom.protocols import ActuatorError

logger = logging.getLogger(__name__)

V = TypeVar("V")
Slim = Callable[[dict[str, Any]], Any]
"""Turns one object's JSON into the value kept for it (None: nothing is kept for it)."""


class _Quiet(Exception):
    """The watch sent nothing for `quiet_deadline` seconds."""


class _RawWatch(Watch):
    """`kubernetes.watch.Watch` handing out each event's JSON as it came: a cache keeps a few
    fields of each object, and building the client's model objects for thousands costs seconds."""

    def get_return_type(self, func: Any) -> str:
        return ""


class Informer(Generic[V]):
    """A list-and-watch cache of one `WatchQuery`, kept by its own thread (`start`, `stop`).

    `list_fn` is the client's list method for the query's resource (with its namespace bound);
    `slim` makes the value kept per object. `sleep(seconds)` waits a backoff (default: until the
    wait ends or the informer stops); `monotonic`, `sleep` and `random` are injectable for tests.
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
        sleep: Callable[[float], object] | None = None,
        random: Callable[[], float] = random.random,
        on_backoff: Callable[[str, str], None] | None = None,
    ) -> None:
        self.query, self.list_fn, self.slim = query, list_fn, slim
        self.options, self.call_options = options or WatchOptions(), call_options or CallOptions()
        self.on_relist, self.monotonic, self.on_backoff = on_relist, monotonic, on_backoff
        self._backoff = Backoff(self.options.backoff, random)
        self.backoff_waits = 0
        self._version = ""
        """The last resourceVersion the cache saw (a list's, an event's, a bookmark's)."""
        self._items: dict[tuple[str, str], V] = {}
        self._snapshot: tuple[V, ...] | None = None
        """The values in (namespace, name) order, the order of a LIST; None after a change."""
        self._lock = threading.Lock()
        self._settled = threading.Event()
        """Set once reads need not wait: the first list is in, or the API server refused it."""
        self._stopping = threading.Event()
        self._sleep = sleep or self._stopping.wait
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
        watch = self._watch
        if watch is not None:
            watch.stop()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the stopped thread to end; True when it has."""
        if self._thread.is_alive():
            self._thread.join(max(0.0, timeout))
        return not self._thread.is_alive()

    def current(self, wait: float = 0.0) -> tuple[V, ...] | None:
        """The values kept, in the order a LIST gives (namespace, name), once the cache has listed
        (waiting up to `wait` seconds for the first list) and while the API server allows its
        watch; None when the caller must list for itself. A cache re-listing or waiting out a
        backoff answers from its last synced state (`stale` on /last-run past `stale_after`), as
        a client-go informer does: a fault never turns reads into a LIST per reconcile."""
        self.last_read = self.monotonic()
        if self.mode == CacheMode.STARTING and wait > 0:
            self._settled.wait(wait)
        if self.mode != CacheMode.WATCHING:
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
            self.backoff_waits,
            self.mode == CacheMode.WATCHING and self.age() > self.options.stale_after,
        )

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        reason: RelistReason | None = RelistReason.START
        failures = 0
        while not self._stopping.is_set():
            if reason is not None:
                try:
                    self._version = self._relist(reason)
                except ActuatorError as exc:
                    failures += 1
                    if isinstance(exc, Forbidden):  # reads list (and fail) as before watches
                        self.mode = CacheMode.LISTING
                        self._settled.set()
                    serving = (
                        "reads list for themselves"
                        if self.mode != CacheMode.WATCHING
                        else "reads are served from the last synced list"
                    )
                    self._failed(f"{self._why_not_listed(exc)}; {serving}", failures == 1)
                    reason = RelistReason.FAILED
                    self._wait(BackoffReason.LIST_FAILED)
                    continue
                if failures:
                    self._backoff.reset()  # listing works again: a later fault waits from 0.8 s
                failures = 0
            reason = self._follow()
            if reason in (RelistReason.GONE, RelistReason.UNKNOWN_VERSION):
                self._wait(BackoffReason.GONE)

    def _wait(self, reason: BackoffReason, at_least: float = 0.0) -> None:
        """Wait the cache's next backoff (at least `at_least` seconds), counted by `reason`."""
        seconds = max(at_least, self._backoff.next(self.monotonic()))
        self.backoff_waits += 1
        if self.on_backoff is not None:
            self.on_backoff(self.query.describe(), reason)
        logger.debug("cache of %s: waiting %.1fs (%s)", self.query.describe(), seconds, reason)
        self._sleep(seconds)

    def _why_not_listed(self, exc: ActuatorError) -> str:
        """What a failed list of the cache means, naming the permission when it was refused."""
        if isinstance(exc, Forbidden):
            return (
                f"list {self.query.resource} forbidden: the daemon's ServiceAccount needs 'list' on "
                f"{self.query.resource} {self.query.scope()} — see deploy/ (server said: {exc.reason})"
            )
        return f"list failed ({exc})"

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

    def _follow(self) -> RelistReason | None:
        """Watch from the cache's version, resuming after each end or failure (waiting a backoff
        after a failure), until the version is gone (the re-list's reason) or the cache stops."""
        failing = False  # a streak of failed watches warns once, then logs at debug
        while not self._stopping.is_set():
            started, heard = self.monotonic(), self._heard
            try:
                self._watch_once()
            except _Quiet:
                self._failed(
                    f"the watch sent nothing for {self.options.quiet_deadline:g}s (no event, no "
                    f"bookmark); resuming from version {self._version}",
                    first=True,
                )
                continue
            except CLIENT_ERRORS as exc:
                if self._stopping.is_set():
                    break
                healthy = self._healthy(started, heard)
                warn = healthy or not failing
                relist = self._watch_failed(mapped(exc, short(exc)), short(exc), healthy, warn)
                if relist is not None:
                    return relist
                failing = True
                continue
            failing = not self._healthy(started, heard)
            if failing and not self._stopping.is_set():
                self._wait(BackoffReason.SHORT)
        return None

    def _healthy(self, started: float, heard: float | None) -> bool:
        """The watch begun at `started` lasted `healthy_watch` seconds or sent something."""
        return self.monotonic() - started >= self.options.healthy_watch or self._heard != heard

    def _watch_failed(
        self, typed: KubeError, said: str, healthy: bool, warn: bool
    ) -> RelistReason | None:
        """React to a failed watch: the re-list's reason when its version is gone, else None once
        the backoff (if any) is waited and the watch may be resumed from the same version."""
        where = self.query.describe()
        if isinstance(typed, Gone):
            logger.info("cache of %s: %s; listing again", where, said)
            return RelistReason.GONE
        if _unknown_version(typed, said):
            logger.info("cache of %s: %s; listing again", where, said)
            return RelistReason.UNKNOWN_VERSION
        if isinstance(typed, Forbidden):
            self._refused(typed)
            self._stopping.wait(self.options.retry_watch)
            return RelistReason.RETRY_WATCH
        answered = typed.status is not None
        self._failed(
            f"the watch {'failed' if answered else 'broke'} ({said}); resuming from version "
            f"{self._version}",
            first=warn,
        )
        if answered:
            wait = typed.retry_after if isinstance(typed, Throttled) else None
            self._wait(BackoffReason.WATCH_FAILED, wait or 0.0)
        elif not healthy:
            self._wait(BackoffReason.BROKEN)
        return None

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

    def _watch_once(self) -> None:
        """One watch request from the cache's version, applied to the cache event by event (each
        moves the version on, so a watch that breaks is resumed from what it had sent)."""
        watch = self._watch = _RawWatch()
        if self._stopping.is_set():  # stopped before this watch could be shut
            return
        try:
            for event in watch.stream(
                self.list_fn,
                label_selector=self.query.label_selector or None,
                field_selector=self.query.field_selector or None,
                resource_version=self._version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.options.watch_seconds,
                _request_timeout=(self.call_options.timeout, self.options.quiet_deadline),
            ):
                if self._stopping.is_set():
                    break
                self._version = self._apply(event, self._version)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise _Quiet() from exc
        finally:
            self._watch = None
        self._allowed()

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
        self._backoff.reset()  # the watch works: the next fault waits from 0.8 s again
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


def _unknown_version(err: KubeError, said: str) -> bool:
    """The API server does not know the version asked for: `Too large resource version` (504, as
    client-go's reflector reads it) or a resourceVersion it cannot parse (400)."""
    text = f"{err.reason} {said}".lower().replace("resourceversion", "resource version")
    return err.status in (400, 504) and "resource version" in text
