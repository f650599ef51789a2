"""The daemon's HTTP ports: /metrics, /healthz, /readyz, /last-run, /report and /report.json.

Served by waitress from a background thread: its event loop buffers every connection until its
request (line and headers) has fully arrived, and only then hands it to one of a few worker
threads, so slow or half-sent requests hold a socket, never a worker (`daemon.slow_clients`
enforces the header deadline). Every answer is computed from the Daemon passed in, so the server
holds no state of its own, and carries `X-Content-Type-Options: nosniff`.

The daemon runs two: the main port, over TLS (`daemon.tls`) with a `daemon.access.Guard` that
serves /metrics, /report* and /last-run only to callers the API server authenticates and
authorises (plain and open with `PH_HTTP_AUTH=off`), and the probe port, plain and open, serving
only /healthz and /readyz, which say ready or not and nothing more (the reasons are logged and in
/last-run). The Guard decides each request before a worker takes it, asking the
API server on its own threads, so a slow review never holds a worker.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from predictive_headroom.core.strict_json import dumps
from predictive_headroom.daemon.access import Guard
from predictive_headroom.daemon.slow_clients import ACCESS_KEY, THREADS, DeadlineServer
from predictive_headroom.daemon.tls import TlsFront
from predictive_headroom.policy.echo import cut

logger = logging.getLogger(__name__)

ROUTES = ("/metrics", "/healthz", "/readyz", "/last-run", "/report", "/report.json")
PROBES = ("/healthz", "/readyz")
PROBE_THREADS = 2
"""The probe port's own workers (an answer takes microseconds; two keep one free while the
other is descheduled)."""
PROBE_READ_TIMEOUT = 2.0
"""Seconds a client of the probe port has to send its request: the kubelet sends it at once."""
PROBE_PER_CLIENT = 16
"""Connections one address may hold on the probe port (the kubelet holds one at a time), so a pod
flooding the port (any pod may reach it) cannot take the connections the kubelet's probes need."""


class Status(Protocol):
    """What the server asks of the daemon."""

    def readiness(self) -> tuple[bool, str]: ...

    def status(self) -> dict[str, Any]: ...


def latest_report(report_dir: Path | None) -> Path | None:
    """The newest report directory under `report_dir` (None when there is none yet)."""
    if report_dir is None:
        return None
    try:
        from predictive_headroom.report.store import latest_report_dir
    except ImportError:
        return None
    found = latest_report_dir(report_dir)
    return Path(found) if found else None


class HttpServer:
    """Serves the endpoints on (host, port); port 0 picks a free one (see `.port`)."""

    def __init__(
        self,
        daemon: Status,
        metrics_exposition: Any,
        host: str,
        port: int,
        report_dir: Path | None = None,
        read_timeout: float = 10.0,
        *,
        routes: tuple[str, ...] = ROUTES,
        tls: ssl.SSLContext | None = None,
        guard: Guard | None = None,
    ) -> None:
        """`read_timeout`: seconds a client has, from connecting (or from the end of its last
        request), to send its whole request line and headers (and its TLS handshake); also how
        long an idle kept-alive connection stays open. `routes`: the paths served (others are
        404); `tls`: serve over TLS with this context; `guard`: who may read what it guards.
        Serving only `PROBES`, it is the probe port: plain, its own `PROBE_THREADS` workers, a
        `PROBE_READ_TIMEOUT` header deadline at most and `PROBE_PER_CLIENT` connections an
        address."""
        self.daemon, self.exposition, self.report_dir = daemon, metrics_exposition, report_dir
        self.routes, self.guard = routes, guard
        inner = ("127.0.0.1", 0) if tls else (host, port)
        admission = guard.admit if guard else None
        probes = set(routes) <= set(PROBES) and tls is None
        self._server = DeadlineServer.create(
            self._wsgi,
            *inner,
            min(read_timeout, PROBE_READ_TIMEOUT) if probes else read_timeout,
            listen=not tls,
            admission=admission,
            threads=PROBE_THREADS if probes else THREADS,
            per_client=PROBE_PER_CLIENT if probes else None,
        )
        self._tls = TlsFront(self._server, host, port, tls, read_timeout) if tls else None
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)

    @property
    def port(self) -> int:
        return self._tls.port if self._tls else int(self._server.effective_port)

    def start(self) -> HttpServer:
        """Serve in a background thread."""
        self._thread.start()
        if self._tls:
            self._tls.start()
        how = ("https" if self._tls else "http") + (
            ", authorised callers only" if self.guard else ""
        )
        logger.info("serving %s on port %d (%s)", ", ".join(self.routes), self.port, how)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket and every connection."""
        if self._tls:
            self._tls.stop()
        self._server.stop()
        self._thread.join(timeout=5.0)
        if self.guard:
            self.guard.close()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of `path`."""
        if path not in self.routes and not (path == "/report/" and "/report" in self.routes):
            known = ", ".join(self.routes)
            body = f"not found: {cut(path)}; endpoints: {known}\n".encode()
            return 404, "text/plain; charset=utf-8", body
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.exposition()
        if path == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/readyz":  # open to anyone: ready or not, no more (why: the log, /last-run)
            ready, _ = self.daemon.readiness()
            body = b"ok\n" if ready else b"not ready (the reason: the daemon's log, /last-run)\n"
            return (200 if ready else 503), "text/plain; charset=utf-8", body
        if path == "/last-run":
            return 200, "application/json", dumps(self.daemon.status()).encode()
        return self._report("report.json" if path.endswith(".json") else "index.html")

    def _report(self, name: str) -> tuple[int, str, bytes]:
        directory = latest_report(self.report_dir)
        target = directory / name if directory else None
        failed = getattr(self.daemon, "report_error", None)
        if target is None or not target.is_file():
            hint = (
                f"no report yet in {self.report_dir}: one is written after each refit (PH_REPORT_DIR); "
                "`predictive-headroom report` makes one by hand\n"
            )
            if failed:
                hint = f"no report in {self.report_dir}: {failed}\n"
            return 404, "text/plain; charset=utf-8", hint.encode()
        kind = "application/json" if name.endswith(".json") else "text/html; charset=utf-8"
        return 200, kind, target.read_bytes()

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI application: GET (and HEAD) of the routes; other methods are 405."""
        path, method = environ.get("PATH_INFO") or "/", environ.get("REQUEST_METHOD", "GET")
        access = environ.get(ACCESS_KEY)
        if access is None and self.guard:  # not admitted by the server (a direct WSGI call)
            access = self.guard.check(path, environ.get("HTTP_AUTHORIZATION"))
        extra: list[tuple[str, str]] = []
        if method not in ("GET", "HEAD"):
            code, kind, body = 405, "text/plain; charset=utf-8", b"only GET is served\n"
        elif access is not None and not access.allowed:
            code, kind = access.status, "text/plain; charset=utf-8"
            body = f"{access.message}\n".encode()
            if code == 401:
                extra.append(("WWW-Authenticate", 'Bearer realm="predictive-headroom"'))
            if access.retry_after is not None:
                extra.append(("Retry-After", str(access.retry_after)))
        else:
            try:
                code, kind, body = self.answer(path)
            except Exception:
                logger.exception("http: answering %s failed", path)
                code, kind = 500, "text/plain; charset=utf-8"
                body = b"internal error; see the daemon's log\n"
        start_response(
            f"{code} {HTTPStatus(code).phrase}",
            [
                ("Content-Type", kind),
                ("Content-Length", str(len(body))),
                ("X-Content-Type-Options", "nosniff"),
                *extra,
            ],
        )
        return [b"" if method == "HEAD" else body]
