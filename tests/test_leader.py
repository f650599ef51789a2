"""Leader election on a Lease: electors with the real `kubernetes` client against the fake
apiserver, with short timings (lease 1 s, renew deadline 0.6 s, retry 0.1 s)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fake_apiserver import FakeApiServer

from predictive_headroom.kube.leader import LeaderElector, LeaseTiming
from predictive_headroom.policy.settings import Settings

NS = "predictive-headroom"
LEASE = "predictive-headroom"
TIMING = LeaseTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
LEASE_PATH = rf"/leases/{LEASE}$"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


class Watch:
    """Samples every elector's `is_leader` in a thread and remembers any moment with two leaders."""

    def __init__(self, electors: list[LeaderElector]) -> None:
        self.electors = electors
        self.overlaps = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if sum(e.is_leader for e in self.electors) > 1:
                self.overlaps += 1
            self.samples += 1
            time.sleep(0.005)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_for(condition: Callable[[], bool], timeout: float) -> float:
    """Poll until `condition` holds; return the seconds it took (fail after `timeout`)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not reached in time"
        time.sleep(0.01)
    return time.monotonic() - started


def electors(server: FakeApiServer, n: int = 2, **kwargs: object) -> list[LeaderElector]:
    return [
        LeaderElector(
            server.api_client(), NS, LEASE, identity=f"daemon-{i}", timing=TIMING, **kwargs
        )  # type: ignore[arg-type]
        for i in range(n)
    ]


def leaders(candidates: list[LeaderElector]) -> list[LeaderElector]:
    return [e for e in candidates if e.is_leader]


@pytest.mark.slow
def test_two_electors_exactly_one_leads_and_it_holds_the_lease(server: FakeApiServer) -> None:
    candidates = electors(server)
    with Watch(candidates) as watch:
        for e in candidates:
            e.start()
        wait_for(lambda: len(leaders(candidates)) == 1, timeout=3)
        time.sleep(1.5 * TIMING.lease_duration)  # several renewals and follower retries
        [leader] = leaders(candidates)
        lease = server.lease(NS, LEASE)
    for e in candidates:
        e.stop()

    assert watch.overlaps == 0 and watch.samples > 50
    assert lease["spec"]["holderIdentity"] == leader.identity
    assert lease["spec"]["leaseDurationSeconds"] == 1
    assert len(server.requests("PUT", LEASE)) >= 5  # the leader kept renewing


def test_follower_takes_over_quickly_when_the_leader_stops(server: FakeApiServer) -> None:
    candidates = electors(server)
    with Watch(candidates) as watch:
        for e in candidates:
            e.start()
        wait_for(lambda: len(leaders(candidates)) == 1, timeout=3)
        [old] = leaders(candidates)
        [new] = [e for e in candidates if e is not old]

        old.stop()
        assert not old.is_leader
        handover = wait_for(lambda: new.is_leader, timeout=TIMING.lease_duration)
        new.stop()

    assert watch.overlaps == 0
    assert handover < TIMING.lease_duration
    assert server.lease(NS, LEASE)["spec"].get("holderIdentity") is None  # released on stop


@pytest.mark.slow
def test_follower_takes_over_after_the_lease_expires_when_the_leader_vanishes(
    server: FakeApiServer,
) -> None:
    candidates = electors(server)
    with Watch(candidates) as watch:
        for e in candidates:
            e.start()
        wait_for(lambda: len(leaders(candidates)) == 1, timeout=3)
        [old] = leaders(candidates)
        [new] = [e for e in candidates if e is not old]

        old.stop(release=False)  # a crashed pod: the Lease is left as it was
        handover = wait_for(lambda: new.is_leader, timeout=TIMING.lease_duration + 1.0)
        new.stop()

    assert watch.overlaps == 0
    assert handover >= TIMING.lease_duration * 0.7  # it waited for the lease to expire
    lease = server.lease(NS, LEASE)
    assert lease["spec"]["leaseTransitions"] == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    [
        lambda s: s.fail("PUT", LEASE_PATH, 500, times=None),
        lambda s: s.fail("*", LEASE_PATH, 503, times=None),
        lambda s: s.delay("PUT", LEASE_PATH, 1.0),  # answers slower than the request timeout
    ],
    ids=["renew-500", "all-503", "slow-renew"],
)
def test_a_leader_that_cannot_renew_steps_down_within_the_renew_deadline(
    server: FakeApiServer, fault: Callable[[FakeApiServer], None]
) -> None:
    stopped = threading.Event()
    [elector] = electors(server, 1, on_stopped_leading=stopped.set)
    elector.start()
    assert elector.wait_until_leader(timeout=3)

    fault(server)
    lost = wait_for(lambda: not elector.is_leader, timeout=TIMING.renew_deadline + 0.5)
    assert stopped.wait(timeout=1.0), "on_stopped_leading was not called"

    server.clear_faults()
    again = elector.wait_until_leader(timeout=TIMING.lease_duration + 2.0)
    elector.stop()

    assert lost <= TIMING.renew_deadline + 0.2
    assert again  # leads again once the Lease API answers


@pytest.mark.slow
def test_a_leader_with_failing_renewals_never_overlaps_a_follower_that_can_write(
    server: FakeApiServer,
) -> None:
    candidates = electors(server)
    with Watch(candidates) as watch:
        for e in candidates:
            e.start()
        wait_for(lambda: len(leaders(candidates)) == 1, timeout=3)
        [old] = leaders(candidates)
        # Only the leader's renewals fail (say its node lost the API server); the follower is fine.
        server.fail(
            "PUT",
            LEASE_PATH,
            500,
            times=None,
            when=lambda request: request.body["spec"].get("holderIdentity") == old.identity,
        )
        wait_for(lambda: not old.is_leader, timeout=TIMING.renew_deadline + 0.5)
        wait_for(lambda: len(leaders(candidates)) == 1, timeout=TIMING.lease_duration + 2.0)
        for e in candidates:
            e.stop()

    assert watch.overlaps == 0


def test_callbacks_report_start_and_stop_of_leading(server: FakeApiServer) -> None:
    seen: list[str] = []
    [elector] = electors(
        server,
        1,
        on_started_leading=lambda: seen.append("started"),
        on_stopped_leading=lambda: seen.append("stopped"),
    )
    elector.start()
    assert elector.wait_until_leader(timeout=3)
    elector.stop()

    assert seen == ["started", "stopped"]
    assert not elector.is_leader


@pytest.mark.slow
def test_an_existing_lease_of_another_holder_is_respected_until_it_expires(
    server: FakeApiServer,
) -> None:
    [other] = electors(server, 1)
    other.start()
    assert other.wait_until_leader(timeout=3)
    other.stop(release=False)

    [late] = electors(server, 1)
    late.identity = "daemon-late"
    started = time.monotonic()
    late.start()
    assert late.wait_until_leader(timeout=3)
    waited = time.monotonic() - started
    late.stop()

    assert waited >= TIMING.lease_duration * 0.7


def test_timing_defaults_follow_client_go_and_are_validated() -> None:
    assert LeaseTiming.from_settings(Settings()) == LeaseTiming(15.0, 10.0, 2.0)
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaseTiming(lease_duration=5, renew_deadline=6, retry_period=1)
