"""One instant of one series, three ways in: `plan --at`, `report --at` and the daemon (`run --once`'s
refit and reconcile, with the real Kubernetes client against the test API server) give the same
desired replicas, components and burst allowance."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer

from predictive_headroom import cli
from predictive_headroom.app.fit import default_forecaster
from predictive_headroom.commands import parse_time
from predictive_headroom.core.planner import plan_to_dict
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.sources.csvsource import CsvSource

AT = "2014-12-22T00:00:00Z"  # the instant the three commands once disagreed on
NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")


def demo_policy(path: Path) -> Path:
    """The bundled demo policy, with room to show the forecast and a proportional rule on nodes."""
    text = (resources.files("predictive_headroom") / "data" / "demo.yaml").read_text()
    policy = yaml.safe_load(text)
    pool = policy["pools"][0]
    pool["maxReplicas"] = 400
    pool["proportional"] = {"linear": {"nodesPerReplica": 2}}
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def the_answer(plan: dict) -> dict:
    """What must agree: desired replicas, reason, components and the burst allowance."""
    details = plan["details"]
    return {
        "desired_replicas": plan["desired_replicas"],
        "reason": plan["reason"],
        "components": plan["components"],
        **{
            key: details.get(key)
            for key in ("forecast_status", "ramp", "burst", "burst_source", "burst_fallback")
        },
    }


@pytest.fixture(scope="module")
def data() -> Path:
    with resources.as_file(
        resources.files("predictive_headroom") / "data" / "nab_nyc_taxi_30min.csv"
    ) as path:
        yield Path(path)


@pytest.mark.slow
def test_plan_report_and_the_daemon_agree_at_one_instant(tmp_path, capsys, data) -> None:
    config = demo_policy(tmp_path / "policy.yaml")
    nodes = ["--nodes", "4", "--cores", "32"]

    assert (
        cli.main(["plan", "-c", str(config), "--at", AT, "--data", str(data), *nodes, "-o", "json"])
        == 0
    )
    [planned] = json.loads(capsys.readouterr().out)["pools"]

    out = tmp_path / "report"
    args = ["report", "-c", str(config), "--at", AT, "--data", str(data), "--out", str(out)]
    assert cli.main([*args, *nodes]) == 0
    [reported] = json.loads((out / "report.json").read_text())["pools"]

    with FakeApiServer() as server:
        for i in range(4):
            server.add_node(f"node-{i}", cpu="8")
        server.add_deployment(NS, "rides-api-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            source=CsvSource(data),
            forecaster=default_forecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            clock=lambda: parse_time(AT),
        )
        assert daemon.refit()
        result = daemon.reconcile()
        [outcome] = result.pools
        assert outcome.action == "scaled", outcome.error
        assert server.replicas(NS, "rides-api-placeholder") == outcome.plan.desired

    daemon_answer = the_answer(plan_to_dict(outcome.plan))
    assert daemon_answer["burst_source"] == "model" and daemon_answer["burst_fallback"] is None
    assert daemon_answer["components"]["proportional"] == 2
    # Only the daemon sees the nodes: no node is leaving, so its disruption component is 0, and
    # the CLI's plan and report, which cannot know, leave the component out.
    assert daemon_answer["components"].pop("disruption") == 0
    assert the_answer(planned) == daemon_answer
    assert the_answer(reported["plan"]["now"]) == daemon_answer
