"""Faults an SRE injects before putting the daemon in production, one test (or a few) per row of
the fault table of issue 26: a slow API with two replicas, wall-clock steps, a stuck loop, a
re-created placeholder, a broken policy file, NaN in the newest samples, a hung Prometheus, many
pools over many nodes, a truncated Lease answer, and `run --once` with a failed forecast.

They run against the test API server (`fake_apiserver`), a small local server that accepts
connections and never answers (a hung Prometheus), and fake clocks."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from test_daemon import (
    FAST,
    FORECAST,
    NS,
    BurstForecaster,
    Clock,
    env,  # noqa: F401  (a fixture)
    make_daemon,
    pool_yaml,
    run_once,
    write_config,
)

from predictive_headroom import cli
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.scheduling import Runner
from predictive_headroom.daemon.workers import map_bounded
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.leader import LeaderElector, LeaseTiming
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.pages.burst import burst_view
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.policy.load import load_policy
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import LeaseLost, SourceError
from predictive_headroom.sources.prometheus import PrometheusSource

REPO = Path(__file__).resolve().parents[1]
ELB = Path("/work/shared/datasets/nab_aws_elb_requests_5min.csv")


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        for i in range(4):
            fake.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        yield fake


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def errors(daemon: Daemon, kind: str) -> float:
    value = daemon.metrics.registry.get_sample_value(
        "predictive_headroom_errors_total", {"kind": kind}
    )
    return value or 0.0


# -- 1. a slow API and two replicas: only the leader writes --------------------------------------


def test_an_old_leader_on_a_slow_api_sends_no_write_after_the_new_leader_takes_over(
    tmp_path, server, caplog
) -> None:
    """Replica A's Lease renewals and scale PATCHes are held 6 s; B is healthy. A abandons its
    write when its lease time runs out, B takes over and its value stays."""
    server.add_deployment(NS, "web-placeholder", 0)
    timing = LeaseTiming(lease_duration=3.0, renew_deadline=2.0, retry_period=0.4)
    daemons: dict[str, Daemon] = {}
    electors: dict[str, LeaderElector] = {}
    took_over: dict[str, float] = {}
    for name, wanted in (("a", 5), ("b", 7)):
        config = write_config(tmp_path / f"{name}.yaml", pool_yaml("web", minReplicas=wanted))
        api = server.api_client(agent=name)
        elector = LeaderElector(api, "predictive-headroom", "ph", identity=name, timing=timing)
        daemon = make_daemon(
            config,
            server,
            time.time,
            elector=elector,
            actuator=TargetActuator(api, FAST, fence=elector.write_budget),
            cluster=KubeClusterReader(api, FAST),
        )
        elector.on_started = lambda name=name, d=daemon: (
            took_over.setdefault(name, time.time()),
            d.leadership_changed(True),
        )
        elector.on_stopped = lambda d=daemon: d.leadership_changed(False)
        daemons[name], electors[name] = daemon, elector
    electors["a"].start()
    assert wait_for(lambda: electors["a"].is_leader, 5)
    electors["b"].start()
    from_a: Callable[[object], bool] = lambda r: r.agent == "a"  # noqa: E731
    server.delay("PUT", "/leases/", 6.0, when=from_a)
    server.delay("PATCH", "/scale", 6.0, when=from_a)
    stop = threading.Event()

    def follower_loop() -> None:
        while not stop.is_set():
            daemons["b"].reconcile()
            time.sleep(0.1)

    loop_b = threading.Thread(target=follower_loop)
    loop_b.start()
    try:
        result_a = daemons["a"].reconcile()  # held by the slow API until its lease time is out
        assert wait_for(lambda: "b" in took_over, 8)
        assert wait_for(lambda: server.replicas(NS, "web-placeholder") == 7, 5)
        time.sleep(6.5)  # A's held PATCH reaches the apiserver's store check now (a 409)
    finally:
        stop.set()
        loop_b.join()
        for elector in electors.values():
            elector.stop()
    patches_a = [r for r in server.requests("PATCH", "/scale") if r.agent == "a"]
    assert patches_a, "A never tried to write: the test shows nothing"
    assert all(r.at < took_over["b"] for r in patches_a), (
        [r.at - took_over["b"] for r in patches_a],
        "A sent a write after B took over",
    )
    assert result_a.pools[0].action == "follower" and not result_a.leader
    assert server.replicas(NS, "web-placeholder") == 7  # B's value stayed
    assert not any("by someone else" in r.getMessage() for r in caplog.records)
    assert any(
        "not sent" in r.getMessage() and "leader Lease" in r.getMessage() for r in caplog.records
    )
    assert daemons["a"].metrics.registry.get_sample_value("predictive_headroom_leader") == 0


def test_a_write_is_not_sent_without_lease_time_and_never_waited_on_past_it(
    tmp_path, server
) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=3))
    (pool,) = load_policy(config).pools
    server.add_deployment(NS, "web-placeholder", 0)
    api = server.api_client()
    with pytest.raises(LeaseLost, match="not sent \\(attempt 1\\)"):
        TargetActuator(api, FAST, fence=lambda: 0.0).scale(pool, 3, "min", dry_run=False)
    assert server.writes("/scale") == []
    deadline = time.monotonic() + 0.6  # the lease runs out 0.6 s from now
    server.delay("PATCH", "/scale", 2.0)  # longer than that, shorter than the 2 s call timeout
    began = time.monotonic()
    with pytest.raises(LeaseLost):
        TargetActuator(api, FAST, fence=lambda: deadline - time.monotonic()).scale(
            pool, 3, "min", dry_run=False
        )
    assert time.monotonic() - began < 1.0  # the attempt was cut at the lease's end, not at 2 s
    assert len(server.writes("/scale")) == 1  # and not retried without lease time


# -- 2. the wall clock steps: the loop neither stops nor doubles ---------------------------------


def test_wall_clock_steps_neither_stop_nor_double_the_reconcile_loop(tmp_path, server) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2))
    server.add_deployment(NS, "web-placeholder", 0)
    wall = Clock(time.time())
    daemon = make_daemon(config, server, wall, interval=0.25)
    runner = Runner(daemon, 0.25)
    runner.start()
    counts = []
    try:
        for step in (0.0, -3600.0, +7200.0):
            wall.now += step
            before = runner.reconciles
            time.sleep(1.5)
            counts.append(runner.reconciles - before)
            assert daemon.readiness()[0], daemon.readiness()[1]
        write_config(config, pool_yaml("web", minReplicas=4))  # a config change after the steps
        wall.now -= 90
        assert wait_for(lambda: server.replicas(NS, "web-placeholder") == 4, 3)
    finally:
        runner.stop()
    assert all(4 <= n <= 8 for n in counts), counts  # about 6 in 1.5 s at 0.25 s


def test_readyz_measures_age_on_the_monotonic_clock_and_a_negative_age_is_not_ready(
    tmp_path, server
) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1))
    server.add_deployment(NS, "web-placeholder", 0)
    wall, mono = Clock(), Clock(1000.0)
    daemon = make_daemon(config, server, wall, monotonic=mono, interval=60)
    daemon.reconcile()
    wall.now -= 3600  # the wall clock steps back an hour: nothing changes
    ready, why = daemon.readiness()
    assert ready and "0s ago" in why
    mono.now -= 5  # an age below zero all the same: not ready
    ready, why = daemon.readiness()
    assert not ready and "-5s ago" in why
    mono.now += 5 + 181
    ready, why = daemon.readiness()
    assert not ready and "181s ago (limit 180s)" in why


def test_the_loop_health_names_a_stuck_or_missing_reconcile(tmp_path, server) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1))
    server.add_deployment(NS, "web-placeholder", 0)
    mono = Clock(0.0)
    daemon = make_daemon(config, server, Clock(), monotonic=mono, interval=10)
    assert daemon.health() is None
    mono.now = 31
    assert daemon.health() == "no reconcile started for 31s (limit 30s)"
    daemon.reconcile()
    assert daemon.health() is None


def test_a_replica_whose_reconcile_is_stuck_lets_the_lease_go(tmp_path, server, caplog) -> None:
    """A's reconcile hangs on a slow GET; its loop check fails, it stops renewing, B takes over
    while A is still stuck."""
    server.add_deployment(NS, "web-placeholder", 0)
    timing = LeaseTiming(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2))
    api_a = server.api_client(agent="a")
    a = LeaderElector(api_a, "predictive-headroom", "ph", identity="a", timing=timing)
    daemon_a = make_daemon(
        config,
        server,
        time.time,
        elector=a,
        interval=0.3,
        actuator=TargetActuator(api_a, FAST, fence=a.write_budget),
    )
    a.healthy = daemon_a.health
    b = LeaderElector(server.api_client(agent="b"), "predictive-headroom", "ph", "b", timing)
    a.start()
    assert wait_for(lambda: a.is_leader, 5)
    b.start()
    server.delay("GET", "/deployments/web-placeholder$", 5.0, when=lambda r: r.agent == "a")
    stuck = threading.Thread(target=daemon_a.reconcile)
    stuck.start()
    try:
        assert wait_for(lambda: b.is_leader, 0.9 + timing.lease_duration + 1.5)
        assert stuck.is_alive(), "the reconcile ended before B took over: the test shows nothing"
        assert not a.is_leader
    finally:
        stuck.join()
        a.stop()
        b.stop()
    assert any(
        "is not healthy (a reconcile has been running" in r.getMessage() for r in caplog.records
    )


# -- 3. a placeholder deleted and created again ----------------------------------------------------


def test_a_recreated_placeholder_is_scaled_to_the_plan_not_taken_for_a_manual_change(
    tmp_path, server, caplog
) -> None:
    caplog.set_level(logging.INFO)
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=3))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock())
    assert daemon.reconcile().pools[0].action == "scaled"
    server.delete_deployment(NS, "web-placeholder")
    gone = daemon.reconcile().pools[0]
    assert gone.action == "error" and "not found" in (gone.error or "")
    server.add_deployment(NS, "web-placeholder", 1)  # re-created by its Helm chart, replicas 1
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "scaled", outcome
    assert server.replicas(NS, "web-placeholder") == 3
    assert any("deleted and created again" in r.getMessage() for r in caplog.records)
    assert not any("by someone else" in r.getMessage() for r in caplog.records)


# -- 4. the policy file breaks while running -----------------------------------------------------


def _delete(path: Path) -> str:
    path.unlink()
    return "does not exist"


def _directory(path: Path) -> str:
    path.unlink()
    path.mkdir()
    return "is a directory"


def _dangling(path: Path) -> str:
    path.unlink()
    path.symlink_to(path.parent / "gone" / "policy.yaml")
    return "which does not exist"


def _unreadable(path: Path) -> str:
    path.chmod(0)
    return "permission denied"


def _invalid(path: Path) -> str:
    path.write_text("pools: [{name: web}]\n")
    return "target"


@pytest.mark.parametrize(
    "breaks", [_delete, _directory, _dangling, _unreadable, _invalid], ids=lambda f: f.__name__[1:]
)
def test_a_broken_policy_file_is_said_once_counted_shown_and_the_last_good_config_runs(
    tmp_path, server, caplog, breaks
) -> None:
    if breaks is _unreadable and os.geteuid() == 0:
        pytest.skip("root reads a file with mode 000")
    config = write_config(tmp_path / "policy.yaml", pool_yaml("web", minReplicas=3))
    good = config.read_text()
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock())
    daemon.reconcile()
    cause = breaks(config)
    caplog.clear()
    for _ in range(3):
        result = daemon.reconcile()
        assert result.ok and result.pools[0].plan.desired == 3  # the last good config runs
    said = [r for r in caplog.records if r.levelno >= logging.ERROR and "config" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert str(config) in said[0].getMessage() and cause in said[0].getMessage()
    assert errors(daemon, "config") == 1
    shown = daemon.status()["config"]["rejected_change"]
    assert shown and cause in shown
    assert cause in daemon.readiness()[1]
    if config.is_dir() and not config.is_symlink():
        config.rmdir()
    else:
        config.unlink(missing_ok=True)
    config.write_text(good)  # fixed: back to the config in force
    daemon.reconcile()
    assert daemon.status()["config"]["rejected_change"] is None


# -- 5. NaN and stale values never crash the report or a page --------------------------------------


def test_report_on_data_ending_before_at_writes_the_page(tmp_path, capsys) -> None:
    """The newest sample is 16 min before --at, so the burst model has nothing recent to predict
    from (NaN allowance): the report is written all the same."""
    if not ELB.is_file():
        pytest.skip(f"{ELB} is not here")
    out = tmp_path / "report"
    code = cli.main(
        ["report", "--data", str(ELB), "--at", "2014-04-24T00:55:00Z", "--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    assert (out / "index.html").is_file()


@pytest.mark.prometheus
def test_nan_and_inf_in_the_newest_samples_on_real_prometheus_still_write_the_report(
    env,  # noqa: F811
    server,
    prometheus_server,
    capsys,
    monkeypatch,
) -> None:
    """The last 30 minutes of the series are NaN (0/0) on a real Prometheus: they are dropped, the
    burst model has nothing recent enough for the newest instants, and the report is written."""
    monkeypatch.setenv("PH_PROMETHEUS_URL", prometheus_server.url)
    cut = int(time.time()) - 1800
    query = f'ph_demand{{job="web"}} + (0 * ph_demand{{job="web"}}) / (time() < bool {cut})'
    config = write_config(
        env / "p.yaml",
        pool_yaml("web", minReplicas=1, forecast={**FORECAST, "query": query, "history": "3d"}),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    code, lines = run_once(config, capsys)
    messages = [str(line["message"]) for line in lines]
    assert any("NaN/infinite sample(s)" in m for m in messages), messages
    assert not any("could not write the report" in m for m in messages), messages
    assert (env / "reports" / "latest" / "index.html").is_file()
    assert code == 0


def test_the_burst_chart_leaves_out_points_without_a_finite_value() -> None:
    burst = {
        "pool": "web",
        "quantile": 0.95,
        "lead_seconds": 600.0,
        "model": "quantile",
        "times": [f"2024-01-01T00:{m:02d}:00Z" for m in (0, 5, 10, 15)],
        "demand": [10.0, None, 12.0, float("inf")],
        "allowance": [1.0, 2.0, None, 3.0],
        "importance": [],
    }
    view = burst_view(burst)
    assert view is not None and "NaN" not in str(view) and "inf" not in str(view)
    nothing = {**burst, "allowance": [None] * 4}
    assert burst_view(nothing) is None


# -- 6. a hung Prometheus never delays the floors ------------------------------------------------


class HungServer:
    """Accepts connections and reads the request, then never answers (until stopped)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.stop = threading.Event()
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.recv(65536)
            self.requests += 1
            held.append(conn)
        for conn in held:
            conn.close()

    def __enter__(self) -> HungServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


