"""Slow and half-sent HTTP requests: waitress with a deadline on each request's headers.

waitress reads every connection on one event loop and hands a request to a worker thread only
once it has fully arrived, so 100 clients sending half a request hold sockets, not workers. Its
own timeout (`channel_timeout`) closes connections with no activity; a client trickling one byte
at a time (slowloris) is active, so `DeadlineServer` also closes a connection whose request line
and headers have not all arrived `read_timeout` seconds after it connected (or after its last
complete request). The listen backlog is 1024 and at most `CONNECTION_LIMIT` connections are
open; beyond that new ones wait in the backlog until old ones time out.

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
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask

THREADS = 4
"""Workers answering complete requests (each answer is computed in memory, in milliseconds)."""
BACKLOG = 1024
CONNECTION_LIMIT = 1000
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


class DeadlineChannel(HTTPChannel):
    """A waitress connection that remembers since when its current request has been arriving."""

    task_class = AdmittedTask

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
    """waitress's TCP server with `DeadlineChannel`s and a header deadline."""

    channel_class = DeadlineChannel
    read_timeout = 10.0
    admission: Admission | None = None

    @classmethod
    def create(
        cls,
        app: Callable[..., Any],
        host: str,
        port: int,
        read_timeout: float,
        listen: bool = True,
        admission: Admission | None = None,
    ) -> DeadlineServer:
        """A server bound to (host, port) (port 0 picks a free one), not yet running. With
        `listen` False it accepts no connection of its own: it serves only sockets handed to
        `adopt` (a TLS front's plaintext). With an `admission`, each request reaches a worker
        only once admitted (see the module's docstring)."""
        server = cls(
            app,
            _start=listen,
            host=host,
            port=port,
            threads=THREADS,
            backlog=BACKLOG,
            connection_limit=CONNECTION_LIMIT,
            ident="",
            expose_tracebacks=False,
            asyncore_use_poll=True,  # select() fails past file descriptor 1024
        )
        server.read_timeout = read_timeout
        server.admission = admission
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
