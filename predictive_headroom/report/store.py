"""Reports on disk: write one into a directory, keep the daemon's last N, find the newest, load past ones.

Each report is a timestamped directory (index.html and report.json) under one root, with a
`latest` symlink to the newest; a directory appears complete or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from predictive_headroom.core import strict_json
from predictive_headroom.core.series import from_epoch
from predictive_headroom.report.analysis import MAX_PAST
from predictive_headroom.report.build import report_to_json
from predictive_headroom.report.model import Report

logger = logging.getLogger(__name__)

_REPORT_DIR = re.compile(r"^\d{8}T\d{6}Z(-\d+)?$")
LATEST = "latest"


def write_report_files(directory: Path, report: Report) -> None:
    """Write index.html and report.json into the existing `directory`."""
    from predictive_headroom.report.html import render_html

    (directory / "report.json").write_text(
        strict_json.dumps(report_to_json(report), indent=1), encoding="utf-8"
    )
    (directory / "index.html").write_text(render_html(report), encoding="utf-8")


def write_report(out_root: Path, report: Report, keep: int) -> Path:
    """Write the report into a new timestamped directory under `out_root`, point `latest` at it
    and delete all but the newest `keep` report directories; returns the new directory.

    The directory appears complete or not at all (written aside, then renamed into place).
    """
    out_root.mkdir(parents=True, exist_ok=True)
    stem = from_epoch(report.at).strftime("%Y%m%dT%H%M%SZ")
    final, n = out_root / stem, 0
    while final.exists():
        n += 1
        final = out_root / f"{stem}-{n}"
    work = Path(tempfile.mkdtemp(prefix=".writing-", dir=out_root))
    try:
        write_report_files(work, report)
        work.chmod(0o755)
        work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    link = out_root / f".{LATEST}-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(final.name)
    os.replace(link, out_root / LATEST)
    for old in _report_dirs(out_root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    logger.info("report written to %s", final)
    return final


def remove_leftovers(out_root: Path) -> list[str]:
    """Remove what a write killed midway left under `out_root` (`.writing-*` directories, a
    `.latest-<pid>` link) and return their names. Called once at start: the report directory is
    the replica's own (the chart's emptyDir), so nothing else is writing there then."""
    if not out_root.is_dir():
        return []
    removed = []
    for path in out_root.iterdir():
        if path.name.startswith(".writing-") and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.startswith(f".{LATEST}-") and path.is_symlink():
            path.unlink(missing_ok=True)
        else:
            continue
        removed.append(path.name)
    if removed:
        logger.warning(
            "removed %d leftover(s) of report writes that did not finish in %s: %s",
            len(removed),
            out_root,
            ", ".join(sorted(removed)[:5]) + (", ..." if len(removed) > 5 else ""),
        )
    return removed


def _report_dirs(out_root: Path) -> list[Path]:
    """Report directories under `out_root`, oldest first."""
    found = [
        p
        for p in out_root.iterdir()
        if p.is_dir() and not p.is_symlink() and _REPORT_DIR.match(p.name)
    ]
    return sorted(found, key=lambda p: (p.name[:16], int(p.name[17:] or 0)))


def latest_report_dir(out_root: Path) -> Path | None:
    """The newest complete report directory under `out_root`, or None when there is none."""
    link = out_root / LATEST
    if link.is_symlink() and (out_root / os.readlink(link) / "index.html").is_file():
        return out_root / os.readlink(link)
    dirs = _report_dirs(out_root) if out_root.is_dir() else []
    return dirs[-1] if dirs else None


def load_past_reports(out_root: Path, limit: int = MAX_PAST) -> list[dict[str, Any]]:
    """The newest `limit` saved report.json files under `out_root` (oldest first), for `past`."""
    found = []
    for directory in _report_dirs(out_root)[-limit:] if out_root.is_dir() else []:
        try:
            found.append(json.loads((directory / "report.json").read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            logger.warning("skipping unreadable past report %s: %s", directory, exc)
    return found
