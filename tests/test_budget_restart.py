"""Issue 64 item 3: a day's spend that survives restarts. Kept in memory only, every restart
counted the day again from zero: budget 3 node-hours a day, a plan wanting 10, hourly restarts
spent 2.83-3.50x the budget. Now the leader keeps the day's spend on its Lease
(`daemon.spend`), and the next leader counts the day from it: within 1.05x whatever the restarts
(clean ones, which release the Lease, and crashes, which leave it to expire). Against the API
stand-in, with the real `LeaderElector`, on a clock that runs a day of 5-minute reconciles."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import kubernetes.client
import pytest
from fake_apiserver import FakeApiServer
from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config
from test_disruption import NoForecaster
from test_faults import wait_for

from predictive_headroom.core.budget import day_of
from predictive_headroom.daemon.components import DaemonContext
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.spend import ANNOTATION, Spent, decode, encode
from predictive_headroom.kube.leader import LeaderElector, LeaseTiming
from predictive_headroom.policy.load import parse_policy

DAY = 86400.0
DAY0 = datetime(2026, 11, 28, tzinfo=UTC).timestamp()
STEP = 300.0
"""Seconds of the simulated clock between reconciles."""
BUDGET = 3.0
TIMING = LeaseTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
TARGET = "web-placeholder"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, TARGET, 0)
        yield fake


def _budget_status(daemon: Daemon) -> dict[str, object]:
    return daemon.status()["budget"]["web"]


def _slots(daemon: Daemon) -> int:
    watch = daemon.components["budget"]
    return watch.context.price(daemon.policy.pools[0]).slots  # type: ignore[attr-defined]


def _lease_record(server: FakeApiServer) -> dict[str, Spent]:
    """The record on the Lease now ({} when there is none or it cannot be read)."""
    lease = server.lease("predictive-headroom", "ph") or {}
    text = (lease.get("metadata", {}).get("annotations") or {}).get(ANNOTATION)
    try:
        return decode(text) if text else {}
    except ValueError:
        return {}


def _carried_at(server: FakeApiServer) -> float | None:
    """The instant of the web pool's record on the Lease (None: none)."""
    found = _lease_record(server).get("web")
    return None if found is None else found.at


def run_day(tmp_path: Path, server: FakeApiServer, restart_every: float, crash: bool) -> float:
    """Node-hours the pool's placeholders held over one simulated UTC day, a reconcile every
    5 minutes, the daemon restarted (a new replica: new elector, new daemon) every
    `restart_every` simulated seconds, by a clean stop or a crash."""
    config = write_config(
        tmp_path / "p.yaml", pool_yaml("web", minReplicas=10, budget={"nodeHoursPerDay": BUDGET})
    )
    clock, held, replica = Clock(DAY0), 0.0, 0
    while clock.now < DAY0 + DAY:
        replica += 1
        api = server.api_client(agent=f"replica-{replica}")
        elector = LeaderElector(api, "predictive-headroom", "ph", f"replica-{replica}", TIMING)
        daemon = make_daemon(
            config, server, clock, source=None, forecaster=NoForecaster(), elector=elector
        )
        elector.start()
        try:
            assert wait_for(lambda e=elector: e.is_leader, 20), "the new replica never led"
            ends = min(clock.now + restart_every, DAY0 + DAY)
            while clock.now < ends:
                daemon.reconcile()
                held += server.replicas(NS, TARGET) * STEP / 3600 / _slots(daemon)
                clock.now += STEP
            if crash:  # killed between two renewals: the last one carried the record
                last = clock.now - STEP
                assert wait_for(lambda last=last: _carried_at(server) == last, 10)
        finally:
            elector.stop(release=not crash)
    return held


