"""Reading an HTTP answer within a total deadline and a size cap.

A socket timeout bounds each read, not the request: a server that answers one byte a second never
trips it. `within(seconds, fn)` runs the whole request (connect, headers, body) in a worker thread
and gives up after `seconds`; `BodyReader`, a requests response hook, reads the body in pieces,
stops at the deadline or past `max_bytes`, so the worker ends soon after the caller gave up and
never holds more than the cap in memory. While `MAX_ABANDONED` requests that missed their deadline
are still ending, the next one fails at once instead of adding a thread.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass
class _Call:
    """One request's deadline (monotonic seconds) and the bytes of its body read so far."""

    until: float
    received: int = 0


class Deadline:
    """Runs requests within a total deadline (`within`) and reads their bodies within it and the
    byte cap (`hook`). Requests may run concurrently; each has its own deadline."""

    MAX_ABANDONED = 4
    """Requests past their deadline that may still be ending before `within` refuses new ones."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._abandoned: list[threading.Thread] = []
        self._local = threading.local()

    def within(self, seconds: float, fn: Callable[[], T]) -> T:
        """`fn()` if it finishes within `seconds` (connect, headers and body); else DeadlineExceeded.

        Exceptions of `fn` are raised as they are.
        """
        with self._lock:
            self._abandoned = [t for t in self._abandoned if t.is_alive()]
            if len(self._abandoned) >= self.MAX_ABANDONED:
                raise DeadlineExceeded(seconds, 0, busy=True)
        call = _Call(time.monotonic() + seconds)
        box: dict[str, Any] = {}

        def run() -> None:
            self._local.call = call
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc

        worker = threading.Thread(target=run, name="prometheus-read", daemon=True)
        worker.start()
        worker.join(seconds + GRACE_SECONDS)
        if worker.is_alive():
            with self._lock:
                self._abandoned.append(worker)
            raise DeadlineExceeded(seconds, call.received)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def hook(self, response: requests.Response, *_args: Any, **_kwargs: Any) -> requests.Response:
        """requests response hook: read the body now, in pieces, within the deadline and the cap."""
        if response.raw is None or response._content_consumed:
            return response
        call: _Call = getattr(self._local, "call", None) or _Call(math.inf)
        pieces: list[bytes] = []
        try:
            while True:
                if time.monotonic() > call.until:
                    raise DeadlineExceeded(0.0, call.received)
                piece = response.raw.read1(CHUNK, decode_content=True)
                if not piece:
                    break
                call.received += len(piece)
                if call.received > self.max_bytes:
                    raise TooLarge(self.max_bytes, call.received)
                pieces.append(piece)
        except BaseException:
            response.close()
            raise
        response._content = b"".join(pieces)
        response._content_consumed = True
        return response
