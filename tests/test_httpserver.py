"""The daemon's HTTP endpoints over real HTTP: /metrics, /healthz, /readyz, /last-run, /report,
and the JSON log format."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from prometheus_client.parser import text_string_to_metric_families

from predictive_headroom.daemon.httpserver import HttpServer
from predictive_headroom.daemon.logs import setup_logging
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ActuatorError, ClusterState, TargetState

T0 = 1_790_000_000.0
INTERVAL = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Elector:
    def __init__(self, leader: bool = True) -> None:
        self.is_leader = leader

    def start(self) -> None: ...

    def stop(self) -> None: ...


class FakeActuator:
    """Targets in memory; pools named in `forbidden` answer like a missing RBAC rule."""

    def __init__(self) -> None:
        self.replicas: dict[str, int] = {}
        self.forbidden: set[str] = set()

    def read(self, pool: Pool) -> TargetState:
        if pool.name in self.forbidden:
            raise ActuatorError(
                f"pool {pool.name}: get deployments/scale {pool.target.namespace}/{pool.target.name}: forbidden"
            )
        return TargetState(self.replicas.get(pool.name, 0), pool_label=pool.name)

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        if not dry_run:
            self.replicas[pool.name] = replicas

    def record_refusal(self, pool: Pool, message: str) -> None:
        pass


class FakeCluster:
    def cluster_state(self, label_selector: str) -> ClusterState:
        return ClusterState(6, 24.0, 6, 24.0)


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Daemon, Clock, FakeActuator, Elector, str, Path]]:
    config = tmp_path / "policy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "pools": [
                    {
                        "name": "web",
                        "target": {"namespace": "apps", "name": "web-placeholder"},
                        "minReplicas": 2,
                        "maxReplicas": 10,
                        "proportional": {"linear": {"nodesPerReplica": 2}},
                    },
                    {
                        "name": "batch",
                        "target": {"namespace": "apps", "name": "batch-placeholder"},
                        "minReplicas": 1,
                        "maxReplicas": 5,
                    },
                ]
            }
        )
    )
    clock, actuator, elector = Clock(), FakeActuator(), Elector()
    daemon = new_daemon(
        config,
        source=None,
        forecaster=None,
        actuator=actuator,  # type: ignore[arg-type]
        cluster=FakeCluster(),
        elector=elector,
        clock=clock,
        monotonic=clock,  # ages are measured on the monotonic clock
        interval=INTERVAL,
    )
    reports = tmp_path / "reports"
    server = HttpServer(daemon, daemon.metrics.exposition, "127.0.0.1", 0, reports).start()
    yield daemon, clock, actuator, elector, f"http://127.0.0.1:{server.port}", reports
    server.stop()


def _why(url: str) -> str:
    """The readiness reason /last-run gives (the open /readyz gives none)."""
    return json.loads(get(url + "/last-run")[2])["readiness"]["why"]


def test_readyz_needs_a_recent_successful_reconcile_when_leader(setup, caplog) -> None:
    daemon, clock, actuator, elector, url, _ = setup
    caplog.set_level(logging.INFO, logger="predictive_headroom.daemon.health")
    code, _, body = get(url + "/readyz")
    assert code == 503 and "no reconcile has succeeded yet" in _why(url)
    assert get(url + "/healthz")[:1] == (200,)

    daemon.reconcile()
    assert get(url + "/readyz")[0] == 200

    clock.now += 3 * INTERVAL + 1
    assert get(url + "/readyz")[0] == 503
    assert "181s ago" in _why(url)
    assert "not ready: leader, but the last successful reconcile was 181s ago" in caplog.text

    actuator.forbidden = {"web", "batch"}  # nothing served: still not ready
    daemon.reconcile()
    assert get(url + "/readyz")[0] == 503
    actuator.forbidden = {
        "web"
    }  # one pool served: ready, the failure shows in /last-run and metrics
    daemon.reconcile()
    assert get(url + "/readyz")[0] == 200

    elector.is_leader = False
    clock.now += 10 * INTERVAL
    code, _, body = get(url + "/readyz")
    assert code == 200 and body == "ok\n" and "follower" in _why(url)


def test_readyz_tells_an_unauthenticated_caller_ready_or_not_and_nothing_more(setup, caplog):
    """The probe port is open to anyone who reaches it: /readyz names no config path, cache or
    error; the reasons go to the log, once per change, and to /last-run (authorised callers)."""
    daemon, _, _, _, url, _ = setup
    caplog.set_level(logging.INFO, logger="predictive_headroom.daemon.health")
    daemon.config.error = "pools[0].maxReplicas: secret-looking detail at /etc/ph/config.yaml"
    for _ in range(3):
        code, _, body = get(url + "/readyz")
        assert code == 503
        assert body == "not ready (the reason: the daemon's log, /last-run)\n"
    assert "secret-looking detail" in _why(url)
    logged = [r.getMessage() for r in caplog.records if r.name.endswith("daemon.health")]
    assert len(logged) == 1 and "secret-looking detail" in logged[0]  # said once, not per probe


def test_metrics_show_plans_components_errors_and_leadership(setup) -> None:
    daemon, _clock, actuator, _, url, _ = setup
    actuator.forbidden = {"batch"}
    daemon.reconcile()

    code, kind, text = get(url + "/metrics")

    assert code == 200 and kind.startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    expected = {
        ("predictive_headroom_desired_replicas", (("pool", "web"),)): 3,
        ("predictive_headroom_applied_replicas", (("pool", "web"),)): 3,
        (
            "predictive_headroom_component_replicas",
            (("component", "proportional"), ("pool", "web")),
        ): 3,
        ("predictive_headroom_component_replicas", (("component", "min"), ("pool", "web"))): 2,
        ("predictive_headroom_plan_reason_info", (("pool", "web"), ("reason", "proportional"))): 1,
        ("predictive_headroom_desired_replicas", (("pool", "batch"),)): 1,
        ("predictive_headroom_errors_total", (("kind", "actuator"),)): 1,
        ("predictive_headroom_errors_total", (("kind", "source"),)): 0,
        ("predictive_headroom_last_reconcile_timestamp_seconds", ()): T0,
        ("predictive_headroom_leader", ()): 1,
        ("predictive_headroom_reconcile_seconds_count", ()): 1,
    }
    assert {key: samples.get(key) for key in expected} == expected
    took = daemon.last_reconcile.seconds
    assert samples[("predictive_headroom_reconcile_seconds_sum", ())] == pytest.approx(took)
    assert (
        "predictive_headroom_applied_replicas",
        (("pool", "batch"),),
    ) not in samples  # never read
    assert not any(
        name == "predictive_headroom_component_replicas" and ("component", "schedule") in labels
        for name, labels in samples
    )  # no windows configured: no series


def test_last_run_is_json_with_plans_and_errors(setup) -> None:
    daemon, _, actuator, _, url, _ = setup
    actuator.forbidden = {"batch"}
    daemon.reconcile()

    code, kind, body = get(url + "/last-run")

    assert code == 200 and kind == "application/json"
    data = json.loads(body)
    pools = {p["name"]: p for p in data["reconcile"]["pools"]}
    assert pools["web"]["desired_replicas"] == 3 and pools["web"]["action"] == "scaled"
    assert pools["batch"]["action"] == "error" and "forbidden" in pools["batch"]["error"]
    assert data["reconcile"]["ok"] is False and len(data["reconcile"]["errors"]) == 1
    assert data["config"]["pools"] == ["web", "batch"]


def test_report_endpoints_say_how_to_get_one_until_a_report_exists(setup) -> None:
    *_, url, reports = setup
    code, _, body = get(url + "/report")
    assert code == 404 and "no report yet" in body and "PH_REPORT_DIR" in body

    newest = reports / "20261120T080000Z"
    newest.mkdir(parents=True)
    (newest / "index.html").write_text("<html>headroom</html>")
    (newest / "report.json").write_text('{"pools": []}')
    assert get(url + "/report")[::2] == (200, "<html>headroom</html>")
    code, kind, body = get(url + "/report.json")
    assert (code, kind, json.loads(body)) == (200, "application/json", {"pools": []})
    code, _, body = get(url + "/nothing-here")
    assert code == 404 and "/metrics" in body


def test_json_logs_are_one_object_per_line_with_extra_fields() -> None:
    stream = io.StringIO()
    setup_logging("INFO", "json", stream)
    try:
        logging.getLogger("predictive_headroom.daemon.loop").info(
            "reconcile: %s", "web=3", extra={"pools": [{"name": "web"}]}
        )
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "predictive-headroom"]:
            root.removeHandler(handler)
    record = json.loads(stream.getvalue().strip())
    assert record["message"] == "reconcile: web=3" and record["level"] == "INFO"
    assert record["logger"] == "predictive_headroom.daemon.loop" and record["pools"] == [
        {"name": "web"}
    ]
    assert record["time"].endswith("Z")


def test_an_unknown_long_path_is_echoed_cut_with_its_length() -> None:
    import http.client

    from predictive_headroom.daemon.httpserver import HttpServer

    class _Status:
        def readiness(self) -> tuple[bool, str]:
            return True, "fine"

        def status(self) -> dict[str, object]:
            return {}

    server = HttpServer(_Status(), lambda: b"", "127.0.0.1", 0).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/" + "p" * 20_000)
        answer = conn.getresponse()
        body = answer.read().decode()
        conn.close()
    finally:
        server.stop()
    assert answer.status == 404 and "...(20,001 characters)" in body and len(body) < 1_000
