"""Who may read `/metrics`, `/report*` and `/last-run`: `Guard` asks the API server (through an
`AccessReviewer`) who holds each caller's bearer token and whether they may get the path, and
remembers both answers briefly, as kube-rbac-proxy does: who holds a token, and an allowed
(token, path), for `ALLOWED_SECONDS`; a rejected token or a refused path for `DENIED_SECONDS`.
Tokens are kept only as SHA-256 digests. A failure to ask is a 503, never cached and never an
allow. The probes (`/healthz`, `/readyz`) are not guarded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import TLRUCache

from predictive_headroom.protocols import AccessReviewer, AccessReviewError, Caller

logger = logging.getLogger(__name__)

GUARDED = ("/metrics", "/last-run", "/report", "/report/", "/report.json")
"""The paths only authorised callers may read."""
ALLOWED_SECONDS = 60.0
DENIED_SECONDS = 10.0
CACHE_SIZE = 4096


@dataclass(frozen=True)
class Decision:
    """The answer to one request: allowed, or the HTTP status and the words saying why not."""

    allowed: bool
    status: int = 200
    message: str = ""


class Guard:
    """Authenticates and authorises GETs of the guarded paths (`check`); thread-safe."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        allowed_seconds: float = ALLOWED_SECONDS,
        denied_seconds: float = DENIED_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reviewer = reviewer

        def expires(_key: object, answer: Decision | Caller | None, now: float) -> float:
            good = answer.allowed if isinstance(answer, Decision) else answer is not None
            return now + (allowed_seconds if good else denied_seconds)

        self._decisions: TLRUCache[tuple[str, str], Decision] = TLRUCache(
            CACHE_SIZE, ttu=expires, timer=clock
        )
        self._callers: TLRUCache[str, Caller | None] = TLRUCache(
            CACHE_SIZE, ttu=expires, timer=clock
        )
        self._lock = threading.Lock()

    def check(self, path: str, authorization: str | None) -> Decision:
        """Whether the request for `path` with this `Authorization` header may be answered."""
        if path not in GUARDED:
            return Decision(True)
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Decision(
                False,
                401,
                f"{path} needs a bearer token (Authorization: Bearer <token>) of a user or "
                "ServiceAccount allowed to get it; see deploy/README.md",
            )
        digest = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            known = self._decisions.get((digest, path))
        if known is not None:
            return known
        try:
            decision = self._review(token, digest, path)
        except AccessReviewError as exc:
            logger.warning("http: could not check access to %s: %s", path, exc)
            return Decision(False, 503, f"could not check access with the API server: {exc}")
        with self._lock:
            self._decisions[(digest, path)] = decision
        return decision

    def _review(self, token: str, digest: str, path: str) -> Decision:
        """Who holds `token` (remembered by its `digest`) and whether they may get `path`."""
        with self._lock:
            known = digest in self._callers
            caller = self._callers.get(digest)
        if not known:
            caller = self.reviewer.authenticate(token)
            with self._lock:
                self._callers[digest] = caller
        if caller is None:
            return Decision(False, 401, "the API server did not authenticate this token")
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
