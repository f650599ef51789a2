"""The refit cache's files (`replay.refit_cache`): a directory only its owner can write, and
entries signed with a key only its owner can read, checked before anything in them is loaded.

A cache entry is a pickle (a refit holds scikit-learn models, which have no code-free format in
this project's libraries), and unpickling runs whatever the pickle names. So nothing is read from
a directory another user could write into: the cache directory and every level the cache uses
under it must be owned by this user and writable by nobody else, and every directory above it
owned by this user or root and writable by no one else unless sticky (`/tmp`, where nobody can
rename another's entry). A symbolic link, another user's directory or one its group could write
is refused (`UnsafeCache`, naming the path and the fix); the levels this process makes are made
0700 whatever the umask. Past those checks the cache's real path is used, so a link changed
after the check is never followed.

Each entry is `MAGIC`, an HMAC-SHA256 tag, then the signed bytes: a length-prefixed JSON header
(what the entry covers, read without unpickling) and the body. The tag covers the entry's kind
and key too, so an entry moved under another key fails. The key is 32 random bytes in the
cache's `key` file, made 0600 by the first run and refused when it is a link, another user's, or
readable by others. An entry that fails its check is dropped and never unpickled (`Tampered`).
Writes go to a temporary file renamed into place, so a reader never sees half an entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"PHRC\x00\x02"
"""The first bytes of an entry (format 2: signed; the joblib entries of format 1 are not read)."""
TAG_BYTES = hashlib.sha256().digest_size
KEY_FILE = "key"
KEY_BYTES = 32
KINDS = ("refits", "fits")
"""The directories under the cache root, one per kind of entry."""
SUFFIX = ".entry"
LEGACY = "joblib"
"""Where format 1 (`joblib.Memory`, unsigned) kept its entries: never read, removed by `clear`."""
STALE_PART_SECONDS = 3600.0
"""A temporary file older than this is a write that died, removed by `trim`."""


class UnsafeCache(Exception):
    """The cache directory cannot be trusted: `path`, `why`, and `fix` (what to do about it)."""

    def __init__(self, path: Path, why: str, fix: str) -> None:
        super().__init__(f"{path} {why}")
        self.path, self.why, self.fix = path, why, fix


class Tampered(Exception):
    """An entry that is not one this user's cache signed (never unpickled)."""


def _unsafe_dir(path: Path, st: os.stat_result, euid: int, *, above: bool) -> UnsafeCache | None:
    """Why `path` (its `lstat`, or its `stat` when `above` the cache) cannot hold the cache."""
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return UnsafeCache(
            path,
            "is a symbolic link, which another user could point at entries of theirs",
            f"replace it with a directory of your own (rm {path}), or set PH_CACHE_DIR to a "
            "directory you own",
        )
    if not stat.S_ISDIR(st.st_mode):
        return UnsafeCache(path, "is not a directory", "remove it, or set PH_CACHE_DIR elsewhere")
    owners = (euid, 0) if above else (euid,)
    if st.st_uid not in owners:
        return UnsafeCache(
            path,
            f"is owned by uid {st.st_uid}, not by you (uid {euid}): its owner could plant "
            "entries that run code when read",
            f"set PH_CACHE_DIR to a directory of your own (or remove {path})",
        )
    if mode & 0o022 and not (above and mode & stat.S_ISVTX):
        who = (
            "its group and others"
            if mode & 0o022 == 0o022
            else ("its group" if mode & 0o020 else "others")
        )
        return UnsafeCache(
            path,
            f"is writable by {who} (mode {mode:04o}): they could plant entries that run code "
            "when read",
            (
                f"chmod go-w {path}, or set PH_CACHE_DIR to a directory of your own elsewhere"
                if above
                else f"chmod 700 {path}"
            ),
        )
    return None


def _check_above(parent: Path, euid: int) -> None:
    """Every directory from `parent` (a real path) up to `/` is safe to hold the cache."""
    for level in (parent, *parent.parents):
        problem = _unsafe_dir(level, os.stat(level), euid, above=True)
        if problem is not None:
            raise problem


def _own_dir(path: Path, euid: int) -> None:
    """`path` exists as a directory of this user's that no one else can write: made 0700 when
    missing (whatever the umask), else checked (`UnsafeCache`)."""
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # the umask may have taken more
        return
    except FileExistsError:
        pass
    problem = _unsafe_dir(path, os.lstat(path), euid, above=False)
    if problem is not None:
        raise problem


def safe_root(location: Path) -> Path:
    """The real path of the cache at `location`, made (0700, every missing level) or checked, with
    its kinds' directories: each level owned by this user, writable by no one else, not a link;
    every directory above it this user's or root's and not writable by others unless sticky.
    Raises `UnsafeCache` (with the fix) or OSError (cannot be made)."""
    euid = os.geteuid()
    location = Path(os.path.abspath(location))
    missing = []
    level = location
    while not os.path.lexists(level) and level != level.parent:
        missing.append(level)
        level = level.parent
    if level == location:
        problem = _unsafe_dir(location, os.lstat(location), euid, above=False)
        if problem is not None:
            raise problem
    real = Path(os.path.realpath(level))
    _check_above(real if level != location else real.parent, euid)
    for made in reversed(missing):
        real = real / made.name
        _own_dir(real, euid)
    for kind in KINDS:
        _own_dir(real / kind, euid)
    return real


