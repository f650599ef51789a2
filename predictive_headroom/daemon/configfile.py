"""The policy file the daemon runs from: a change is noticed by its content and parsed; invalid content
is reported once, with every problem, and the config in force stays.

ConfigMap mounts change by a symlink swap, so the content is compared, not the mtime.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from predictive_headroom.daemon.metrics import Metrics
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.load import ConfigError, parse_policy

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

    def digest(self) -> str | None:
        """The SHA-256 of the file's content, or None when it cannot be read."""
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    def changed(self) -> tuple[str, Policy] | None:
        """(digest, policy) when the content changed and is valid; None when unchanged or invalid.

        Invalid content is logged with every problem and counted once; `error` keeps the message.
        """
        digest = self.digest()
        if digest is None or digest in (self.sha256, self._rejected):
            return None
        try:
            policy = parse_policy(self.path.read_text(encoding="utf-8"), str(self.path))
        except (ConfigError, OSError, UnicodeDecodeError) as exc:
            self._rejected, self.error = digest, str(exc)
            self.metrics.error("config")
            logger.error(
                "config changed but cannot be used; the previous config stays in force: %s", exc
            )
            return None
        return digest, policy

    def accept(self, digest: str) -> None:
        """The content with `digest` is now in force."""
        self.sha256, self._rejected, self.error = digest, None, None
