"""Issue 55 item 5: the daemon serves the certificate mounted from the chart's Secret or
cert-manager's, and serves a renewed one once its files change (no restart), keeping the one it
has while the new files do not load."""

from __future__ import annotations

import datetime
import http.client
import os
import ssl
from pathlib import Path

import pytest

from predictive_headroom.daemon.httpserver import HttpServer
from predictive_headroom.daemon.tls import ReloadingCertificate, self_signed


class _Status:
    def readiness(self) -> tuple[bool, str]:
        return True, "fine"

    def status(self) -> dict[str, object]:
        return {"ok": True}


def _write(directory: Path, name: str) -> Path:
    """A new self-signed certificate for localhost in `directory`/name/ (its own CA)."""
    cert, key = self_signed(["localhost", "127.0.0.1"], datetime.datetime.now(datetime.UTC))
    folder = directory / name
    folder.mkdir()
    (folder / "tls.crt").write_bytes(cert)
    (folder / "tls.key").write_bytes(key)
    return folder


def _mount(volume: Path, folder: Path) -> None:
    """Point volume/..data at `folder` as the kubelet swaps a Secret volume (atomic rename)."""
    link = volume / "..data_tmp"
    link.symlink_to(folder)
    os.replace(link, volume / "..data")


def _scrape(port: int, ca: Path) -> int:
    tls = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("localhost", port, timeout=10, context=tls)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path, caplog) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    first, second = _write(tmp_path, "first"), _write(tmp_path, "second")
    _mount(volume, first)
    for name in ("tls.crt", "tls.key"):
        (volume / name).symlink_to(Path("..data") / name)
    now = [0.0]
    reloading = ReloadingCertificate(volume / "tls.crt", volume / "tls.key", 30.0, lambda: now[0])
    server = HttpServer(_Status(), lambda: b"up 1\n", "127.0.0.1", 0, tls=reloading.context)
    server.start()
    try:
        assert _scrape(server.port, first / "tls.crt") == 200
        _mount(volume, second)
        assert _scrape(server.port, first / "tls.crt") == 200  # not looked at again yet
        now[0] = 31.0
        assert _scrape(server.port, second / "tls.crt") == 200  # renewed, same server
        with pytest.raises(ssl.SSLCertVerificationError):
            _scrape(server.port, first / "tls.crt")
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "tls.crt").write_text("not a certificate")
        (broken / "tls.key").write_text("not a key")
        _mount(volume, broken)
        now[0] = 62.0
        assert _scrape(server.port, second / "tls.crt") == 200  # the last good one stays
        assert "changed but did not load" in caplog.text
    finally:
        server.stop()
