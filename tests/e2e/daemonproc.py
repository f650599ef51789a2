"""The daemon as a child process (`python -m predictive_headroom run`) against the e2e cluster,
with its own kubeconfig (a ServiceAccount token) and a log file; stopped by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def write_policy(path: Path, pools: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"pools": pools}, sort_keys=False))
    return path


class DaemonProc:
    """One daemon replica; `log` is its stderr (text format)."""

    def __init__(
        self, name: str, workdir: Path, config: Path, kubeconfig: Path, **env: str
    ) -> None:
        self.name = name
        self.log = workdir / f"daemon-{name}.log"
        child_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PH_", "KUBERNETES_"))
        }
        child_env.update(
            {
                "KUBECONFIG": str(kubeconfig),
                "PH_NAMESPACE": "predictive-headroom",
                "PH_LISTEN_HOST": "127.0.0.1",
                "PH_LISTEN_PORT": "0",
                "PH_LOG_FORMAT": "text",
                "PH_LOG_LEVEL": "INFO",
                "PH_RECONCILE_INTERVAL": "1",
                "PH_REPORT_DIR": str(workdir / f"reports-{name}"),
                "PYTHONUNBUFFERED": "1",
                **env,
            }
        )
        self.argv = [sys.executable, "-m", "predictive_headroom", "run", "--config", str(config)]
        self.env = child_env
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str) -> DaemonProc:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [*self.argv, *extra], cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        return self

    def run_once(self, timeout: float = 120.0) -> tuple[int, str]:
        """`run --once`: exit code and log."""
        self.start("--once")
        assert self.popen is not None
        try:
            code = self.popen.wait(timeout=timeout)
        finally:
            self.stop()
        return code, self.text()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL by PID: no clean release of the Lease."""
        if self.alive():
            assert self.popen is not None
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, wait: float = 15.0) -> None:
        """SIGTERM by PID, SIGKILL when it has not stopped within `wait` s."""
        if not self.alive():
            return
        assert self.popen is not None
        os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill()

    def wait_log(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.text():
                return True
            if not self.alive():
                return text in self.text()
            time.sleep(0.2)
        return False
