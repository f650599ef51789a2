"""Faults an SRE injects before putting the daemon in production, one test (or a few) per row of
the fault table of issue 26: a slow API with two replicas, wall-clock steps, a stuck loop, a
re-created placeholder, a broken policy file, NaN in the newest samples, a hung Prometheus, many
pools over many nodes, a truncated Lease answer, and `run --once` with a failed forecast.

They run against the test API server (`fake_apiserver`), a small local server that accepts
connections and never answers (a hung Prometheus), and fake clocks."""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from fake_apiserver import FakeApiServer
from test_daemon import (
    FAST,
    FORECAST,
    NS,
    BurstForecaster,
    Clock,
    FakeSource,
    env,  # noqa: F401  (a fixture)
    make_daemon,
    pool_yaml,
    run_once,
    write_config,
)
from testdata import series_path

from predictive_headroom import cli
from predictive_headroom.commands.run import report_writer
from predictive_headroom.core.series import MAX_SAMPLE
from predictive_headroom.daemon import configfile
from predictive_headroom.daemon.httpserver import HttpServer
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.refit_retry import backoff
from predictive_headroom.daemon.scheduling import Runner
from predictive_headroom.daemon.workers import map_bounded
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.errors import Throttled
from predictive_headroom.kube.leader import LeaderElector, LeaseTiming
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.pages.burst import burst_view
from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.load import load_policy
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import LeaseLost, SourceError
from predictive_headroom.sources.prometheus import PrometheusSource

REPO = Path(__file__).resolve().parents[1]
ELB = series_path("nab_aws_elb_requests_5min")


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    patient = replace(FAST, timeout=20.0)
    server.delay("PATCH", "/scale", 30.0)  # longer than that, and than the 20 s call timeout
    began = time.monotonic()
    with pytest.raises(LeaseLost):
        TargetActuator(api, patient, fence=lambda: deadline - time.monotonic()).scale(
            pool, 3, "min", dry_run=False
        )
    # the attempt was cut at the lease's end (0.6 s; room for a busy machine), not at 20 s
    assert time.monotonic() - began < 10.0
    assert len(server.writes("/scale")) == 1  # and not retried without lease time


# -- 2. the wall clock steps: the loop neither stops nor doubles ---------------------------------


@pytest.mark.slow
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
        assert wait_for(lambda: server.replicas(NS, "web-placeholder") == 4, 30)
    finally:
        runner.stop()
    # about 6 in 1.5 s at 0.25 s: never none (stopped), never past 8 (doubled); a busy machine's
    # slower reconciles make fewer
    assert all(1 <= n <= 8 for n in counts), counts


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_report_on_data_ending_before_at_writes_the_page(tmp_path, capsys) -> None:
    """The newest sample is 16 min before --at, so the burst model has nothing recent to predict
    from (NaN allowance): the report is written all the same."""
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


@pytest.mark.slow
def test_a_hung_prometheus_is_a_read_timeout_after_the_attempts_actually_made() -> None:
    settings = Settings(prometheus_timeout=0.5, fresh_read_timeout=0.3, prometheus_retries=3)
    with HungServer() as hung:
        source = PrometheusSource(hung.url, settings, backoff_factor=0.01)
        with pytest.raises(SourceError) as fresh:
            source.recent(SPEC, time.time(), 3600)
        # one 0.3 s attempt, not 4 of 0.5 s (the server counts a request once it has read it)
        assert wait_for(lambda: hung.requests >= 1, 10.0) and hung.requests == 1
        assert "did not answer within 0.3s (read timeout, 1 attempt(s))" in str(fresh.value)
        assert "PH_FRESH_READ_TIMEOUT" in str(fresh.value)
        with pytest.raises(SourceError) as history:
            source.history(SPEC, time.time())
        assert "did not answer within 0.5s (read timeout, 1 attempt(s))" in str(history.value)
        assert "connection timed out" not in str(history.value)
        assert wait_for(lambda: hung.requests >= 2, 10.0)
        assert hung.requests == 2  # one request each: a read timeout is not retried


@pytest.mark.slow
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
    # not PH_PROMETHEUS_TIMEOUT (30 s): the fresh read's 0.4 s, with room for a busy machine
    assert result.seconds < 15.0, result.seconds
    assert server.replicas(NS, "batch-placeholder") == 4
    web = next(o for o in result.pools if o.pool == "web")
    assert server.replicas(NS, "web-placeholder") == web.plan.desired >= 2
    assert "read timeout" in str(web.plan.details.get("burst_fallback"))
    assert errors(daemon, "fresh-read") == 1


# -- 7. many pools over the same nodes -----------------------------------------------------------


