"""A refit cache only its owner can write (`replay.cache_store`): an entry planted by another
user, through a link, in a directory its group can write, or tampered with in the user's own
cache is never unpickled, and the run goes on without it, saying why and what to do.

Each planted entry is a pickle that would leave a marker file if it ever ran. Another user is
played by `nobody` through `setpriv` when this runs as root; elsewhere foreign ownership is
simulated by this process seeing itself as another uid."""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from test_backtest import SeasonalNaiveForecaster, series
from test_refit_cache import replayed

from predictive_headroom.cli import main
from predictive_headroom.replay import cache_store
from predictive_headroom.replay.cache_store import EntryStore, safe_root
from predictive_headroom.replay.refit_cache import CacheSpec, cache_usage

NOBODY = 65534
AS_NOBODY = (
    os.geteuid() == 0
    and shutil.which("setpriv") is not None
    and subprocess.run(["setpriv", "--reuid", str(NOBODY), "true"], check=False).returncode == 0
)


class Runs:
    """Unpickled, it writes a marker file: the code a planted entry would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def planted(marker: Path) -> bytes:
    return pickle.dumps(Runs(marker))


@pytest.fixture(scope="module")
def history():
    return series(5)


@pytest.fixture(scope="module")
def uncached(history):
    return replayed(history, None, SeasonalNaiveForecaster())


@pytest.fixture(scope="module")
def names(history, tmp_path_factory):
    """The entry names (keys) the run below uses, learnt from a cache of this user's own."""
    location = tmp_path_factory.mktemp("own") / "refits"
    replayed(history, CacheSpec(location), SeasonalNaiveForecaster())
    return [p.stem for p in (location / "refits").glob("*.entry")]


@pytest.fixture
def shared():
    """A sticky directory anyone may create in (as /tmp), outside pytest's private one."""
    where = Path(tempfile.mkdtemp(prefix="ph-shared-"))
    os.chmod(where, 0o1777)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def plant(directory: Path, names: list[str], marker: Path, *, other: bool = True) -> None:
    """A cache made at `directory` (by another user when `other`, and this machine allows):
    its own key, entries signed with it under the names the victim's run reads, and a format-1
    (joblib) entry, each running code."""
    stage = directory.parent / f"{directory.name}-stage"
    for kind in cache_store.KINDS:
        (stage / kind).mkdir(parents=True)
    theirs = EntryStore(stage, b"k" * cache_store.KEY_BYTES)
    (stage / cache_store.KEY_FILE).write_bytes(theirs.key)
    for name in names:
        assert theirs.write("refits", name, {"quantiles": [0.8, 0.99]}, planted(marker))
    legacy = stage / "joblib" / "predictive_headroom" / "replay" / "refit_cache" / "_keyed" / "x"
    legacy.mkdir(parents=True)
    (legacy / "output.pkl").write_bytes(planted(marker))
    if other and AS_NOBODY:
        for path in (stage, *stage.rglob("*")):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        copy = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
        subprocess.run([*copy, "cp", "-r", str(stage), str(directory)], check=True)
        assert directory.stat().st_uid == NOBODY
    else:
        stage.rename(directory)
    shutil.rmtree(stage, ignore_errors=True)


def foreign(monkeypatch) -> None:
    """Without root: this process sees itself as another uid, so its own files are foreign."""
    if not AS_NOBODY:
        uid = os.geteuid() + 1
        monkeypatch.setattr(cache_store.os, "geteuid", lambda: uid)


def refused(caplog, why: str) -> str:
    said = [r.getMessage() for r in caplog.records if "refit cache" in r.getMessage()]
    assert len(said) == 1, said
    assert "refusing" in said[0] and why in said[0] and "running without the cache" in said[0]
    return said[0]


def test_another_users_cache_is_refused_and_nothing_in_it_runs(
    history, uncached, names, shared, tmp_path, caplog, monkeypatch
):
    marker = tmp_path / "ran"
    theirs = shared / "cache"
    plant(theirs, names, marker)
    foreign(monkeypatch)
    with caplog.at_level(logging.WARNING):
        out = replayed(history, CacheSpec(theirs), SeasonalNaiveForecaster())
    said = refused(caplog, "not by you")
    assert str(theirs) in said and "PH_CACHE_DIR" in said
    assert not marker.exists() and out == uncached