SPEC = ForecastSpec.model_validate({"query": "up", "demandPerReplica": 1})


def test_a_hung_prometheus_is_a_read_timeout_after_the_attempts_actually_made() -> None:
    settings = Settings(prometheus_timeout=0.5, fresh_read_timeout=0.3, prometheus_retries=3)
    with HungServer() as hung:
        source = PrometheusSource(hung.url, settings, backoff_factor=0.01)
        began = time.monotonic()
        with pytest.raises(SourceError) as fresh:
            source.recent(SPEC, time.time(), 3600)
        assert time.monotonic() - began < 1.0
        assert "did not answer within 0.3s (read timeout, 1 attempt(s))" in str(fresh.value)
        assert "PH_FRESH_READ_TIMEOUT" in str(fresh.value)
        with pytest.raises(SourceError) as history:
            source.history(SPEC, time.time())
        assert "did not answer within 0.5s (read timeout, 1 attempt(s))" in str(history.value)
        assert "connection timed out" not in str(history.value)
        assert hung.requests == 2  # one request each: a read timeout is not retried


def test_a_hung_prometheus_never_delays_the_floors(tmp_path, server) -> None:
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml("web", minReplicas=2, forecast=FORECAST),
        pool_yaml("batch", minReplicas=4),
    )
    for name in ("web", "batch"):
        server.add_deployment(NS, f"{name}-placeholder", 0)
    clock = Clock(time.time())
    daemon = make_daemon(config, server, clock, forecaster=BurstForecaster())
    assert daemon.refit()
    settings = Settings(prometheus_timeout=30, fresh_read_timeout=0.4)
    with HungServer() as hung:
        prometheus = PrometheusSource(hung.url, settings)
        daemon.source = daemon.inputs.source = prometheus  # Prometheus hangs after the refit
        result = daemon.reconcile()
    assert result.seconds < 2.0, result.seconds  # not PH_PROMETHEUS_TIMEOUT (30 s)
    assert server.replicas(NS, "batch-placeholder") == 4
    web = next(o for o in result.pools if o.pool == "web")
    assert server.replicas(NS, "web-placeholder") == web.plan.desired >= 2
    assert "read timeout" in str(web.plan.details.get("burst_fallback"))
    assert errors(daemon, "fresh-read") == 1