@pytest.mark.slow
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
    patient = TargetActuator(server.api_client(), replace(FAST, timeout=20.0))
    daemon = make_daemon(config, server, Clock(), actuator=patient)
    daemon.reconcile()
    lists = len(server.requests("GET", "/api/v1/nodes"))
    server.delay("GET", "/scale", 4.0)  # every pool's read of its target is slow (timeout: 20 s)
    result = daemon.reconcile()
    assert len(server.requests("GET", "/api/v1/nodes")) - lists == 2  # '' and pool=web
    assert result.ok and all(o.action == "unchanged" for o in result.pools), result.summary()
    # served at once: about one delay (room for a busy machine), where one pool after another
    # would take 6 x 4 s
    assert result.seconds < 16.0, result.seconds


# -- 8. a truncated answer to the Lease GET --------------------------------------------------------


@pytest.mark.slow
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


# == issue 29: hostile input and slow dependencies ==============================================

# -- 8. a hostile policy file: bounded parsing, the last good config runs --------------------------


def _nested(path: Path) -> str:
    path.write_text(path.read_text() + "extra: " + "[" * 3000 + "]" * 3000 + "\n")
    return "nested more than 32 levels"


def _aliases(path: Path) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 8):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
    return "aliases"


def _fifty_megabytes(path: Path) -> str:
    with path.open("a") as f:
        f.write(("# " + "x" * 1022 + "\n") * 50 * 1024)
    return "1 MiB"


def _duplicate_key(path: Path) -> str:
    text = path.read_text()
    assert "  minReplicas: 3\n" in text
    path.write_text(text.replace("  minReplicas: 3\n", "  minReplicas: 3\n  minReplicas: 9\n"))
    line = text.splitlines().index("  minReplicas: 3") + 2
    return f"line {line}: pools[0]: key 'minReplicas' appears twice"


@pytest.mark.slow
@pytest.mark.parametrize(
    "hostile",
    [_nested, _aliases, _fifty_megabytes, _duplicate_key],
    ids=lambda f: f.__name__[1:],
)
def test_a_hostile_policy_file_is_refused_within_bounds_once_and_the_last_good_config_runs(
    tmp_path, server, caplog, monkeypatch, hostile
) -> None:
    config = write_config(tmp_path / "policy.yaml", pool_yaml("web", minReplicas=3))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock())
    daemon.reconcile()
    parses = []
    real_parse = configfile.parse_policy
    monkeypatch.setattr(configfile, "parse_policy", lambda *a: parses.append(1) or real_parse(*a))
    cause = hostile(config)
    caplog.clear()
    began = time.monotonic()
    for _ in range(3):
        result = daemon.reconcile()
        assert result.ok and result.pools[0].plan.desired == 3  # the last good config runs
    assert time.monotonic() - began < 5.0  # not the 26 s of an expanded alias bomb
    said = [r for r in caplog.records if r.levelno >= logging.ERROR and "config" in r.getMessage()]
    assert len(said) == 1 and cause in said[0].getMessage(), [r.getMessage() for r in said]
    assert errors(daemon, "config") == 1
    assert cause in daemon.readiness()[1]
    assert cause in daemon.status()["config"]["rejected_change"]
    assert len(parses) <= 1  # a rejected file is remembered, not parsed at every reconcile
    assert server.replicas(NS, "web-placeholder") == 3


def test_a_shared_value_written_as_an_anchor_and_aliases_is_accepted(tmp_path) -> None:
    window = {"name": "batch", "start": "0 2 * * *", "end": "0 4 * * *", "desiredReplicas": 2}
    pools = [pool_yaml(n, schedules=[window]) for n in ("a", "b", "c")]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.dump({"pools": pools}))  # yaml.dump writes &id001 / *id001
    assert "*id001" in path.read_text()
    assert [p.name for p in load_policy(path).pools] == ["a", "b", "c"]


def test_any_exception_while_loading_keeps_the_last_good_config(
    tmp_path, server, caplog, monkeypatch
) -> None:
    config = write_config(tmp_path / "policy.yaml", pool_yaml("web", minReplicas=3))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock())
    daemon.reconcile()

    def explode(*_a: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(configfile, "parse_policy", explode)
    write_config(config, pool_yaml("web", minReplicas=5))
    for _ in range(2):
        assert daemon.reconcile().pools[0].plan.desired == 3
    assert errors(daemon, "config") == 1
    assert "RecursionError" in daemon.readiness()[1]


def test_the_validate_command_names_the_repeated_key_and_its_line(tmp_path, capsys) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "pools:\n- name: web\n  target: {namespace: a, name: b}\n  maxReplicas: 4\n"
        "  maxReplicas: 40\n"
    )
    assert cli.main(["validate", str(path)]) != 0
    err = capsys.readouterr()
    assert "line 5" in err.err + err.out and "'maxReplicas' appears twice" in err.err + err.out


