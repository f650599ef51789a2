"""Two daemons, one Lease (the real coordination.k8s.io API): one writer; SIGKILL the leader and
the other writes within the lease duration; a leader frozen past its lease (SIGSTOP) writes
nothing once it runs again. Writes are caused by changing the policy file both daemons read (a
person's change of the replicas would be left alone: manual-override)."""

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
WRITE = re.compile(r"^(\S+ \S+) INFO \S+: pool general: \S+ replicas (.+) -> (\d+) \(")


@pytest.fixture(scope="module")
def release(cluster, tmp_path_factory):
    installed = install(
        cluster, tmp_path_factory.mktemp("lease"), namespace="lease", release="lease"
    )
    yield installed
    set_replicas(cluster.api(), "lease", installed.placeholder(), 0)


def writes(daemon: DaemonProc) -> list[float]:
    """Epoch seconds of each scale write the daemon logged."""
    out = []
    for line in daemon.text().splitlines():
        m = WRITE.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            out.append(at.timestamp())
    return out


def toggle(policy, pool: dict, until: float, every: float = 1.5) -> None:
    """Raise the pool's minReplicas by one every `every` s until `until`: each raise is a write
    for whichever daemon leads (the policy file is re-read when it changes; a lowered floor
    would be held by the scale-down stabilization)."""
    while time.time() < until:
        pool["minReplicas"] += 1
        write_policy(policy, [pool])
        time.sleep(every)


def test_one_writer_then_the_standby_takes_over_and_a_frozen_leader_stays_silent(
    cluster, release, tmp_path
) -> None:
    api = cluster.api()
    pool = {
        "name": "general",
        "target": {"kind": "Deployment", "namespace": "lease", "name": release.placeholder()},
        "maxReplicas": 100,
        "minReplicas": 2,
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    policy = write_policy(tmp_path / "policy.yaml", [pool])
    env = {"PH_NAMESPACE": "lease", "PH_LEASE_NAME": release.lease, "PH_LEASE_DURATION": str(LEASE)}
    daemons = [DaemonProc(n, tmp_path, policy, release.kubeconfig, **env) for n in ("a", "b", "c")]
    a, b, c = daemons
    try:
        a.start()
        b.start()
        wait_for(lambda: replicas(api, "lease", release.placeholder()) == 2, 60, "a first write")
        toggle(policy, pool, time.time() + 8)
        wait_for(
            lambda: replicas(api, "lease", release.placeholder()) == pool["minReplicas"],
            10,
            "the last change written",
        )
        wrote = [d for d in (a, b) if writes(d)]
        assert len(wrote) == 1, f"writers: {[d.name for d in wrote]}\n{a.text()}\n{b.text()}"
        leader, standby = wrote[0], b if wrote[0] is a else a

        leader.kill()
        killed = time.time()
        toggle(policy, pool, killed + LEASE + 6)
        taken = [t for t in writes(standby) if t > killed]
        assert taken, standby.text()
        took_over = taken[0] - killed
        assert took_over < LEASE + 3.0, f"the standby first wrote {took_over:.1f}s after the kill"
        print(f"standby's first write {took_over:.2f}s after SIGKILL (lease {LEASE:g}s)")

        # The standby now leads; a new standby joins, then the leader is frozen past its lease.
        c.start()
        # c must be campaigning (its first reconcile) before the leader freezes: a candidate
        # takes a Lease only after watching it unrenewed for a lease duration itself, and the
        # interpreter's start takes seconds on a loaded machine.
        wait_for(lambda: "reconcile (follower" in c.text(), 60, "the new standby running")
        assert standby.popen is not None
        os.kill(standby.popen.pid, signal.SIGSTOP)
        frozen = time.time()
        try:
            toggle(policy, pool, frozen + LEASE + 6)
        finally:
            os.kill(standby.popen.pid, signal.SIGCONT)
        resumed = time.time()
        assert [t for t in writes(c) if t > frozen], c.text()
        toggle(policy, pool, resumed + 6)
        late = [t for t in writes(standby) if t > frozen]
        assert not late, f"the frozen leader wrote after it lost the Lease:\n{standby.text()}"
    finally:
        for daemon in daemons:
            daemon.stop()