# -- 7. many pools over the same nodes -----------------------------------------------------------


def test_nodes_are_listed_once_per_distinct_selector_and_pools_are_served_at_once(
    tmp_path, server
) -> None:
    pools = [
        pool_yaml(
            f"p{i}",
            proportional={
                "linear": {"nodesPerReplica": 1},
                **({"nodeSelector": {"pool": "web"}} if i % 2 else {}),
            },
        )
        for i in range(6)
    ]
    config = write_config(tmp_path / "p.yaml", *pools)
    for i in range(6):
        server.add_deployment(NS, f"p{i}-placeholder", 4)
    daemon = make_daemon(config, server, Clock())
    daemon.reconcile()
    lists = len(server.requests("GET", "/api/v1/nodes"))
    server.delay("GET", "/scale", 0.5)  # every pool's read of its target is slow
    result = daemon.reconcile()
    assert len(server.requests("GET", "/api/v1/nodes")) - lists == 2  # '' and pool=web
    assert result.ok and all(o.action == "unchanged" for o in result.pools), result.summary()
    assert result.seconds < 1.5, result.seconds  # one after another: 6 x 0.5 s


# -- 8. a truncated answer to the Lease GET --------------------------------------------------------


def test_a_truncated_lease_answer_is_one_line_per_occurrence_not_a_traceback(
    server, caplog
) -> None:
    timing = LeaseTiming(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
    elector = LeaderElector(server.api_client(), "predictive-headroom", "ph", "a", timing)
    elector.start()
    try:
        assert wait_for(lambda: elector.is_leader, 5)
        server.truncate("GET", "/leases/ph$", times=None)
        assert wait_for(lambda: not elector.is_leader, timing.renew_deadline + 1)
        time.sleep(0.5)
    finally:
        server.clear_faults()
        elector.stop()
    truncated = len(server.requests("GET", "/leases/ph"))
    lines = [r for r in caplog.records if r.name == "predictive_headroom.kube.leader"]
    assert not any(r.exc_info for r in lines), "a traceback was logged"
    unreadable = [r for r in lines if "could not be read" in r.getMessage()]
    assert 3 <= len(unreadable) <= truncated
    assert all("could not read Lease predictive-headroom/ph" in r.getMessage() for r in unreadable)


# -- 9. run --once says when a forecast failed ---------------------------------------------------


def test_run_once_exits_1_when_a_forecast_failed_even_though_the_floors_were_written(
    env,  # noqa: F811
    server,
    capsys,
    monkeypatch,
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("PH_PROMETHEUS_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("PH_PROMETHEUS_RETRIES", "0")
    config = write_config(env / "p.yaml", pool_yaml("web", minReplicas=2, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 0)
    code, lines = run_once(config, capsys)
    assert code == 1
    assert server.replicas(NS, "web-placeholder") == 2  # the floor does not depend on Prometheus
    assert any("forecast failed for pool(s): web" in str(line["message"]) for line in lines)


def test_run_once_exits_0_when_every_pool_is_served(env, server, capsys) -> None:  # noqa: F811
    config = write_config(env / "p.yaml", pool_yaml("web", minReplicas=2))
    server.add_deployment(NS, "web-placeholder", 0)
    code, _ = run_once(config, capsys)
    assert code == 0 and server.replicas(NS, "web-placeholder") == 2


def test_pools_are_served_at_most_workers_at_a_time_in_their_order() -> None:
    running, most, lock = 0, 0, threading.Lock()

    def serve(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return n * n

    assert map_bounded(serve, list(range(10)), 3, "test") == [n * n for n in range(10)]
    assert most == 3
    assert map_bounded(serve, [], 3, "test") == []
