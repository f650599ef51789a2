"""SIGTERM ends the daemon process with exit 0 within the grace period, the API server reachable
or not (issue 55: after an API outage the daemon logged `stopped`, then `Fatal Python error:
Aborted`, exit -6: threads still in a call to the API server woke while the interpreter was
finalising)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fake_apiserver import FakeApiServer

pytestmark = pytest.mark.slow  # each test runs the daemon as its own process

REPO = Path(__file__).resolve().parents[1]
GRACE = 30.0
"""Kubernetes' default terminationGracePeriodSeconds: a process still running then is killed."""


def _kubeconfig(path: Path, server: FakeApiServer) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "test"}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
            }
        )
    )
    return path


def _policy(path: Path) -> Path:
    pool = {"name": "web", "target": {"namespace": "apps", "name": "web-placeholder"}}
    path.write_text(yaml.safe_dump({"pools": [{**pool, "maxReplicas": 40, "minReplicas": 2}]}))
    return path


def _wait_for(check, seconds: float) -> bool:
    ends = time.monotonic() + seconds
    while not check():
        if time.monotonic() > ends:
            return False
        time.sleep(0.1)
    return True


def _outage(server: FakeApiServer, state: str) -> None:
    """Put the API server in `state` while the daemon runs (reachable: tests/test_daemon.py)."""
    if state == "down":  # no listener, every open connection broken
        server.stop()
        server.cut_connections()
    elif state == "draining":  # no listener; open keep-alive connections still answered
        server.stop()
    elif state == "failing":  # every request answered 500
        server.fail("*", ".*", 500, times=None)
    elif state == "hanging":  # every request held for a minute
        server.delay("*", ".*", 60.0)


@pytest.mark.parametrize("state", ["down", "draining", "failing", "hanging"])
def test_sigterm_exits_0_within_the_grace_period(tmp_path: Path, state: str) -> None:
    server = FakeApiServer().start()
    try:
        for i in range(3):
            server.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        server.add_deployment("apps", "web-placeholder", 0)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PH_")}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        env.update(
            KUBECONFIG=str(_kubeconfig(tmp_path / "kubeconfig", server)),
            PH_LISTEN_PORT="0",
            PH_LEASE_DURATION="3",
            PH_NAMESPACE="predictive-headroom",
            PH_LOG_FORMAT="text",
            PH_REPORT_DIR=str(tmp_path / "reports"),
            PH_RECONCILE_INTERVAL="2",
        )
        log_path = tmp_path / "daemon.log"
        command = [sys.executable, "-m", "predictive_headroom", "run"]
        with log_path.open("w") as log_file:
            proc = subprocess.Popen(
                [*command, "--config", str(_policy(tmp_path / "policy.yaml"))],
                cwd=REPO,
                env=env,
                stderr=log_file,
            )
        try:
            # Generous: on a busy machine the start alone (imports) can take a minute.
            started = _wait_for(lambda: server.replicas("apps", "web-placeholder") == 2, 180)
            assert started, log_path.read_text()
            _outage(server, state)
            if state != "up":
                # The daemon notices (its caches' watches break, its reads fail) before the signal.
                _wait_for(lambda: " WARNING " in log_path.read_text(), 30)
                time.sleep(2.0)  # a few reconciles and watch retries into the outage
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = proc.wait(timeout=GRACE + 30)
            took = time.monotonic() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        server.stop()
    log = log_path.read_text()
    assert code == 0, log
    assert took < GRACE, log
    assert "received SIGTERM" in log and "stopped" in log
    assert "Fatal Python error" not in log


ABANDONED = """
import logging, socket, sys, threading
from predictive_headroom.commands.run import end_without_abandoned_threads
logging.basicConfig(level=logging.INFO)
quiet, _ = socket.socketpair()
threading.Thread(target=quiet.recv, args=(1,), name="in-a-call", daemon=True).start()
end_without_abandoned_threads(0.5)
print("finalised with a thread in a call")
"""


def test_a_thread_still_in_a_call_at_the_stop_ends_the_process_with_0_unfinalised() -> None:
    """The stop's last step: a daemon thread blocked in a call (a socket read) is not left to wake
    while the interpreter finalises; the process ends at once, exit 0, its log flushed."""
    done = subprocess.run(
        [sys.executable, "-c", ABANDONED],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert "1 abandoned thread(s) still in a call (in-a-call)" in done.stderr
    assert "finalised" not in done.stdout
