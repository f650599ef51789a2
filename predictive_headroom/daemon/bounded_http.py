"""An HTTP server with fixed bounds: a fixed pool of worker threads, a bounded queue of accepted
connections, and a deadline for reading each request (request line and headers).

The standard library's ThreadingHTTPServer starts one thread per connection and waits on a
client forever: 400 idle connections hold 400 threads and file descriptors. Here at most
`workers` connections are served at once and `queue` more wait; beyond that a new connection is
closed at once. A client that has not sent its whole request within `read_timeout` seconds of
being accepted (slowloris: one byte at a time) has its connection shut down.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

logger = logging.getLogger(__name__)


class BoundedHTTPServer(HTTPServer):
    """HTTPServer serving from `workers` threads, with `queue` waiting connections at most and a
    `read_timeout` (seconds, from accept) for each request to arrive."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        workers: int = 8,
        queue: int = 64,
        read_timeout: float = 10.0,
    ) -> None:
        super().__init__(address, handler)
        self.workers, self.queue, self.read_timeout = workers, queue, read_timeout
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http")
        self._lock = threading.Lock()
        self._pending = 0
        self._reading: dict[socket.socket, float] = {}
        """Connections whose request has not been read yet, with the monotonic deadline."""
        self.refused = 0
        """Connections closed unserved because `workers + queue` were already taken."""
        self.timed_out = 0
        """Connections shut down because their request did not arrive within `read_timeout`."""
        self._closed = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="http-reaper", daemon=True)
        self._reaper.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the connection for a worker, or close it when the server is full."""
        with self._lock:
            if self._pending >= self.workers + self.queue:
                self.refused += 1
                full = True
            else:
                self._pending += 1
                self._reading[request] = time.monotonic() + self.read_timeout
                full = False
        if full:
            self.shutdown_request(request)
            return
        self._pool.submit(self._work, request, client_address)

    def request_read(self, connection: socket.socket) -> None:
        """The request on `connection` has been read: its read deadline no longer applies."""
        with self._lock:
            self._reading.pop(connection, None)

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._lock:
                self._reading.pop(request, None)
                self._pending -= 1
            self.shutdown_request(request)

    def _reap(self) -> None:
        """Shut down connections past their read deadline (their worker then sees end of input)."""
        while not self._closed.wait(0.1):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._reading.items() if deadline <= now]
                for sock in late:
                    del self._reading[sock]
                self.timed_out += len(late)
            for sock in late:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("http: connection from %s failed", client_address, exc_info=True)

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)
