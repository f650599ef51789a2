"""Two daemons, one Lease (the real coordination.k8s.io API): one writer; SIGKILL the leader and
the other writes within the lease duration; a leader frozen past its lease (SIGSTOP) writes
nothing once it runs again."""

from __future__ import annotations

import os
import re
import signal
import time
from datetime import UTC, datetime

import pytest
from daemonproc import DaemonProc, write_policy
from install import install, replicas, set_replicas
from kube import wait_for

LEASE = 6.0
"""PH_LEASE_DURATION of both daemons (renew deadline 4 s, retry every 0.8 s)."""
WRITE = re.compile(r"^(\S+ \S+) INFO \S+: pool general: Deployment \S+ replicas (\d+) -> (\d+)")


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    return install(cluster, tmp_path_factory.mktemp("lease"), namespace="lease", release="lease")


def writes(daemon: DaemonProc) -> list[float]:
    """Epoch seconds of each scale write the daemon logged."""
    out = []
    for line in daemon.text().splitlines():
        m = WRITE.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            out.append(at.timestamp())
    return out


def knock_down(api, release, until: float, every: float = 1.0) -> None:
    """Set the placeholders to 0 every `every` s until `until`: the leader puts them back."""
    while time.time() < until:
        set_replicas(api, release.namespace, release.placeholder(), 0)
        time.sleep(every)


def test_one_writer_then_the_standby_takes_over_and_a_frozen_leader_stays_silent(
    cluster, release, tmp_path
) -> None:
    api = cluster.api()
    pool = {
        "name": "general",
        "target": {"kind": "Deployment", "namespace": "lease", "name": release.placeholder()},
        "maxReplicas": 10,
        "minReplicas": 2,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    policy = write_policy(tmp_path / "policy.yaml", [pool])
    env = {"PH_NAMESPACE": "lease", "PH_LEASE_NAME": "lease", "PH_LEASE_DURATION": str(LEASE)}
    daemons = [DaemonProc(n, tmp_path, policy, release.kubeconfig, **env) for n in ("a", "b", "c")]
    a, b, c = daemons
    try:
        a.start()
        b.start()
        wait_for(lambda: replicas(api, "lease", release.placeholder()) == 2, 60, "a first write")
        knock_down(api, release, time.time() + 8)
        wait_for(lambda: replicas(api, "lease", release.placeholder()) == 2, 10, "a restore")
        wrote = [d for d in (a, b) if writes(d)]
        assert len(wrote) == 1, f"writers: {[d.name for d in wrote]}\n{a.text()}\n{b.text()}"
        leader, standby = wrote[0], b if wrote[0] is a else a

        leader.kill()
        killed = time.time()
        knock_down(api, release, killed + LEASE + 6)
        taken = [t for t in writes(standby) if t > killed]
        assert taken, standby.text()
        took_over = taken[0] - killed
        assert took_over < LEASE + 3.0, f"the standby first wrote {took_over:.1f}s after the kill"
        print(f"standby's first write {took_over:.2f}s after SIGKILL (lease {LEASE:g}s)")

        # The standby now leads; a new standby joins, then the leader is frozen past its lease.
        c.start()
        time.sleep(3)
        assert standby.popen is not None
        os.kill(standby.popen.pid, signal.SIGSTOP)
        frozen = time.time()
        try:
            knock_down(api, release, frozen + LEASE + 6)
        finally:
            os.kill(standby.popen.pid, signal.SIGCONT)
        resumed = time.time()
        assert [t for t in writes(c) if t > frozen], c.text()
        knock_down(api, release, resumed + 6)
        late = [t for t in writes(standby) if t > frozen]
        assert not late, f"the frozen leader wrote after it lost the Lease:\n{standby.text()}"
    finally:
        for daemon in daemons:
            daemon.stop()