def test_a_link_to_another_users_cache_is_refused(
    history, uncached, names, shared, tmp_path, caplog, monkeypatch
):
    marker = tmp_path / "ran"
    theirs = shared / "cache"
    plant(theirs, names, marker)
    link = tmp_path / "refits"
    link.symlink_to(theirs)
    with caplog.at_level(logging.WARNING):
        out = replayed(history, CacheSpec(link), SeasonalNaiveForecaster())
    assert "symbolic link" in refused(caplog, str(link))
    caplog.clear()
    foreign(monkeypatch)
    with caplog.at_level(logging.WARNING):  # a cache under a link: the real directory is checked
        again = replayed(history, CacheSpec(tmp_path / "refits" / "sub"), SeasonalNaiveForecaster())
    refused(caplog, str(theirs))
    assert not marker.exists() and out == again == uncached


def test_a_cache_its_group_can_write_is_refused(history, uncached, names, tmp_path, caplog):
    marker = tmp_path / "ran"
    old = os.umask(0o002)
    try:
        location = tmp_path / "refits"
        plant(location, names, marker, other=False)  # as in a 0775 directory of yours
        os.chmod(location, 0o775)
        with caplog.at_level(logging.WARNING):
            out = replayed(history, CacheSpec(location), SeasonalNaiveForecaster())
    finally:
        os.umask(old)
    said = refused(caplog, "writable by its group (mode 0775)")
    assert f"chmod 700 {location}" in said
    assert not marker.exists() and out == uncached


def test_a_cache_under_a_directory_others_can_write_is_refused(history, uncached, tmp_path, caplog):
    parent = tmp_path / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)  # not sticky: anyone could rename the cache and put theirs there
    with caplog.at_level(logging.WARNING):
        out = replayed(history, CacheSpec(parent / "refits"), SeasonalNaiveForecaster())
    said = refused(caplog, "writable by its group and others (mode 0777)")
    assert f"chmod go-w {parent}" in said
    assert out == uncached and not (parent / "refits").exists()


def test_a_new_cache_is_made_0700_at_every_level_whatever_the_umask(history, tmp_path):
    old = os.umask(0o002)
    try:
        location = tmp_path / "xdg" / "predictive-headroom" / "refits"
        replayed(history, CacheSpec(location), SeasonalNaiveForecaster())
    finally:
        os.umask(old)
    made = [tmp_path / "xdg", location.parent, location, *(location / k for k in cache_store.KINDS)]
    assert [stat.S_IMODE(p.stat().st_mode) for p in made] == [0o700] * len(made)
    key = location / cache_store.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert cache_usage(location)[0] == 2


def test_a_tampered_entry_in_your_own_cache_is_never_unpickled(history, uncached, tmp_path, caplog):
    marker = tmp_path / "ran"
    spec = CacheSpec(tmp_path / "refits")
    replayed(history, spec, SeasonalNaiveForecaster())
    entries = sorted((spec.location / "refits").glob("*.entry"))
    head = len(cache_store.MAGIC) + cache_store.TAG_BYTES
    signed = entries[0].read_bytes()[head:]
    meta = int.from_bytes(signed[:4], "big") + 4
    entries[0].write_bytes(entries[0].read_bytes()[: head + meta] + planted(marker))
    guessed = EntryStore(safe_root(spec.location), b"g" * cache_store.KEY_BYTES)  # a wrong key
    guessed.write("refits", entries[1].stem, {"quantiles": [0.8, 0.99]}, planted(marker))
    with caplog.at_level(logging.WARNING):
        out = replayed(history, spec, SeasonalNaiveForecaster())
    said = [r.getMessage() for r in caplog.records if "refit cache" in r.getMessage()]
    assert len(said) == 2 and all("signature does not match" in s for s in said)
    assert not marker.exists() and out == uncached
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert replayed(history, spec, SeasonalNaiveForecaster()) == uncached  # rewritten
    assert "refit cache" not in caplog.text


def test_a_key_others_can_read_is_refused(history, uncached, tmp_path, caplog):
    spec = CacheSpec(tmp_path / "refits")
    replayed(history, spec, SeasonalNaiveForecaster())
    os.chmod(spec.location / cache_store.KEY_FILE, 0o644)
    with caplog.at_level(logging.WARNING):
        assert replayed(history, spec, SeasonalNaiveForecaster()) == uncached
    said = refused(caplog, "not a key file of yours alone")
    assert f"rm {spec.location / cache_store.KEY_FILE}" in said


def test_cache_info_and_clear_refuse_another_users_cache(
    names, shared, tmp_path, capsys, monkeypatch
):
    theirs = shared / "cache"
    plant(theirs, names, tmp_path / "ran")
    foreign(monkeypatch)
    monkeypatch.setenv("PH_CACHE_DIR", str(theirs))
    assert main(["cache", "info"]) == 0
    assert f"refused: {theirs} is owned by uid" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 2
    assert f"refusing to clear {theirs}" in capsys.readouterr().err
    assert cache_usage(theirs)[0] == len(names)
