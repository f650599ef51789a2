"""Issue 45 row 4: reads that failed silently or had no bound. A `410 Gone` on a paged list kept the
last count with `/last-run` saying `error: null`; now the list restarts from the beginning, as
client-go's pager does, and a read that still fails is on `/last-run` and in `errors_total`. A 2 GB
CSV (143 M rows) ran 7 minutes to 1.5 GB with no progress line and no bound; now a CSV over a bound
is refused with its size and the flag that raises it, and a long read shows its progress."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer, Recorded
from test_disruption import Clock, NoForecaster

from predictive_headroom import cli
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, ClusterReadError, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import CsvOptions, read_csv_history

NS = "headroom"
FAST = CallOptions(timeout=5.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
NOW = 1_795_000_000.0
EXPIRED = "The provided continue parameter is too old to display a consistent list result."


def continued(request: Recorded) -> bool:
    return bool(request.query.get("continue"))


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, "web-placeholder", 0)
        for i in range(7):
            fake.add_node(f"n-{i}", cpu="8", labels={"pool": "web"})
        yield fake


def node_lists(server: FakeApiServer) -> list[Recorded]:
    return server.requests("GET", "/api/v1/nodes")


def test_an_expired_continue_token_restarts_the_node_list_from_the_beginning(
    server, caplog
) -> None:
    server.fail("GET", r"^/api/v1/nodes$", 410, message=EXPIRED, when=continued)
    reader = KubeClusterReader(server.api_client(), FAST, page_size=3)
    with caplog.at_level(logging.WARNING):
        state = reader.cluster_state("pool=web")
    assert state.nodes == 7 and state.cores == 56  # every node once: no page counted twice
    queries = [r.query for r in node_lists(server)]
    assert [q.get("continue", "") for q in queries] == ["", "3", ""]
    assert "limit" not in queries[-1]  # the restart is one request, as client-go's pager does
    assert any("continue token expired (410 Gone)" in r.getMessage() for r in caplog.records)


def test_an_expired_token_restarts_the_pod_list_too(server) -> None:
    for i in range(5):
        server.add_pod("shop", f"app-{i}", "n-0", {"cpu": "1"}, "ReplicaSet")
    server.fail("GET", r"^/api/v1/pods$", 410, message=EXPIRED, when=continued)
    pods = KubePodReader(server.api_client(), FAST, page_size=2).pods_by_node()
    assert sorted(p.name for p in pods["n-0"]) == [f"app-{i}" for i in range(5)]


def test_a_410_on_the_first_page_is_a_read_error_that_names_it(server) -> None:
    server.fail("GET", r"^/api/v1/nodes$", 410, message=EXPIRED, times=None)
    reader = KubeClusterReader(server.api_client(), FAST, page_size=3)
    with pytest.raises(ClusterReadError, match="too old"):
        reader.cluster_state("pool=web")


def write_policy(path: Path) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 100,
        "proportional": {"linear": {"coresPerReplica": 8}, "nodeSelector": {"pool": "web"}},
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


def make_daemon(config: Path, server: FakeApiServer) -> Daemon:
    api = server.api_client()
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST, page_size=3),
        clock=Clock(NOW),
        pods=KubePodReader(api, FAST),
        loop=LoopSettings(observe_placeholders=False, read_node_pods=False),
    )


def errors(daemon: Daemon, kind: str) -> float:
    value = daemon.metrics.registry.get_sample_value(
        "predictive_headroom_errors_total", {"kind": kind}
    )
    return value or 0.0


def test_a_failed_node_read_shows_on_last_run_and_in_the_metric_while_the_last_count_stands_in(
    tmp_path, server
) -> None:
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server)
    (pool,) = daemon.reconcile().pools
    assert pool.plan is not None and pool.plan.components["proportional"] == 7
    assert daemon.status()["reconcile"]["failed_reads"] == []

    # a continue token that expires, and the restart that fails as well
    server.fail("GET", r"^/api/v1/nodes$", 410, message=EXPIRED, when=continued)
    server.fail("GET", r"^/api/v1/nodes$", 503, times=None, when=lambda r: not r.query.get("limit"))
    (pool,) = daemon.reconcile().pools
    assert pool.error is None and pool.plan is not None
    assert pool.plan.components["proportional"] == 7  # the last count stands in
    status = daemon.status()["reconcile"]
    (failed,) = status["failed_reads"]
    assert failed.startswith("pool web: cannot count nodes:") and "503" in failed
    assert "planned with the last count (7 nodes)" in failed
    assert status["pools"][0]["failed_reads"] == [failed]
    assert errors(daemon, "cluster") == 1

    server.clear_faults()
    daemon.reconcile()
    assert daemon.status()["reconcile"]["failed_reads"] == []


# -- a CSV larger than a bound ---------------------------------------------------------------------

TAXI = (
    Path(__file__).resolve().parents[1] / "predictive_headroom" / "data" / "nab_nyc_taxi_30min.csv"
)
TAXI_ROWS = 10_320


def test_a_csv_over_the_byte_bound_is_refused_before_it_is_read_with_its_size_and_the_flag() -> (
    None
):
    size = TAXI.stat().st_size
    with pytest.raises(SourceError) as refused:
        read_csv_history(TAXI, CsvOptions(max_bytes=size - 1))
    message = str(refused.value)
    assert f"the file is {size:,} bytes, over the bound of {size - 1:,}" in message
    assert f"--max-csv-bytes {size}" in message
    assert len(read_csv_history(TAXI, CsvOptions(max_bytes=size))) == TAXI_ROWS


def test_a_csv_over_the_row_bound_is_refused_with_the_line_and_the_flag() -> None:
    with pytest.raises(SourceError) as refused:
        read_csv_history(TAXI, CsvOptions(max_rows=1_000))
    message = str(refused.value)
    assert f"{TAXI}:1002: more than 1,000 data rows, the bound" in message
    assert "--max-csv-rows" in message
    assert len(read_csv_history(TAXI, CsvOptions(max_rows=TAXI_ROWS))) == TAXI_ROWS


@pytest.mark.slow
def test_the_command_line_refuses_an_oversized_csv_and_its_flag_raises_the_bound(
    tmp_path, capsys
) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text(
        "pools:\n  - name: taxi\n    target: {namespace: ns, name: p}\n    maxReplicas: 50\n"
        "    forecast: {query: taxi, demandPerReplica: 1000, step: 30m, history: 21d}\n"
    )
    args = ["plan", "-c", str(config), "--data", str(TAXI), "--at", "2014-12-10T00:00:00Z"]
    assert cli.main([*args, "--max-csv-bytes", "100Ki"]) == 2
    err = capsys.readouterr().err
    assert "over the bound of 102,400; pass --max-csv-bytes" in err
    assert cli.main([*args, "--max-csv-rows", "500"]) == 2
    assert "more than 500 data rows" in capsys.readouterr().err
    assert cli.main([*args, "--max-csv-bytes", "2Mi", "-o", "json"]) == 0


def test_a_long_read_shows_its_progress(tmp_path) -> None:
    rows = 200_000
    path = tmp_path / "long.csv"
    with path.open("w") as f:
        f.write("timestamp,value\n")
        f.writelines(f"{1_700_000_000 + 60 * i},{i % 97}\n" for i in range(rows))
    progress = io.StringIO()
    history = read_csv_history(path, CsvOptions(progress=progress, progress_after=0.0))
    assert len(history) == rows
    shown = progress.getvalue()
    assert "reading long.csv" in shown and "100%" in shown
    quiet = io.StringIO()  # a read shorter than `progress_after` shows nothing
    read_csv_history(path, CsvOptions(progress=quiet, progress_after=60.0))
    assert quiet.getvalue() == ""
