"""TLS for the daemon's HTTP port, with the standard library's `ssl` and `asyncio`.

waitress speaks plain HTTP only, so `TlsFront` terminates TLS on the port and hands each
connection's plaintext to the waitress server over a socket pair (`DeadlineServer.adopt`): no
plain listener exists, and waitress's header deadline and idle timeout apply as before (when it
closes its end, the TLS connection is closed). A client that does not finish its TLS handshake
within the read timeout is cut off. `server_context` loads a mounted certificate
(`PH_TLS_CERT_FILE`, `PH_TLS_KEY_FILE`) or, without one, makes a self-signed one at start
(`cryptography`), as controller-runtime's secure metrics serving does. A mounted certificate is
loaded again when its files change (cert-manager renewing it, `helm upgrade` replacing the chart's
Secret: the kubelet swaps the volume's files), checked at most every `RELOAD_CHECK` seconds as
clients connect, like controller-runtime's certwatcher. A certificate that has expired, or
expires within `EXPIRY_WARNING` seconds, is warned of when it is loaded (at start and at each
reload); when it expires is `ServedCertificate.expiry`, which the daemon exposes as
`predictive_headroom_tls_certificate_expiry_timestamp_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import math
import os
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from predictive_headroom.daemon.slow_clients import BACKLOG, CONNECTION_LIMIT, DeadlineServer

logger = logging.getLogger(__name__)

SELF_SIGNED_DAYS = 365
RELOAD_CHECK = 10.0
"""Seconds between two looks at a mounted certificate's files (as clients connect)."""
CHUNK = 65536
EXPIRY_WARNING = 14 * 86_400.0
"""A certificate expiring within this many seconds is warned of at load (cert-manager renews a
90-day certificate 30 days ahead: one this close was not renewed)."""


def self_signed(names: Sequence[str], now: datetime.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate for `names` (DNS names or IP addresses) valid from `now` for
    `SELF_SIGNED_DAYS`, and its ECDSA P-256 key, both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alt: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@dataclass(frozen=True)
class ServedCertificate:
    """The TLS context a port serves, where its certificate came from, and when the certificate
    served now expires (`expiry()`: POSIX seconds; NaN when it cannot be read)."""

    context: ssl.SSLContext
    source: str
    expiry: Callable[[], float]


def server_context(
    cert_file: Path | None, key_file: Path | None, names: Sequence[str]
) -> tuple[ssl.SSLContext, str]:
    """A TLS 1.2+ server context and where its certificate came from (`server_certificate`)."""
    served = server_certificate(cert_file, key_file, names)
    return served.context, served.source


def server_certificate(
    cert_file: Path | None, key_file: Path | None, names: Sequence[str]
) -> ServedCertificate:
    """A TLS 1.2+ server context, where its certificate came from and when it expires:
    `cert_file` and `key_file` when given (ValueError naming the file when unreadable; a warning
    when it has expired or expires within `EXPIRY_WARNING`), else a self-signed one for `names`."""
    if cert_file is not None:
        reloading = ReloadingCertificate(cert_file, key_file)
        source = f"certificate {cert_file} (loaded again when it changes)"
        return ServedCertificate(reloading.context, source, lambda: reloading.not_after)
    context = _new_context()
    now = datetime.datetime.now(datetime.UTC)
    cert, key = self_signed(names, now)
    with tempfile.TemporaryDirectory(prefix="ph-tls-") as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        context.load_cert_chain(cert_path, key_path)
    ends = x509.load_pem_x509_certificate(cert).not_valid_after_utc.timestamp()
    return ServedCertificate(
        context, f"a self-signed certificate for {', '.join(names)}", lambda: ends
    )


def not_after(cert_file: Path) -> float:
    """When the (first) certificate in the PEM file `cert_file` expires, POSIX seconds; NaN when
    it cannot be read (the TLS library, which loaded it, is the judge of the file)."""
    try:
        return x509.load_pem_x509_certificate(
            cert_file.read_bytes()
        ).not_valid_after_utc.timestamp()
    except (OSError, ValueError):
        return float("nan")


def warn_if_expiring(cert_file: Path, expires: float, now: float) -> None:
    """Log a warning when the certificate of `cert_file` has expired at `now`, or expires within
    `EXPIRY_WARNING` seconds: clients that check it refuse the port once it has."""
    if math.isnan(expires):  # the expiry could not be read
        return
    when = datetime.datetime.fromtimestamp(expires, datetime.UTC).isoformat().replace("+00:00", "Z")
    if expires <= now:
        logger.warning(
            "TLS certificate %s expired at %s: clients that verify it (Prometheus) refuse the "
            "port; renew it (cert-manager, or replace the Secret's tls.crt and tls.key)",
            cert_file,
            when,
        )
    elif expires - now <= EXPIRY_WARNING:
        logger.warning(
            "TLS certificate %s expires at %s, in %.1f days; renew it before then",
            cert_file,
            when,
            (expires - now) / 86_400,
        )


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _load(cert_file: Path, key_file: Path | None) -> ssl.SSLContext:
    """A server context with the certificate of `cert_file` (ValueError naming the files)."""
    context = _new_context()
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"cannot load the TLS certificate {cert_file} with key {key_file or cert_file} "
            f"(PH_TLS_CERT_FILE, PH_TLS_KEY_FILE): {exc}"
        ) from None
    return context