# -- 9. a trickling, huge or point-flooding Prometheus -------------------------------------------


class BadPrometheus:
    """A Prometheus stand-in on http.server: `mode` is trickle (1 byte per 0.1 s), slow (the
    whole answer after 0.3 s), huge (`size` bytes at once) or points (`points` samples)."""

    def __init__(self, mode: str, size: int = 0, points: int = 0) -> None:
        self.mode, self.size, self.points = mode, size, points
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                body = outer.body()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if outer.mode == "slow":
                        time.sleep(0.3)
                    if outer.mode != "trickle":
                        self.wfile.write(body)
                        return
                    for i in range(len(body)):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True

    def body(self) -> bytes:
        now = time.time()
        n = self.points or 3
        values = [[now - 60 * i, "1"] for i in range(n)][::-1]
        answer = {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
        }
        text = json.dumps(answer).encode()
        if self.mode == "huge":
            text = text[:-2] + b" " * self.size + text[-2:]
        return text

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> BadPrometheus:
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.slow
def test_a_prometheus_answering_one_byte_at_a_time_costs_the_fresh_read_its_timeout_in_total() -> (
    None
):
    settings = Settings(prometheus_timeout=0.8, fresh_read_timeout=0.5, prometheus_retries=0)
    with BadPrometheus("trickle") as slow:
        source = PrometheusSource(slow.url, settings, backoff_factor=0.01)
        began = time.monotonic()
        with pytest.raises(SourceError) as fresh:
            source.recent(SPEC, time.time(), 3600)
        assert time.monotonic() - began < 10  # 0.5 s and the grace, not the answer's ~60 s
        assert "did not finish answering within 0.5s (total deadline" in str(fresh.value)
        assert "PH_FRESH_READ_TIMEOUT" in str(fresh.value)
        time.sleep(0.3)  # the abandoned read ends at its next byte
        began = time.monotonic()
        with pytest.raises(SourceError) as history:
            source.history(SPEC, time.time())
        assert time.monotonic() - began < 10  # 0.8 s, not the answer's ~60 s
        assert "within 0.8s (total deadline" in str(history.value)
        assert "PH_PROMETHEUS_TIMEOUT" in str(history.value)


def test_fresh_reads_of_many_pools_at_once_each_get_their_own_deadline() -> None:
    settings = Settings(fresh_read_timeout=2.0, prometheus_retries=0)
    with BadPrometheus("slow") as slow:
        source = PrometheusSource(slow.url, settings)
        sizes = map_bounded(
            lambda _i: len(source.recent(SPEC, time.time(), 3600)), list(range(6)), 6, "fresh"
        )
    assert sizes == [3] * 6  # none refused as "busy", none cut by another read's deadline


def test_a_trickling_prometheus_never_delays_the_floors(tmp_path, server) -> None:
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml("web", minReplicas=2, forecast=FORECAST),
        pool_yaml("batch", minReplicas=4),
    )
    for name in ("web", "batch"):
        server.add_deployment(NS, f"{name}-placeholder", 0)
    daemon = make_daemon(config, server, Clock(time.time()), forecaster=BurstForecaster())
    assert daemon.refit()
    with BadPrometheus("trickle") as slow:
        prometheus = PrometheusSource(slow.url, Settings(fresh_read_timeout=0.4))
        daemon.source = daemon.inputs.source = prometheus  # Prometheus trickles after the refit
        result = daemon.reconcile()
    assert result.seconds < 15.0, result.seconds  # not the 99 s of a per-read timeout
    assert server.replicas(NS, "batch-placeholder") == 4
    web = next(o for o in result.pools if o.pool == "web")
    assert server.replicas(NS, "web-placeholder") == web.plan.desired >= 2
    assert "total deadline" in str(web.plan.details.get("burst_fallback"))


def test_an_answer_over_the_byte_cap_is_refused_with_the_cap_named() -> None:
    settings = Settings(prometheus_max_bytes=100_000, prometheus_retries=0)
    with BadPrometheus("huge", size=2_000_000) as huge:
        source = PrometheusSource(huge.url, settings)
        with pytest.raises(SourceError) as exc:
            source.recent(SPEC, time.time(), 3600)
    assert "more than 100,000 bytes" in str(exc.value)
    assert "PH_PROMETHEUS_MAX_BYTES" in str(exc.value)


