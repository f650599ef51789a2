"""Logging set-up for the daemon: plain text lines, or one JSON object per line (PH_LOG_FORMAT=json).

JSON lines carry `time`, `level`, `logger`, `message` and any `extra={...}` fields a call adds
(the reconcile summary adds `pools`), so log pipelines can filter without parsing the text.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO

from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "predictive-headroom"


def json_formatter() -> logging.Formatter:
    """A formatter writing each record as one JSON object with UTC ISO-8601 `time`."""
    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%SZ",
        json_ensure_ascii=False,
    )


def setup_logging(level: str = "INFO", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Send every log record at `level` or above to `stream` (stderr) as text or JSON lines.

    Replaces a handler installed by an earlier call (others are kept), so calling it twice is harmless.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    formatter = json_formatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    formatter.converter = time.gmtime  # times in UTC, like the rest of the daemon
    handler.setFormatter(formatter)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Each reconcile is summarised in one line; the client's per-request chatter is not needed.
    for noisy in ("urllib3", "kubernetes", "apscheduler.executors", "apscheduler.scheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
