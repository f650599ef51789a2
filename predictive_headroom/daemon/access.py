"""Who may read `/metrics`, `/report*` and `/last-run`: `Guard` asks the API server (through an
`AccessReviewer`) who holds each caller's bearer token and whether they may get the path, and
remembers both answers briefly, as kube-rbac-proxy does: who holds a token, and an allowed
(token, path), for `ALLOWED_SECONDS`; a rejected token or a refused path for `DENIED_SECONDS`.
Tokens are kept only as SHA-256 digests. A failure to ask is a 503, never cached and never an
allow. The probes (`/healthz`, `/readyz`) are not guarded.

An answer the Guard remembers is given at once. A question for the API server runs on the
Guard's own few review threads (`Limits.review_threads`), never on the HTTP workers: the HTTP
server hands a request to a worker only once `admit` has decided it (`daemon.slow_clients`), so
known callers and probes never wait behind strangers' tokens. What strangers can make the Guard
ask is bounded (`Limits`): a token the API server rejected is remembered as rejected (in its own
cache, which junk tokens cannot flush the known callers out of); one question per token at a
time, however many requests carry it; at most `queue` questions waiting, none longer than
`wait` seconds (beyond: 503); and a rate per client address and over all clients (beyond: 429 and 503), each with `Retry-After`.
A token that was allowed before is asked again on its own thread, ahead of strangers.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import LRUCache, TLRUCache, TTLCache

from predictive_headroom.protocols import AccessReviewer, AccessReviewError, Caller

logger = logging.getLogger(__name__)

GUARDED = ("/metrics", "/last-run", "/report", "/report/", "/report.json")
"""The paths only authorised callers may read."""
ALLOWED_SECONDS = 60.0
DENIED_SECONDS = 10.0
CACHE_SIZE = 4096


@dataclass(frozen=True)
class Limits:
    """What callers with unknown tokens may make the Guard ask of the API server."""

    review_threads: int = 2
    """Questions to the API server in flight at once for strangers (one more for known callers)."""
    queue: int = 32
    """Questions waiting for a review thread; a stranger beyond this is answered 503."""
    wait: float = 5.0
    """Seconds a question may wait for a review thread; one that waited longer is not asked and
    its requests are answered 503 (their callers have mostly given up)."""
    client_burst: float = 5.0
    client_rate: float = 1.0
    """New tokens one client address may have reviewed: `client_burst` at once, then
    `client_rate` a second; beyond this 429."""
    strangers_burst: float = 20.0
    strangers_rate: float = 10.0
    """New tokens all clients together may have reviewed; beyond this 503."""
    cache_size: int = CACHE_SIZE
    """Entries in each cache (known callers, their decisions, rejected tokens), least recently
    used dropped first."""


Done = Callable[["Decision"], None]


@dataclass(frozen=True)
class Decision:
    """The answer to one request: allowed, or the HTTP status and the words saying why not (and,
    for a 429 or 503, after how many seconds to try again)."""

    allowed: bool
    status: int = 200
    message: str = ""
    retry_after: int | None = None


class _Bucket:
    """A token bucket: `take` succeeds at most `burst` times at once, then `rate` times a second."""

    def __init__(self, burst: float, rate: float, now: float) -> None:
        self.burst, self.rate, self.level, self.at = burst, rate, burst, now

    def take(self, now: float) -> bool:
        """Whether one more may go now (and count it)."""
        self.level = min(self.burst, self.level + (now - self.at) * self.rate)
        self.at = now
        if self.level < 1.0:
            return False
        self.level -= 1.0
        return True

    def wait(self) -> int:
        """Whole seconds until `take` can succeed again."""
        return max(1, math.ceil((1.0 - self.level) / self.rate)) if self.rate > 0 else 60


class _Lane:
    """A few daemon threads answering jobs from a bounded queue (started on first use)."""

    def __init__(self, threads: int, size: int, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=max(1, size))
        self._threads, self._name, self._started, self._closed = threads, name, False, False
        self._lock = threading.Lock()

    def offer(self, job: Callable[[], None]) -> bool:
        """Queue `job`; False when the queue is full or the lane closed (the job is not run)."""
        with self._lock:
            if self._closed:
                return False
            if not self._started:
                self._started = True
                for k in range(self._threads):
                    threading.Thread(
                        target=self._work, name=f"{self._name}-{k}", daemon=True
                    ).start()
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            return False
        return True

    def close(self) -> None:
        """End the threads once each finishes the job in hand; queued jobs are not run."""
        with self._lock:
            self._closed = True
        for _ in range(self._threads):
            with contextlib.suppress(queue.Full):
                self._jobs.put_nowait(None)

    def _work(self) -> None:
        while not self._closed:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # one failed job must not stop the lane
                logger.exception("%s: a job failed", self._name)


class Guard:
    """Authenticates and authorises GETs of the guarded paths (`admit`, `check`); thread-safe."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        allowed_seconds: float = ALLOWED_SECONDS,
        denied_seconds: float = DENIED_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits = Limits(),
    ) -> None:
        self.reviewer, self.limits, self.clock = reviewer, limits, clock

        def expires(_key: object, answer: Decision | Caller, now: float) -> float:
            good = answer.allowed if isinstance(answer, Decision) else True
            return now + (allowed_seconds if good else denied_seconds)

        size = limits.cache_size
        self._decisions: TLRUCache[tuple[str, str], Decision] = TLRUCache(
            size, ttu=expires, timer=clock
        )
        self._callers: TLRUCache[str, Caller] = TLRUCache(size, ttu=expires, timer=clock)
        self._rejected: TTLCache[str, bool] = TTLCache(size, ttl=denied_seconds, timer=clock)
        self._known: LRUCache[str, bool] = LRUCache(size)
        self._clients: TTLCache[str, _Bucket] = TTLCache(size, ttl=600.0, timer=clock)
        self._strangers = _Bucket(limits.strangers_burst, limits.strangers_rate, clock())
        self._pending: dict[tuple[str, str], list[Done]] = {}
        self._lane = _Lane(limits.review_threads, limits.queue, "access-review")
        self._known_lane = _Lane(1, limits.queue, "access-review-known")
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the review threads (the HTTP server stopping); later questions are answered 503."""
        self._lane.close()
        self._known_lane.close()

    def check(self, path: str, authorization: str | None, client: str = "") -> Decision:
        """Whether the request for `path` with this `Authorization` header from `client` may be
        answered, waiting for the API server when it must be asked (see `admit`)."""
        answered = threading.Event()
        got: list[Decision] = []

        def done(decision: Decision) -> None:
            got.append(decision)
            answered.set()

        self.admit(path, authorization, client, done)
        answered.wait()
        return got[0]

    def admit(self, path: str, authorization: str | None, client: str, done: Done) -> None:
        """Call `done(decision)` for the request for `path` with this `Authorization` header from
        the address `client`: at once (on this thread) when the answer is known or refused by the
        limits, else on a review thread once the API server has answered."""
        if path not in GUARDED:
            return done(Decision(True))
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return done(
                Decision(
                    False,
                    401,
                    f"{path} needs a bearer token (Authorization: Bearer <token>) of a user or "
                    "ServiceAccount allowed to get it; see deploy/README.md",
                )
            )
        digest = hashlib.sha256(token.encode()).hexdigest()
        key = (digest, path)
        with self._lock:
            answer = self._known_answer(digest, path)
            if answer is None and key in self._pending:
                self._pending[key].append(done)
                return None
            if answer is None:
                answer = self._queue(token, key, client, done)
        if answer is not None:
            done(answer)
        return None

    def _known_answer(self, digest: str, path: str) -> Decision | None:
        """The remembered answer for this token and path, if any (the lock held)."""
        if digest in self._rejected:
            return _REJECTED
        return self._decisions.get((digest, path))

    def _queue(self, token: str, key: tuple[str, str], client: str, done: Done) -> Decision | None:
        """Start asking the API server about `key` (the lock held); the refusal when the limits
        say no, else None (`done` is then called when the answer comes)."""
        known = key[0] in self._known
        if not known:
            refusal = self._rate_refusal(client)
            if refusal is not None:
                return refusal
        self._pending[key] = [done]
        lane = self._known_lane if known else self._lane
        queued = self.clock()
        if lane.offer(lambda: self._answer(token, key, queued)):
            return None
        del self._pending[key]
        return Decision(False, 503, _BUSY, retry_after=1)

    def _rate_refusal(self, client: str) -> Decision | None:
        """A 429 or 503 when this client, or all strangers together, asked too much (the lock held)."""
        now = self.clock()
        bucket = self._clients.get(client)
        if bucket is None:
            bucket = self._clients[client] = _Bucket(
                self.limits.client_burst, self.limits.client_rate, now
            )
        if not bucket.take(now):
            return Decision(
                False,
                429,
                f"too many new tokens from {client or 'this client'}; try again later",
                retry_after=bucket.wait(),
            )
        if not self._strangers.take(now):
            return Decision(
                False,
                503,
                "too many new tokens are being checked with the API server; try again later",
                retry_after=self._strangers.wait(),
            )
        return None

    def _answer(self, token: str, key: tuple[str, str], queued: float) -> None:
        """Ask the API server about `key` (on a review thread), remember and hand out the answer;
        a 503 without asking when the question waited longer than `Limits.wait`."""
        digest, path = key
        try:
            if self.clock() - queued > self.limits.wait:
                decision = Decision(False, 503, _BUSY, retry_after=1)
            else:
                decision = self._review(token, digest, path)
        except AccessReviewError as exc:
            logger.warning("http: could not check access to %s: %s", path, exc)
            decision = Decision(
                False, 503, f"could not check access with the API server: {exc}", retry_after=5
            )
        except Exception:  # a review thread must hand out an answer whatever happens
            logger.exception("http: checking access to %s failed", path)
            decision = Decision(
                False, 503, "could not check access; see the daemon's log", retry_after=5
            )
        with self._lock:
            if decision.status in (200, 403):  # a rejected token is in `_rejected` only
                self._decisions[key] = decision
            if decision.allowed:
                self._known[digest] = True
            waiting = self._pending.pop(key, [])
        for done in waiting:
            done(decision)

    def _review(self, token: str, digest: str, path: str) -> Decision:
        """Who holds `token` (remembered by its `digest`) and whether they may get `path`."""
        with self._lock:
            caller = self._callers.get(digest)
        if caller is None:
            caller = self.reviewer.authenticate(token)
            with self._lock:
                if caller is None:
                    self._rejected[digest] = True
                else:
                    self._callers[digest] = caller
        if caller is None:
            return _REJECTED
        allowed, reason = self.reviewer.authorize(caller, path)
        if allowed:
            return Decision(True)
        why = f" ({reason})" if reason else ""
        logger.info("http: %s may not get %s%s", caller.user, path, why)
        return Decision(
            False,
            403,
            f"{caller.user} may not get {path}{why}: grant get on the nonResourceURL {path} "
            "(the chart's ClusterRole <release>-metrics-reader); see deploy/README.md",
        )


_BUSY = "too many unknown tokens are waiting to be checked with the API server; try again"
_REJECTED = Decision(False, 401, "the API server did not authenticate this token")
