"""Slow and half-sent HTTP requests: waitress with a deadline on each request's headers.

waitress reads every connection on one event loop and hands a request to a worker thread only
once it has fully arrived, so 100 clients sending half a request hold sockets, not workers. Its
own timeout (`channel_timeout`) closes connections with no activity; a client trickling one byte
at a time (slowloris) is active, so `DeadlineServer` also closes a connection whose request line
and headers have not all arrived `read_timeout` seconds after it connected (or after its last
complete request). The listen backlog is 1024 and at most `CONNECTION_LIMIT` connections are
open; beyond that new ones wait in the backlog until old ones time out. A request whose line and
headers pass `MAX_HEADER_BYTES`, or with more than `MAX_HEADERS` header fields, is answered
431 (Request Header Fields Too Large) without reaching a worker's application.

A server with an `admission` (the access `Guard`'s `admit`) hands a complete request to a worker
only once admission has decided it, and the decision travels with the request into the WSGI
environ (`ACCESS_KEY`): a request whose caller must first be checked with the API server waits
on the event loop, holding its socket but no worker.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask
from waitress.utilities import RequestHeaderFieldsTooLarge

THREADS = 4
"""Workers answering complete requests (each answer is computed in memory, in milliseconds)."""
BACKLOG = 1024
CONNECTION_LIMIT = 1000
MAX_HEADER_BYTES = 32 * 1024
"""The request line and headers together (nginx's default buffers hold 32 KiB; a bearer token
is a few KiB): a longer request is answered 431 without being read further."""
MAX_HEADERS = 100
"""Header fields in one request (Apache's `LimitRequestFields`): more are answered 431."""
ACCESS_KEY = "predictive_headroom.access"
"""The WSGI environ key holding the admission's decision for the request."""

Admission = Callable[[str, str | None, str, Callable[[Any], None]], None]
"""`admit(path, authorization header, client address, done)`: calls `done(decision)` now or later."""


class AdmittedTask(WSGITask):
    """A waitress task whose environ carries the admission's decision (`ACCESS_KEY`)."""

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ[ACCESS_KEY] = getattr(self.request, "access", None)
        return environ


class CountingParser(HTTPRequestParser):
    """waitress's request parser, refusing a request with more than `MAX_HEADERS` header fields
    (431) as waitress itself refuses one over its byte limit."""

    def parse_header(self, header_plus: bytes) -> None:
        fields = header_plus.rstrip().count(b"\n")  # lines after the request line
        if fields > MAX_HEADERS:
            super().parse_header(b"GET / HTTP/1.0\r\n")
            self.error = RequestHeaderFieldsTooLarge(
                f"{fields} header fields, more than the {MAX_HEADERS} accepted"
            )
            return
        super().parse_header(header_plus)


class DeadlineChannel(HTTPChannel):
    """A waitress connection that remembers since when its current request has been arriving."""

    task_class = AdmittedTask
    parser_class = CountingParser

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting_since: float | None = self.creation_time
        """When the request now arriving began (the connection, or the end of the last request);
        None while no request is partly received."""

    def received(self, data: bytes) -> bool:
        if self.waiting_since is None:
            self.waiting_since = time.time()
        done = super().received(data)
        if self.request is None:  # every request received so far is complete
            self.waiting_since = None
        return bool(done)


class DeadlineServer(TcpWSGIServer):
    """waitress's TCP server with `DeadlineChannel`s, a header deadline and, optionally, a cap on
    the connections one client address holds (`per_client`)."""

    channel_class = DeadlineChannel
    read_timeout = 10.0
    admission: Admission | None = None
    per_client: int | None = None

    @classmethod
    def create(
        cls,
        app: Callable[..., Any],
        host: str,
        port: int,
        read_timeout: float,
        listen: bool = True,
        admission: Admission | None = None,
        *,
        threads: int = THREADS,
        per_client: int | None = None,
    ) -> DeadlineServer:
        """A server bound to (host, port) (port 0 picks a free one), not yet running. With
        `listen` False it accepts no connection of its own: it serves only sockets handed to
        `adopt` (a TLS front's plaintext). With an `admission`, each request reaches a worker
        only once admitted (see the module's docstring). `threads` workers answer; with
        `per_client`, a connection from an address already holding that many is closed at once
        (one client flooding the port cannot take every connection)."""
        server = cls(
            app,
            _start=listen,
            host=host,
            port=port,
            threads=threads,
            backlog=BACKLOG,
            connection_limit=CONNECTION_LIMIT,
            ident="",
            expose_tracebacks=False,
            asyncore_use_poll=True,  # select() fails past file descriptor 1024
        )
        server.read_timeout = read_timeout
        server.admission = admission
        server.per_client = per_client
        server.adj.max_request_header_size = MAX_HEADER_BYTES
        # waitress takes these as whole seconds; sub-second values work and tests use them
        server.adj.channel_timeout = read_timeout
        server.adj.cleanup_interval = min(1.0, read_timeout / 4)
        server.adj.asyncore_loop_timeout = min(1.0, read_timeout / 4)
        return server

    def add_task(self, task: Any) -> None:
        """Queue the channel `task`'s first request for a worker once the admission decided it
        (at once without an admission, or for a request waitress already found malformed)."""
        request = task.requests[0] if task.requests else None
        if self.admission is None or request is None or request.error:
            super().add_task(task)
            return

        def admitted(decision: Any) -> None:
            request.access = decision
            TcpWSGIServer.add_task(self, task)

        addr = task.addr
        client = str(addr[0]) if isinstance(addr, tuple) and addr else ""
        self.admission(request.path, request.headers.get("AUTHORIZATION"), client, admitted)

    def handle_accept(self) -> None:
        """Accept a connection as waitress does, closing it at once when its address already
        holds `per_client` connections."""
        try:
            accepted = self.accept()
            if accepted is None:
                return
            conn, addr = accepted
            self.set_socket_options(conn)
        except OSError:  # the client left before it was accepted (as waitress ignores it)
            return
        host = addr[0] if isinstance(addr, tuple) and addr else ""
        if self.per_client is not None and self._held_by(host) >= self.per_client:
            conn.close()
            return
        self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)

    def _held_by(self, host: str) -> int:
        """Connections open from the address `host`."""
        return sum(
            1
            for channel in self.active_channels.values()
            if isinstance(channel.addr, tuple) and channel.addr and channel.addr[0] == host
        )

    def adopt(self, sock: socket.socket, peer: Any) -> None:
        """Serve the connected `sock` as if it had been accepted here (from any thread)."""

        def add() -> None:
            sock.setblocking(False)
            self.channel_class(self, sock, peer, self.adj, map=self._map)

        self.trigger.pull_trigger(add)

    def maintenance(self, now: float) -> None:
        """waitress's idle cleanup, plus: close connections whose request is overdue."""
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            since = getattr(channel, "waiting_since", None)
            if since is not None and not channel.requests and now - since > self.read_timeout:
                channel.will_close = True

    def stop(self) -> None:
        """Close the listening socket and every connection; `run` then returns."""
        self.task_dispatcher.shutdown(cancel_pending=True, timeout=1)
        for channel in list(self._map.values()):
            channel.close()
