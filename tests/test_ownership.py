"""Issue 45 item 1: the daemon writes only targets that are its own (labelled
`predictive-headroom.io/pool: <pool>`), against the API stand-in, and refuses targets in kube-system."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from test_disruption import Clock, NoForecaster

from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.load import ConfigError, load_policy

FAST = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
NOW = datetime(2026, 11, 23, 8, 52, tzinfo=UTC).timestamp()
LABEL = "predictive-headroom.io/pool"


def _policy(path: Path, target: dict[str, str], min_replicas: int = 0) -> Path:
    pool = {"name": "payments", "target": target, "minReplicas": min_replicas, "maxReplicas": 10}
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


def _daemon(config: Path, server: FakeApiServer, clock: Clock, dry_run: bool = False) -> Daemon:
    api = server.api_client()
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        monotonic=clock,
        dry_run=dry_run,
    )


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


def _metric(daemon: Daemon, line_start: str) -> float:
    text = daemon.metrics.exposition().decode()
    line = next(x for x in text.splitlines() if x.startswith(line_start))
    return float(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize("dry_run", [False, True])
def test_another_teams_deployment_is_refused_at_every_reconcile_and_never_written(
    tmp_path, server, dry_run
) -> None:
    """The fault run's case: a pool whose target names team-b/payments-api (7 replicas, no label
    of ours) scaled it to 0. Now it stays at 7 and every reconcile says why."""
    server.add_deployment("team-b", "payments-api", 7, pool=None)
    config = _policy(tmp_path / "p.yaml", {"namespace": "team-b", "name": "payments-api"})
    clock = Clock(NOW)
    daemon = _daemon(config, server, clock, dry_run)
    for _ in range(3):
        result = daemon.reconcile()
        clock.now += 60
        outcome = result.to_dict()["pools"][0]
        assert outcome["action"] == "refused" and outcome["current_replicas"] == 7
        assert "Deployment team-b/payments-api" in outcome["error"]
        assert f"lacks the label {LABEL}=payments" in outcome["error"]
        assert not result.ok
    print("/last-run error:", outcome["error"])
    assert server.replicas("team-b", "payments-api") == 7
    assert server.writes("payments-api/scale") == []  # not even a server-side dry run
    status = json.loads(json.dumps(daemon.status()))
    assert status["reconcile"]["errors"] == [outcome["error"]]
    assert _metric(daemon, 'predictive_headroom_target_refused{pool="payments"}') == 1
    assert _metric(daemon, 'predictive_headroom_errors_total{kind="ownership"}') == 3
    warnings = [e for e in server.events("team-b") if e.get("reason") == "NotOwned"]
    if dry_run:
        assert warnings == []  # a dry run writes nothing, Events included
    else:  # one Warning Event when the refusal starts, not one per reconcile
        assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
        assert warnings[0]["involvedObject"]["name"] == "payments-api"
        assert f"{LABEL}=payments" in warnings[0]["message"]


def test_a_target_labelled_for_another_pool_is_refused_and_adopted_once_labelled(
    tmp_path, server
) -> None:
    server.add_deployment("team-b", "payments-api", 7, pool="batch")
    config = _policy(tmp_path / "p.yaml", {"namespace": "team-b", "name": "payments-api"}, 2)
    clock = Clock(NOW)
    daemon = _daemon(config, server, clock)
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "refused" and f"it has {LABEL}=batch" in (outcome.error or "")
    assert server.replicas("team-b", "payments-api") == 7
    server.edit_deployment("team-b", "payments-api", {"metadata": {"labels": {LABEL: "payments"}}})
    clock.now += 60
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "scaled" and outcome.error is None
    assert server.replicas("team-b", "payments-api") == 2
    assert _metric(daemon, 'predictive_headroom_target_refused{pool="payments"}') == 0


def test_a_capacity_buffer_without_the_label_is_refused(tmp_path, server) -> None:
    server.add_capacity_buffer("team-b", "shared-buffer", 4, pool=None)
    target = {"kind": "CapacityBuffer", "namespace": "team-b", "name": "shared-buffer"}
    config = _policy(tmp_path / "p.yaml", target, min_replicas=1)
    daemon = _daemon(config, server, Clock(NOW))
    outcome = daemon.reconcile().pools[0]
    assert outcome.action == "refused"
    assert "CapacityBuffer team-b/shared-buffer" in (outcome.error or "")
    assert server.replicas("team-b", "shared-buffer") == 4


def test_a_target_in_kube_system_is_refused_when_the_policy_is_loaded(tmp_path) -> None:
    config = _policy(tmp_path / "p.yaml", {"namespace": "kube-system", "name": "coredns"})
    with pytest.raises(ConfigError) as exc:
        load_policy(config)
    assert "pools[0].target.namespace" in str(exc.value)
    assert "targets in kube-system are refused" in str(exc.value)


def test_a_huge_label_value_is_echoed_cut_to_a_bound_with_its_length(
    tmp_path, server, caplog
) -> None:
    """Issue 55: a 10 KB pool label value echoed whole into `/last-run` (10,556 characters) and
    a log line (11,651). Every echo (the outcome, `/last-run`, the Event, the log) shows its first
    characters and its length."""
    import logging

    huge = "x" * 10_000
    server.add_deployment("team-b", "payments-api", 7, pool=huge)
    config = _policy(tmp_path / "p.yaml", {"namespace": "team-b", "name": "payments-api"})
    daemon = _daemon(config, server, Clock(NOW))
    with caplog.at_level(logging.INFO):
        outcome = daemon.reconcile().pools[0]
    assert outcome.action == "refused" and outcome.error is not None
    assert f"it has {LABEL}={'x' * 200}...(10,000 characters)" in outcome.error
    assert len(outcome.error) < 1_000
    assert len(json.dumps(daemon.status())) < 5_000
    (event,) = [e for e in server.events("team-b") if e.get("reason") == "NotOwned"]
    assert "...(10,000 characters)" in event["message"] and len(event["message"]) < 1_000
    assert caplog.records and max(len(r.getMessage()) for r in caplog.records) < 1_000
