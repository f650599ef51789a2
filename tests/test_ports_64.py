"""The daemon's ports under abuse and its certificate's age (issue 64, item 6): 20,000 request
headers (about 230 KB) got a 200; a flood of idle connections to the probe port (which any pod may
reach) starved the kubelet's probes; an expired certificate was served without a word."""

from __future__ import annotations

import datetime
import http.client
import logging
import socket
import threading
import time
from pathlib import Path

import pytest

from predictive_headroom.daemon.httpserver import PROBE_PER_CLIENT, PROBES, HttpServer
from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.daemon.slow_clients import MAX_HEADER_BYTES, MAX_HEADERS
from predictive_headroom.daemon.tls import (
    EXPIRY_WARNING,
    ReloadingCertificate,
    self_signed,
    server_certificate,
)


class _Status:
    def readiness(self) -> tuple[bool, str]:
        return True, "fine"

    def status(self) -> dict[str, object]:
        return {"ok": True}


def _raw(port: int, request: bytes) -> bytes:
    """Send `request` as is and return the whole answer (the server closes after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                break
        return b"".join(chunks)


@pytest.fixture
def server():
    server = HttpServer(_Status(), lambda: b"up 1\n", "127.0.0.1", 0).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([b"X-A: 1"] * 10, b"200"),
        # with Host and Connection: MAX_HEADERS fields, then one more
        ([f"X-H{i}: v".encode() for i in range(MAX_HEADERS - 2)], b"200"),
        ([f"X-H{i}: v".encode() for i in range(MAX_HEADERS - 1)], b"431"),
        ([f"X-H{i}: {'v' * 8}".encode() for i in range(20_000)], b"431"),  # the 230 KB
        ([b"X-Big: " + b"v" * MAX_HEADER_BYTES], b"431"),
    ],
)
def test_too_many_or_too_large_request_headers_are_answered_431(server, headers, status) -> None:
    request = b"\r\n".join([b"GET /healthz HTTP/1.1", b"Host: x", *headers, b"Connection: close"])
    answer = _raw(server.port, request + b"\r\n\r\n")
    assert answer.split(b" ", 2)[1] == status, answer[:200]


def _flood(port: int, stop: threading.Event, opened: list[socket.socket]) -> None:
    """Open connections from 127.0.0.2 as fast as they are accepted, sending nothing."""
    while not stop.is_set():
        try:
            opened.append(
                socket.create_connection(
                    ("127.0.0.1", port), timeout=2.0, source_address=("127.0.0.2", 0)
                )
            )
        except OSError:
            time.sleep(0.01)


def test_a_flood_of_idle_connections_to_the_probe_port_leaves_the_probes_answered() -> None:
    """Before: 3,000 idle connections from one pod filled the port's 1,000 connections and 20
    of 21 probes timed out (1 s). One address now holds at most PROBE_PER_CLIENT of them."""
    server = HttpServer(_Status(), lambda: b"", "127.0.0.1", 0, routes=PROBES).start()
    stop, opened = threading.Event(), []
    floods = [threading.Thread(target=_flood, args=(server.port, stop, opened)) for _ in range(4)]
    for flood in floods:
        flood.start()
    answered = probes = 0
    try:
        ends = time.monotonic() + 60
        while len(opened) < 2000 and time.monotonic() < ends:  # past the 1,000 connections
            time.sleep(0.1)
        for _ in range(10):
            probes += 1
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5.0)
            try:
                conn.request("GET", "/readyz")
                answered += conn.getresponse().status == 200
            except OSError:
                pass
            finally:
                conn.close()
    finally:
        stop.set()
        for flood in floods:
            flood.join()
        for sock in opened:
            sock.close()
        server.stop()
    assert len(opened) >= 2000 > PROBE_PER_CLIENT
    assert answered == probes


def _certificate(tmp_path: Path, issued_days_ago: float) -> tuple[Path, Path]:
    """A one-year self-signed certificate issued `issued_days_ago` days ago."""
    issued = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=issued_days_ago)
    cert, key = self_signed(["localhost"], issued)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    return tmp_path / "tls.crt", tmp_path / "tls.key"


@pytest.mark.parametrize(
    ("issued_days_ago", "warning"),
    [
        (400, "expired at"),  # a year's certificate, 35 days past its end
        (360, "in 5.0 days; renew it"),
        (10, None),
    ],
)
def test_a_certificate_expired_or_expiring_soon_is_warned_of_at_load_and_in_a_metric(
    tmp_path, caplog, issued_days_ago, warning
) -> None:
    caplog.set_level(logging.WARNING)
    cert, key = _certificate(tmp_path, issued_days_ago)
    served = server_certificate(cert, key, ["localhost"])
    warned = [m for m in caplog.messages if "TLS certificate" in m]
    if warning is None:
        assert warned == []
    else:
        assert len(warned) == 1 and warning in warned[0] and str(cert) in warned[0]
    ends = time.time() + (365 - issued_days_ago) * 86_400
    assert served.expiry() == pytest.approx(ends, abs=600)
    metrics = Metrics()
    metrics.tls_expiry.set_function(served.expiry)
    text = metrics.exposition().decode()
    assert "predictive_headroom_tls_certificate_expiry_timestamp_seconds " in text
    assert EXPIRY_WARNING == 14 * 86_400


def test_a_renewal_to_an_expired_certificate_is_warned_of_and_the_expiry_follows(
    tmp_path, caplog
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cert, key = _certificate(first, 10)
    now = [0.0]
    reloading = ReloadingCertificate(cert, key, 1.0, lambda: now[0])
    good = reloading.not_after
    old_cert, old_key = _certificate(second, 400)
    cert.write_bytes(old_cert.read_bytes())
    key.write_bytes(old_key.read_bytes())
    now[0] = 2.0
    caplog.set_level(logging.WARNING)
    reloading.refresh()
    assert reloading.not_after < time.time() < good
    assert any("expired at" in m for m in caplog.messages)