def _stamp(*paths: Path | None) -> tuple[tuple[int, int, int], ...]:
    """(inode, mtime, size) of each file, through symlinks (a Secret volume's `..data` swap)."""
    stamps = []
    for path in paths:
        if path is not None:
            found = os.stat(path)
            stamps.append((found.st_ino, found.st_mtime_ns, found.st_size))
    return tuple(stamps)


class ReloadingCertificate:
    """A mounted certificate served from `context`, loaded again into a new context when its files
    change; a change that does not load (files half replaced) keeps the one loaded before."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path | None,
        every: float = RELOAD_CHECK,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cert_file, self.key_file, self.every, self.monotonic = (
            cert_file,
            key_file,
            every,
            monotonic,
        )
        self.context = _load(cert_file, key_file)
        """The context given to the server: its handshakes switch to `current`."""
        self.not_after = not_after(cert_file)
        """When the certificate served now expires (POSIX seconds; NaN: unreadable)."""
        warn_if_expiring(cert_file, self.not_after, time.time())
        self.context.sni_callback = self._pick
        self.current = self.context
        self._stamp = _stamp(cert_file, key_file)
        self._checked = monotonic()
        self._lock = threading.Lock()

    def _pick(self, connection: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        """Called at each handshake (with or without SNI): serve the newest certificate."""
        current = self.refresh()
        if current is not self.context:
            connection.context = current

    def refresh(self) -> ssl.SSLContext:
        """The context to serve: loaded again when `every` seconds passed and the files changed."""
        with self._lock:
            if self.monotonic() - self._checked < self.every:
                return self.current
            self._checked = self.monotonic()
            try:
                stamp = _stamp(self.cert_file, self.key_file)
                if stamp == self._stamp:
                    return self.current
                self.current, self._stamp = _load(self.cert_file, self.key_file), stamp
                self.not_after = not_after(self.cert_file)
                logger.info("TLS certificate %s changed: loaded again", self.cert_file)
                warn_if_expiring(self.cert_file, self.not_after, time.time())
            except (OSError, ValueError) as exc:
                logger.warning(
                    "TLS certificate %s changed but did not load: %s", self.cert_file, exc
                )
            return self.current


def default_names() -> list[str]:
    """The names a self-signed certificate is made for: this host (the pod), localhost, 127.0.0.1."""
    names = [socket.gethostname(), "localhost", "127.0.0.1"]
    pod_ip = os.environ.get("POD_IP")
    return [*names, pod_ip] if pod_ip else names


class TlsFront:
    """Terminates TLS on (host, port) (port 0: a free one) for `inner`, on its own thread."""

    def __init__(
        self,
        inner: DeadlineServer,
        host: str,
        port: int,
        context: ssl.SSLContext,
        handshake_timeout: float,
    ) -> None:
        self.inner, self.context, self.handshake_timeout = inner, context, handshake_timeout
        self._listener = socket.create_server((host, port), backlog=BACKLOG)
        self.port = int(self._listener.getsockname()[1])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="https", daemon=True)
        self._open: set[asyncio.StreamWriter] = set()
        self._stopped: asyncio.Event | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting and close every TLS connection."""
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())
        self._loop.run_until_complete(self._close_all())
        self._loop.close()

    async def _close_all(self) -> None:
        """Close every open connection and let their pumps end."""
        for writer in list(self._open):
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0.05)  # transports finish closing

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(
            self._connection,
            sock=self._listener,
            ssl=self.context,
            ssl_handshake_timeout=self.handshake_timeout,
        )
        async with server:
            await self._stopped.wait()
            server.close()
            with contextlib.suppress(AttributeError):  # Python 3.12+
                server.close_clients()  # type: ignore[attr-defined]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Pipe one TLS connection's plaintext to and from a waitress channel."""
        if len(self._open) >= CONNECTION_LIMIT:
            writer.close()
            return
        self._open.add(writer)
        ours, theirs = socket.socketpair()
        try:
            self.inner.adopt(theirs, writer.get_extra_info("peername"))
            inner_reader, inner_writer = await asyncio.open_connection(sock=ours)
            await asyncio.gather(_pump(reader, inner_writer), _pump(inner_reader, writer))
        finally:
            self._open.discard(writer)
            writer.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy `source` to `sink` until either ends, then close `sink` (which ends the other pump)."""
    try:
        while data := await source.read(CHUNK):
            sink.write(data)
            await sink.drain()
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    finally:
        sink.close()
