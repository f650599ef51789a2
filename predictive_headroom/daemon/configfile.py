"""The policy file the daemon runs from: a change is noticed by its content and parsed; invalid content
is reported once, with every problem, and the config in force stays.

A file that cannot be read while the daemon runs (deleted, replaced by a directory, unreadable, a
dangling symlink) is treated the same way: logged once with the path and the cause, counted in
`errors_total{kind="config"}`, kept in `error` for /last-run and the readiness log, and the last
good config keeps running. When the file is back, that is logged too.

ConfigMap mounts change by a symlink swap, so the content is compared, not the mtime; only a file
already rejected is recognised by its mtime, size and inode, so it is not read and parsed again at
every reconcile.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.policy.bounded_yaml import size_problem
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.echo import cut
from predictive_headroom.policy.load import ConfigError, Problem, parse_policy

logger = logging.getLogger(__name__)


class ConfigFile:
    """Watches the policy file: `changed()` returns new valid content once; `accept()` makes it the one in force."""

    def __init__(self, path: str | Path, metrics: Metrics) -> None:
        self.path = Path(path)
        self.metrics = metrics
        self.sha256 = self.digest()
        """Digest of the content in force."""
        self.error: str | None = None
        """Why the file's current content was rejected (None when it is the content in force)."""
        self._rejected: str | None = None
        self._rejected_error: str | None = None
        self._rejected_signature: tuple[int, int, int] | None = None

    def digest(self) -> str | None:
        """The SHA-256 of the file's content, or None when it cannot be read."""
        return self._read()[0]

    def _read(self) -> tuple[str | None, str | None]:
        """(digest, None) for a readable file, else (None, why it cannot be read)."""
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest(), None
        except IsADirectoryError:
            return None, "is a directory, not a file"
        except FileNotFoundError:
            if self.path.is_symlink():
                return None, f"is a symlink to {os.readlink(self.path)!s}, which does not exist"
            return None, "does not exist"
        except PermissionError:
            return None, "cannot be read: permission denied"
        except OSError as exc:
            return None, f"cannot be read: {exc.strerror or exc}"

    def _unreadable(self, why: str) -> None:
        message = f"config file {self.path} {why}"
        if message == self.error:
            return  # said once already
        self.error = message
        self.metrics.error("config")
        logger.error("%s; the last good config stays in force", message)

    def changed(self) -> tuple[str, Policy] | None:
        """(digest, policy) when the content changed and is valid; None when unchanged or invalid.

        Invalid content is logged with every problem and counted once; `error` keeps the message.
        Any exception while loading counts as invalid content (the last good config stays). A file
        already rejected is known by its mtime, size and inode and is neither read nor parsed again.
        """
        signature = self._signature()
        if signature is not None and signature == self._rejected_signature:
            self.error = self._rejected_error
            return None
        if signature is not None and (too_big := size_problem(signature[1])):
            self._reject(None, signature, ConfigError(str(self.path), [Problem("", too_big)]))
            return None
        digest, why = self._read()
        if digest is None:
            self._unreadable(why or "cannot be read")
            return None
        if digest == self.sha256:
            if self.error is not None:
                logger.info("config file %s is back to the config in force", self.path)
            self.error = self._rejected = self._rejected_signature = None
            return None
        if digest == self._rejected:
            self.error = self._rejected_error
            return None
        try:
            policy = parse_policy(self.path.read_text(encoding="utf-8"), str(self.path))
        except Exception as exc:  # any failure to load keeps the last good config
            self._reject(digest, signature, exc)
            return None
        return digest, policy

    def _signature(self) -> tuple[int, int, int] | None:
        """(mtime in ns, size, inode) of the file the path leads to, or None when it cannot be stat'ed."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _reject(
        self, digest: str | None, signature: tuple[int, int, int] | None, exc: BaseException
    ) -> None:
        """Remember the content as rejected, say why once and count it."""
        why = (
            str(exc)
            if isinstance(exc, (ConfigError, OSError, UnicodeDecodeError))
            else (f"{self.path}: cannot be loaded: {type(exc).__name__}: {cut(exc, 300)}")
        )
        self._rejected, self._rejected_signature = digest, signature
        self.error = self._rejected_error = why
        self.metrics.error("config")
        logger.error(
            "config changed but cannot be used; the previous config stays in force: %s", why
        )

    def accept(self, digest: str) -> None:
        """The content with `digest` is now in force."""
        self.sha256, self._rejected, self.error = digest, None, None
        self._rejected_signature = None


def same_forecast(a: Policy, b: Policy, name: str) -> bool:
    """True when pool `name` exists in both policies with the same forecast spec, lead time and
    protection (which chooses the quantile the forecast is fitted at): what a reload compares in
    the file, before anything is resolved from it."""
    pa = next((p for p in a.pools if p.name == name), None)
    pb = next((p for p in b.pools if p.name == name), None)
    return (
        pa is not None
        and pb is not None
        and pa.forecast == pb.forecast
        and pa.lead_time == pb.lead_time
        and pa.protection == pb.protection
    )
