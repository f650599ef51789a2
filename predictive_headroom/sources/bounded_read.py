"""Reading an HTTP answer within a total deadline and a size cap.

A socket timeout bounds each read, not the request: a server that answers one byte a second never
trips it. `within(seconds, fn)` runs the whole request (connect, headers, body) in a worker thread
and gives up after `seconds`; `BodyReader`, a requests response hook, reads the body in pieces,
stops at the deadline or past `max_bytes`, so the worker ends soon after the caller gave up and
never holds more than the cap in memory. One request at a time per `Deadline`: while a request
that missed its deadline is still ending, the next one fails at once instead of adding a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests

T = TypeVar("T")

CHUNK = 64 * 1024

GRACE_SECONDS = 0.2
"""Extra wait past the deadline so a socket timeout firing at the same instant names its phase."""


class TooLarge(Exception):
    """The answer is larger than the cap; `received` bytes were read before stopping."""

    def __init__(self, cap: int, received: int) -> None:
        super().__init__(f"answer larger than {cap:,} bytes")
        self.cap, self.received = cap, received


class DeadlineExceeded(Exception):
    """The request did not finish within its total deadline."""

    def __init__(self, seconds: float, received: int, busy: bool = False) -> None:
        super().__init__(f"not finished within {seconds:g}s")
        self.seconds, self.received, self.busy = seconds, received, busy


class Deadline:
    """The running request's deadline and byte count, shared by `within` and `BodyReader`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._until: float | None = None
        self.received = 0
        self._running: threading.Thread | None = None

    def expired(self) -> bool:
        until = self._until
        return until is not None and time.monotonic() > until

    def within(self, seconds: float, fn: Callable[[], T]) -> T:
        """`fn()` if it finishes within `seconds` (connect, headers and body); else DeadlineExceeded.

        Exceptions of `fn` are raised as they are.
        """
        with self._lock:
            if self._running is not None and self._running.is_alive():
                raise DeadlineExceeded(seconds, self.received, busy=True)
            self._until, self.received = time.monotonic() + seconds, 0
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc

        worker = threading.Thread(target=run, name="prometheus-read", daemon=True)
        self._running = worker
        worker.start()
        worker.join(seconds + GRACE_SECONDS)
        if worker.is_alive():
            raise DeadlineExceeded(seconds, self.received)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def hook(self, response: requests.Response, *_args: Any, **_kwargs: Any) -> requests.Response:
        """requests response hook: read the body now, in pieces, within the deadline and the cap."""
        if response.raw is None or response._content_consumed:
            return response
        pieces: list[bytes] = []
        try:
            while True:
                if self.expired():
                    raise DeadlineExceeded(0.0, self.received)
                piece = response.raw.read1(CHUNK, decode_content=True)
                if not piece:
                    break
                self.received += len(piece)
                if self.received > self.max_bytes:
                    raise TooLarge(self.max_bytes, self.received)
                pieces.append(piece)
        except BaseException:
            response.close()
            raise
        response._content = b"".join(pieces)
        response._content_consumed = True
        return response