def _read_key(path: Path, euid: int) -> bytes:
    """The key in `path` (no link followed), refused unless this user's alone."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO never blocks
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != euid or st.st_mode & 0o077:
            raise UnsafeCache(
                path,
                f"is not a key file of yours alone (uid {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):04o})",
                f"remove it (rm {path}); the next run makes a new one",
            )
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise UnsafeCache(path, "is not a key file", f"remove it (rm {path})")
    return key


def signing_key(root: Path) -> bytes:
    """The cache's key (`root` checked by `safe_root`): read, or made 0600 by the first run (two
    runs at once agree on one: it is linked into place, never overwritten)."""
    path = root / KEY_FILE
    euid = os.geteuid()
    try:
        return _read_key(path, euid)
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".key-")  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
        with contextlib.suppress(FileExistsError):  # another run made it first: read theirs
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return _read_key(path, euid)


@dataclass(frozen=True)
class EntryStore:
    """Signed entries under `root` (a real path `safe_root` checked), by kind and key. Picklable,
    for the worker processes that store their refits."""

    root: Path
    key: bytes = field(repr=False)

    def path(self, kind: str, name: str) -> Path:
        return self.root / kind / f"{name}{SUFFIX}"

    def holds(self, kind: str, name: str) -> bool:
        """True when an entry is kept under `name` (unread, so not yet checked)."""
        return self.path(kind, name).is_file()

    def _tag(self, kind: str, name: str, signed: bytes) -> bytes:
        return hmac.new(self.key, f"{kind}/{name}\0".encode() + signed, hashlib.sha256).digest()

    def read(self, kind: str, name: str) -> tuple[dict[str, Any], bytes] | None:
        """The header and body kept under `name` once their tag checks (None: none kept). Raises
        `Tampered` for anything this cache did not sign, before any of it is parsed."""
        path = self.path(kind, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO never blocks
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a link where an entry should be
            raise Tampered(f"{path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise Tampered(f"{path}: not a file of yours")
            data = f.read()
        start = len(MAGIC) + TAG_BYTES
        if not data.startswith(MAGIC) or len(data) < start + 4:
            raise Tampered(f"{path}: not a signed entry (truncated, or another format)")
        signed = data[start:]
        if not hmac.compare_digest(data[len(MAGIC) : start], self._tag(kind, name, signed)):
            raise Tampered(f"{path}: its signature does not match this cache's key")
        size = int.from_bytes(signed[:4], "big")
        header = json.loads(signed[4 : 4 + size])
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return header, signed[4 + size :]

    def write(self, kind: str, name: str, header: dict[str, Any], body: bytes) -> bool:
        """Keep `header` and `body` under `name`, signed (False: the write failed, a full disk)."""
        meta = json.dumps(header, sort_keys=True).encode()
        signed = len(meta).to_bytes(4, "big") + meta + body
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.root / kind, prefix=".part-")  # 0600
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + self._tag(kind, name, signed) + signed)
            os.replace(tmp, self.path(kind, name))
            return True
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            return False

    def drop(self, kind: str, name: str) -> None:
        """Remove the entry under `name` (gone already: nothing to do)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path(kind, name))

    def trim(self, max_bytes: int) -> None:
        """Evict the least recently used entries until at most `max_bytes` are kept; remove
        the temporary files of writes that died. Raises OSError when the cache cannot be read."""
        entries = []
        now = time.time()
        for kind in KINDS:
            for path in (self.root / kind).iterdir():
                st = path.lstat()
                if path.name.startswith(".part-") and now - st.st_mtime > STALE_PART_SECONDS:
                    path.unlink(missing_ok=True)
                elif path.suffix == SUFFIX:
                    entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size


def usage(location: Path) -> tuple[int, int]:
    """(entries, bytes) kept under `location` (0, 0 when there is none); links not followed."""
    entries, size = 0, 0
    for kind in KINDS:
        try:
            paths = list((location / kind).iterdir()) if not (location / kind).is_symlink() else []
        except OSError:
            continue
        for path in paths:
            if path.suffix != SUFFIX:
                continue
            try:
                size += path.lstat().st_size
            except OSError:
                continue
            entries += 1
    return entries, size


def clear(location: Path) -> tuple[int, int]:
    """Remove every entry kept under `location` and format 1's tree; returns what was there
    (`usage`). Raises `UnsafeCache` for a directory that is not safely this user's."""
    if not os.path.lexists(location):
        return 0, 0
    root = safe_root(location)
    was = usage(root)
    for kind in KINDS:
        for path in (root / kind).iterdir():
            path.unlink(missing_ok=True)
    legacy = root / LEGACY
    if legacy.is_dir() and not legacy.is_symlink():
        shutil.rmtree(legacy)
    return was


__all__ = [
    "KINDS",
    "EntryStore",
    "Tampered",
    "UnsafeCache",
    "clear",
    "safe_root",
    "signing_key",
    "usage",
]
