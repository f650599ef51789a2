"""The API server restarted under a running daemon: the floor is kept, the daemon reconnects and
goes on reconciling, and nothing is written twice."""

from __future__ import annotations

import time

import kubernetes.client
import pytest
from daemonproc import DaemonProc, write_policy
from install import install, replicas, set_replicas
from kube import wait_for
from test_lease import writes

DOWN = 6.0
"""Seconds the API server is down (less than the renew deadline, 10 s of a 15 s lease)."""


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    installed = install(
        cluster, tmp_path_factory.mktemp("restart"), namespace="restart", release="restart"
    )
    yield installed
    set_replicas(cluster.api(), "restart", installed.placeholder(), 0)


def test_a_restarted_api_server_keeps_the_floor_and_gets_no_second_write(
    cluster, release, tmp_path
) -> None:
    api = cluster.api()
    pool = {
        "name": "general",
        "target": {"kind": "Deployment", "namespace": "restart", "name": release.placeholder()},
        "maxReplicas": 10,
        "minReplicas": 3,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    policy = write_policy(tmp_path / "policy.yaml", [pool])
    daemon = DaemonProc(
        "restart", tmp_path, policy, release.kubeconfig, PH_NAMESPACE="restart",
        PH_LEASE_NAME=release.lease, PH_LEASE_DURATION="15",
    )  # fmt: skip
    try:
        daemon.start()
        wait_for(lambda: replicas(api, "restart", release.placeholder()) == 3, 60, "the floor")
        time.sleep(3)
        assert len(writes(daemon)) == 1, daemon.text()
        # The chart's placeholders start at 0, which /scale answers without spec.replicas.
        assert "no person or controller sets" not in daemon.text(), daemon.text()
        lines_before = len(daemon.text().splitlines())

        cluster.restart_apiserver(down=DOWN)
        restarted = time.time()
        api = cluster.api()
        # Reconciles go on after the restart: the daemon logs no error for a while and the
        # floor is still there.
        time.sleep(8)
        assert daemon.alive(), daemon.text()
        assert replicas(api, "restart", release.placeholder()) == 3
        after = daemon.text().splitlines()[lines_before:]
        assert len(writes(daemon)) == 1, "\n".join(after)
        assert "Traceback" not in daemon.text(), daemon.text()
        events = kubernetes.client.CoreV1Api(api).list_namespaced_event(
            "restart", field_selector="reason=Scaled"
        )
        assert len(events.items) == 1, [e.message for e in events.items]
        # It still acts: a raised floor in the policy is written after the restart.
        write_policy(policy, [{**pool, "minReplicas": 4}])
        wait_for(
            lambda: replicas(api, "restart", release.placeholder()) == 4, 30, "the raised floor"
        )
        assert [t for t in writes(daemon) if t > restarted], daemon.text()
    finally:
        daemon.stop()