@pytest.mark.parametrize("crash", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_hourly_restarts_stay_within_the_days_budget(tmp_path, server, crash) -> None:
    """24 replicas, one an hour; without the record 2.83x the budget (1.67x restarting every
    8 hours), with it 1.00x (figures in docs/budget.md)."""
    held = run_day(tmp_path, server, 3600.0, crash)
    assert held <= 1.05 * BUDGET, f"{held / BUDGET:.2f}x the budget with hourly restarts"
    assert held >= 0.8 * BUDGET  # the budget is spent, not starved


def test_a_record_that_cannot_be_read_is_said_and_the_day_counted_from_the_restart(
    tmp_path, server, caplog
) -> None:
    config = write_config(
        tmp_path / "p.yaml", pool_yaml("web", minReplicas=10, budget={"nodeHoursPerDay": BUDGET})
    )
    api = server.api_client()
    elector = LeaderElector(api, "predictive-headroom", "ph", "one", TIMING)
    elector.start()
    try:
        assert wait_for(lambda: elector.is_leader, 20)
        elector.carry(ANNOTATION, "{not json")
        assert wait_for(
            lambda: "{not json" in json.dumps(server.lease("predictive-headroom", "ph")), 10
        )
    finally:
        elector.stop()
    elector = LeaderElector(api, "predictive-headroom", "ph", "two", TIMING)
    daemon = make_daemon(
        config,
        server,
        Clock(DAY0 + 12 * 3600),
        source=None,
        forecaster=NoForecaster(),
        elector=elector,
    )
    elector.start()
    try:
        assert wait_for(lambda: elector.is_leader, 20)
        with caplog.at_level(logging.WARNING):
            daemon.reconcile()
        status = _budget_status(daemon)
        problem = status["record"]["problem"]  # type: ignore[index]
        assert "is not JSON" in problem and "counted from this restart" in problem
        assert any(ANNOTATION in r.getMessage() for r in caplog.records)
        assert status["budget_spent_node_hours"] == 0.0
        # the record is written again, readable, at the next renewal
        assert wait_for(lambda: "web" in _lease_record(server), 10)
    finally:
        elector.stop()


def test_the_context_resumes_a_record_and_counts_the_gap_at_the_count_held() -> None:
    policy = parse_policy(
        "pools:\n  - name: web\n    target: {namespace: ns, name: web-placeholder}\n"
        "    maxReplicas: 40\n    budget: {nodeHoursPerDay: 3}\n",
        "t.yaml",
    )
    pool = policy.pools[0]
    noon = DAY0 + 12 * 3600
    context = DaemonContext(lambda: None)
    context.resume({"web": Spent(DAY0, noon, 4 * 3600.0, 2)})  # 4 placeholder-hours by noon
    slots = context.price(pool).slots
    # Nothing planned yet: the 2 held at noon are counted on until now (13:00)
    assert context.instant(noon + 3600).held(pool, DAY0) == pytest.approx(6 / slots)
    context.planned(pool, noon + 3600, 1)
    assert context.instant(noon + 7200).held(pool, DAY0) == pytest.approx(7 / slots)
    # The next day counts from its own midnight: the count held through it, not the record
    tomorrow = day_of(DAY0 + DAY + 60, "UTC").start
    assert context.instant(tomorrow + 3600).held(pool, tomorrow) == pytest.approx(1 / slots)
    (spent,) = context.spent().values()
    assert (spent.day, spent.at, spent.replicas) == (DAY0, noon + 3600, 1)
    assert spent.seconds == pytest.approx(6 * 3600)
    assert decode(encode(context.spent())) == context.spent()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1]", "not a JSON object"),
        ('{"web": {"day": 0, "at": 1}}', "needs numbers day, at, seconds and replicas"),
        ('{"web": {"day": 0, "at": 1, "seconds": -5, "replicas": 1}}', "impossible values"),
        ('{"web": {"day": 0, "at": 1, "seconds": NaN, "replicas": 1}}', "needs numbers"),
    ],
)
def test_an_unreadable_record_names_what_is_wrong(text, says) -> None:
    with pytest.raises(ValueError, match=says):
        decode(text)


def test_the_lease_keeps_others_annotations_and_a_takeover_keeps_the_record(server) -> None:
    """The record rides on the renewals; a follower taking over writes the Lease with the record
    it found (not its own), and annotations someone else set survive every write."""
    api = server.api_client()
    first = LeaderElector(api, "predictive-headroom", "ph", "one", TIMING)
    first.start()
    try:
        assert wait_for(lambda: first.is_leader, 20)
        leases = kubernetes.client.CoordinationV1Api(api)  # a person annotates the Lease
        lease = leases.read_namespaced_lease("ph", "predictive-headroom")
        lease.metadata.annotations = {**(lease.metadata.annotations or {}), "team": "platform"}
        leases.replace_namespaced_lease("ph", "predictive-headroom", lease)
        first.carry(ANNOTATION, encode({"web": Spent(DAY0, DAY0 + 60, 60.0, 1)}))
        assert wait_for(lambda: _carried_at(server) == DAY0 + 60, 10)
    finally:
        first.stop(release=False)  # a crash: the Lease is left to expire
    second = LeaderElector(api, "predictive-headroom", "ph", "two", TIMING)
    second.carry(ANNOTATION, "{}")  # not leading: ignored
    second.start()
    try:
        assert wait_for(lambda: second.is_leader, 20)
        annotations = server.lease("predictive-headroom", "ph")["metadata"]["annotations"]
        assert annotations["team"] == "platform" and _carried_at(server) == DAY0 + 60
        assert decode(second.annotation(ANNOTATION) or "") == _lease_record(server)
    finally:
        second.stop()
