"""No long silence for a new user watching `make venv`, `make demo` or `make test` through a pipe
(issue 58 item 4): each step says what it does, and a long one says it is still at it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def timed_lines(command: list[str], cwd: Path, env: dict[str, str]) -> list[tuple[float, str]]:
    """Each line `command` prints (stdout and stderr through one pipe) and when it came."""
    began = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = [(time.monotonic() - began, line.rstrip("\n")) for line in proc.stdout]
    assert proc.wait(timeout=300) == 0, lines
    return [(0.0, "(start)"), *lines]


def longest_silence(lines: list[tuple[float, str]]) -> float:
    return max(b[0] - a[0] for a, b in pairwise(lines))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_venv_says_each_step_and_never_goes_quiet(tmp_path):
    """A pip install that runs 25 s in silence (as pip does installing what it fetched) gets a
    line every few seconds; every step of the recipe is named."""
    pip = tmp_path / "pip"
    pip.write_text('#!/bin/sh\ncase "$*" in *requirements/test.txt*) sleep 25;; esac\nexit 0\n')
    pip.chmod(0o755)
    lines = timed_lines(
        [
            *("make", "--no-print-directory", "venv", f"VENV={tmp_path / 'venv'}"),
            *(f"PIP={pip}", "HEARTBEAT=4"),
        ],
        REPO,
        dict(os.environ),
    )
    said = [text for _, text in lines]
    for step in ("venv: build tools", "locked packages", "predictive-headroom itself", "ready"):
        assert any(step in text for text in said), said
    assert any("venv: installing: still at it" in text for text in said), said
    assert longest_silence(lines) < 15, lines


@pytest.mark.slow
def test_pytest_through_a_pipe_prints_progress_while_a_slow_test_runs(tmp_path):
    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_slow():\n    time.sleep(6)\n\ndef test_quick():\n    pass\n"
    )
    env = {
        **os.environ,
        "PH_TEST_PROGRESS_SECONDS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    lines = timed_lines(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("-p", "pipe_progress", "test_slow.py"),
        ],
        tmp_path,
        env,
    )
    progress = [text for _, text in lines if text.startswith("[progress] ")]
    assert len(progress) >= 3, lines  # a 6 s test: a line each second or so
    assert progress[0].startswith("[progress] 0/2 tests done"), progress
    assert longest_silence(lines) < 5, lines


@pytest.mark.slow
def test_progress_lines_leave_a_tests_own_redirected_stdout_alone(tmp_path):
    """Issue 63: with one process through a pipe, a progress line written while a test ran put
    pytest's capture back in place of the test's `contextlib.redirect_stdout`; what the test then
    printed (a command's JSON) was lost, and `json.loads('')` failed."""
    (tmp_path / "test_redirect.py").write_text(
        "import contextlib, io, sys, time\n\n"
        "def test_redirected():\n"
        "    printed = io.StringIO()\n"
        "    with contextlib.redirect_stdout(printed):\n"
        "        time.sleep(3)\n"
        "        print('mine')\n"
        "    assert printed.getvalue() == 'mine\\n'\n"
        "    print('to the capture')\n"
    )
    env = {
        **os.environ,
        "PH_TEST_PROGRESS_SECONDS": "0.5",
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    lines = timed_lines(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("-p", "pipe_progress", "test_redirect.py"),
        ],
        tmp_path,
        env,
    )
    said = [text for _, text in lines]
    assert sum(text.startswith("[progress] 0/1 tests done") for text in said) >= 2, said
    assert any("1 passed" in text for text in said), said
    assert "to the capture" not in said and "mine" not in said  # nothing leaked past pytest
