"""The locked dependency set: uv.lock matches pyproject.toml, the hashed requirement files that
`make venv` and the image install are what uv.lock exports, and the build tools and pandas are at
the versions the lock promises. Offline: uv reads only uv.lock and pyproject.toml here."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")
REQUIREMENTS = {
    "build": ["--only-group", "build-tools"],
    "runtime": [],
    "test": ["--extra", "test"],
}
EXPORT = ["export", "--frozen", "--quiet", "--format", "requirements.txt", "--no-emit-project"]


def _uv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(UV), *args], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def _pins(name: str) -> dict[str, str]:
    """{package: version} of requirements/<name>.txt, each pin checked to carry a hash."""
    text = (REPO / "requirements" / f"{name}.txt").read_text()
    pins = {}
    for entry in re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2]):
        match = re.match(r"([a-z0-9._-]+)==([^ ;\\]+)", entry)
        assert match, f"requirements/{name}.txt: not a pinned requirement: {entry[:80]!r}"
        assert "--hash=sha256:" in entry, f"requirements/{name}.txt: {match[1]} has no hash"
        pins[match[1]] = match[2]
    return pins


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@pytest.mark.slow
def test_the_lock_matches_pyproject_for_python_311_to_313() -> None:
    checked = _uv("lock", "--check", "--offline")
    assert checked.returncode == 0, f"uv.lock is stale: run make lock\n{checked.stderr}"
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    assert lock["requires-python"] == ">=3.11, <3.14"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_each_requirements_file_is_what_the_lock_exports(name: str) -> None:
    exported = _uv(*EXPORT, "--no-default-groups", *REQUIREMENTS[name])
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == (REPO / "requirements" / f"{name}.txt").read_text(), (
        f"requirements/{name}.txt is not what uv.lock exports: run make lock"
    )


def test_every_pin_carries_a_hash_and_the_image_set_is_in_the_test_set() -> None:
    runtime, test = _pins("runtime"), _pins("test")
    assert {"prophet", "pandas", "kubernetes", "waitress"} <= runtime.keys()
    assert {"pytest", "ruff", "uv"} <= test.keys() - runtime.keys()
    assert {k: test[k] for k in runtime} == runtime, "the image and make venv lock alike"


def test_the_build_tools_are_past_their_published_advisories() -> None:
    tools = _pins("build")
    assert {"pip", "setuptools", "wheel"} <= tools.keys()
    # CVE-2024-6345 (fixed in setuptools 70.0) and CVE-2025-47273 (78.1.1) name the 65.5.0 that
    # Python 3.11's venv brings; `make lock UPGRADE=1` moves all three to their newest.
    assert _version(tools["setuptools"]) >= (78, 1, 1)
    assert _version(tools["pip"]) >= (26,)


def test_pandas_is_locked_where_prophet_runs_without_a_warning() -> None:
    # pandas 3.1 deprecated `inplace=`, which Prophet passes at every predict (Pandas4Warning)
    assert _version(_pins("runtime")["pandas"]) < (3, 1)