@pytest.mark.slow
def test_an_answer_with_far_more_points_than_range_over_step_is_refused_with_the_counts() -> None:
    settings = Settings(prometheus_retries=0)
    spec = ForecastSpec.model_validate({"query": "up", "demandPerReplica": 1, "step": "1m"})
    with BadPrometheus("points", points=50_000) as flood:
        source = PrometheusSource(flood.url, settings)
        with pytest.raises(SourceError) as exc:
            source.recent(spec, time.time(), 2.5 * 3600)  # 2.5 h at 1 min: 151 points
    assert "50,000 points" in str(exc.value) and "holds 151" in str(exc.value)


# -- 10. a bounded HTTP server ---------------------------------------------------------------------


class _Status:
    def readiness(self) -> tuple[bool, str]:
        return True, "fine"

    def status(self) -> dict[str, object]:
        return {"ok": True}


def _get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


@pytest.mark.slow
def test_idle_connections_hold_a_fixed_number_of_threads_and_are_dropped_after_the_read_timeout() -> (
    None
):
    http_server = HttpServer(_Status(), lambda: b"", "127.0.0.1", 0, read_timeout=0.5).start()
    threads_before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", http_server.port)) for _ in range(400)]
    try:
        time.sleep(0.3)
        assert threading.active_count() - threads_before <= 8  # the worker pool, not 400 threads
        assert wait_for(lambda: _get(http_server.port, "/healthz")[0] == 200, 5.0)
        for sock in idle:  # every idle connection has been closed by the server
            sock.settimeout(2.0)
            assert sock.recv(1) == b""
    finally:
        for sock in idle:
            sock.close()
        http_server.stop()


@pytest.mark.slow
def test_a_slowloris_client_is_cut_off_and_answers_say_nosniff() -> None:
    http_server = HttpServer(_Status(), lambda: b"", "127.0.0.1", 0, read_timeout=0.5).start()
    try:
        slow = socket.create_connection(("127.0.0.1", http_server.port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")
        began, cut = time.monotonic(), False
        # Dribbled for up to 20 s, 40 read timeouts: cut off means the server closed it long
        # before (a close or a reset, as the kernel answers an unread byte), however busy.
        while time.monotonic() - began < 20.0:
            try:
                slow.sendall(b"X")  # one byte of a header every 0.1 s
            except OSError:
                cut = True
                break
            slow.settimeout(0.1)
            try:
                if slow.recv(1) == b"":
                    cut = True
                    break
            except TimeoutError:
                pass
            except OSError:  # ConnectionResetError: closed with our byte unread
                cut = True
                break
        assert cut, "a client dribbling a header was served for 20 s"
        for path in ("/healthz", "/last-run", "/readyz"):
            code, headers, _ = _get(http_server.port, path)
            assert code == 200 and headers["X-Content-Type-Options"] == "nosniff"
    finally:
        http_server.stop()


# -- 11. Kubernetes: Retry-After within the lease fence, maxReplicas as a hard cap -----------------


def _web_pool(tmp_path: Path) -> Pool:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1))
    return load_policy(config).pools[0]


@pytest.mark.slow
def test_a_429_with_retry_after_is_waited_for_when_the_lease_allows(tmp_path, server) -> None:
    server.add_deployment(NS, "web-placeholder", 0)
    server.fail("PATCH", r"web-placeholder/scale$", 429, times=1, retry_after=1)
    actuator = TargetActuator(server.api_client(), FAST)
    actuator.scale(_web_pool(tmp_path), 5, "test", dry_run=False)
    patches = server.requests("PATCH", "web-placeholder/scale")
    assert len(patches) == 2 and patches[1].at - patches[0].at >= 1.0  # not 0.01 s of backoff
    assert server.replicas(NS, "web-placeholder") == 5


def test_a_retry_after_longer_than_the_lease_left_is_not_waited_for(tmp_path, server) -> None:
    server.add_deployment(NS, "web-placeholder", 0)
    server.fail("PATCH", r"web-placeholder/scale$", 429, times=1, retry_after=30)
    actuator = TargetActuator(server.api_client(), FAST, fence=lambda: 5.0)
    began = time.monotonic()
    with pytest.raises(Throttled) as exc:
        actuator.scale(_web_pool(tmp_path), 5, "test", dry_run=False)
    assert time.monotonic() - began < 15 and exc.value.retry_after == 30  # not waited for
    assert "Retry-After 30s" in str(exc.value)
    assert len(server.requests("PATCH", "web-placeholder/scale")) == 1
    assert server.replicas(NS, "web-placeholder") == 0


