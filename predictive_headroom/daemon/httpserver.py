"""The daemon's one HTTP port: /metrics, /healthz, /readyz, /last-run, /report and /report.json.

Served from a background thread by `BoundedHTTPServer` (a fixed worker pool and a read deadline per
request); every answer is computed from the Daemon passed in, so the server holds no state of its
own. Every answer carries `X-Content-Type-Options: nosniff`.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from predictive_headroom.daemon.bounded_http import BoundedHTTPServer

logger = logging.getLogger(__name__)

ROUTES = ("/metrics", "/healthz", "/readyz", "/last-run", "/report", "/report.json")


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
    ) -> None:
        """`read_timeout`: seconds a client has, from connecting, to send its whole request."""
        self.daemon, self.exposition, self.report_dir = daemon, metrics_exposition, report_dir
        self._httpd = BoundedHTTPServer((host, port), self._handler(), read_timeout=read_timeout)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.1,), name="http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> HttpServer:
        """Serve in a background thread."""
        self._thread.start()
        logger.info("serving %s on port %d", ", ".join(ROUTES), self.port)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of `path`."""
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.exposition()
        if path == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/readyz":
            ready, why = self.daemon.readiness()
            return (
                (200 if ready else 503),
                "text/plain; charset=utf-8",
                f"{'ok' if ready else 'not ready'}: {why}\n".encode(),
            )
        if path == "/last-run":
            body = json.dumps(self.daemon.status(), indent=2, default=str).encode()
            return 200, "application/json", body
        if path in ("/report", "/report/", "/report.json"):
            return self._report("report.json" if path.endswith(".json") else "index.html")
        known = ", ".join(ROUTES)
        return 404, "text/plain; charset=utf-8", f"not found: {path}; endpoints: {known}\n".encode()

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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10.0  # no single socket read waits longer

            def parse_request(self) -> bool:
                done = super().parse_request()
                httpd = self.server
                if isinstance(httpd, BoundedHTTPServer):
                    httpd.request_read(self.connection)
                return done

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug("http: " + fmt, *args)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                try:
                    code, kind, body = server.answer(path)
                except Exception:
                    logger.exception("http: answering %s failed", path)
                    code, kind, body = (
                        500,
                        "text/plain; charset=utf-8",
                        b"internal error; see the daemon's log\n",
                    )
                self.send_response(HTTPStatus(code))
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)

        return Handler