def test_a_manual_change_above_max_replicas_is_brought_back_one_within_the_bounds_stays(
    tmp_path, server
) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("gpu", minReplicas=3, maxReplicas=20))
    server.add_deployment(NS, "gpu-placeholder", 0)
    clock = Clock()
    daemon = make_daemon(config, server, clock)
    assert daemon.reconcile().pools[0].action == "scaled"
    server.edit_deployment(NS, "gpu-placeholder", {"spec": {"replicas": 1000}})
    clock.now += 60
    assert daemon.reconcile().pools[0].action == "scaled"
    assert server.replicas(NS, "gpu-placeholder") == 3  # not 1,000 GPU nodes
    server.edit_deployment(NS, "gpu-placeholder", {"spec": {"replicas": 15}})
    for _ in range(2):
        clock.now += 60
        assert daemon.reconcile().pools[0].action == "manual-override"
    assert server.replicas(NS, "gpu-placeholder") == 15


# -- 12. a failed refit is retried with backoff --------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "wait"),
    [(1, 60), (2, 120), (3, 240), (4, 480), (5, 900), (9, 900)],
)
def test_refit_backoff_is_1_2_4_8_then_15_minutes(failures: int, wait: float) -> None:
    assert backoff(failures) == wait


def test_a_refit_that_fails_at_start_is_retried_until_one_succeeds_and_last_run_says_when(
    tmp_path, server
) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 0)
    clock, source = Clock(), FakeSource()
    source.down = True  # Prometheus 503 at start
    daemon = make_daemon(config, server, clock, source=source)
    asked: list[tuple[list[str], float]] = []
    daemon.refit_later = lambda pools, seconds: asked.append((pools, seconds))
    for expected in (60, 120, 240):
        daemon.refit()
        assert asked[-1] == (["web"], expected)
        retry = daemon.status()["refit"]["next_retry"]
        assert retry["next_try_epoch"] == clock.now + expected and retry["failed_tries"] >= 1
        assert "unreachable" in retry["why"]
        clock.now += expected
    source.down = False
    daemon.refit()
    assert daemon.status()["refit"]["next_retry"] is None
    assert len(asked) == 3  # back to the refit schedule
    assert daemon.reconcile().pools[0].plan.reason == "forecast"


def test_the_runner_schedules_the_retry_of_a_failed_first_refit(tmp_path, server) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 0)
    source = FakeSource()
    source.down = True
    daemon = make_daemon(config, server, time.time, source=source)
    runner = Runner(daemon, interval=0.5)
    runner.start()
    try:
        assert wait_for(lambda: runner.scheduler.get_job("refit-retry") is not None, 5.0)
        job = runner.scheduler.get_job("refit-retry")
        wait = job.next_run_time.timestamp() - time.time()
        assert 50 < wait <= 60 and list(job.args) == [["web"]]
        shown = daemon.status()["refit"]["next_retry"]
        assert shown["next_try_epoch"] == pytest.approx(job.next_run_time.timestamp(), abs=1.0)
    finally:
        runner.stop()


# -- 13. reports that fail say why; huge values never stop a report ---------------------------------


def test_a_report_that_cannot_be_written_says_why_on_report_and_last_run(tmp_path, server) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    writer = report_writer(Settings(report_dir=blocker / "reports"), "test")
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock(), report_writer=writer)
    daemon.refit()
    assert errors(daemon, "report") == 1
    why = daemon.status()["report_error"]
    assert why and "Not a directory" in why
    http_server = HttpServer(
        daemon, daemon.metrics.exposition, "127.0.0.1", 0, blocker / "reports"
    ).start()
    try:
        code, _, body = _get(http_server.port, "/report")
    finally:
        http_server.stop()
    assert (
        code == 404 and "Not a directory" in body.decode() and "no report yet" not in body.decode()
    )


@pytest.mark.slow
def test_a_report_on_the_largest_values_read_is_written_and_1e308_is_refused_at_read(
    tmp_path, capsys
) -> None:
    """Values of 1e308 overflow the arithmetic (issue 64: numpy warnings, a burst allowance of
    -2.4e304): the reader refuses them, naming the line; the largest it reads make a report."""
    start = 1_700_000_000
    for value, expected in ((MAX_SAMPLE, 0), (1e308, 2)):
        data = tmp_path / f"huge-{value:g}.csv"
        rows = [
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start + 300 * i))},{value:g}"
            for i in range(864)
        ]
        data.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
        out = tmp_path / f"report-{value:g}"
        code = cli.main(["report", "--data", str(data), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == expected, err
        if expected == 0:
            assert (out / "index.html").is_file() and (out / "report.json").is_file()
        else:
            assert ":2: value '1e+308' is beyond 1e+18" in err and not out.exists()
