"""One instant of one series, four ways in: `plan --at`, `report --at` and the daemon (`run --once`'s
refit and reconcile, with the real Kubernetes client against the test API server) give the same
desired replicas, components and burst allowance; the backtest's replay gives the same share
component (from its app pods x their request, which `plan` and `report` are given as `--requests`
and the daemon reads from the pods on the nodes)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer

from predictive_headroom import cli
from predictive_headroom.app.fit import default_forecaster
from predictive_headroom.commands import parse_time
from predictive_headroom.core.planner import plan_to_dict
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.load import load_policy
from predictive_headroom.replay.planner import share_parts
from predictive_headroom.replay.setup import resolve
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
    pool["share"] = {"cpu": "10%"}
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
    # The backtest's share component at AT: the app pods known a minute before (the observation
    # delay), each requesting what a placeholder requests (2 cores)
    replay = resolve(CsvSource(data).full(), load_policy(config).pools[0])
    at = int(np.searchsorted(replay.times, parse_time(AT)))
    assert replay.times[at] == parse_time(AT)
    delay = round(replay.plan_settings.delay / 60)
    replayed = share_parts(replay.pool, replay.pods, delay)[at]
    assert replayed is not None and replayed.replicas > 0
    cpu = replayed.requested["cpu"]
    assert cpu == 2.0 * replay.pods[at - delay]
    nodes = ["--nodes", "4", "--cores", "32", "--requests", f"cpu={cpu:g}"]

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
        server.add_pod("rides", "rides-api-0", "node-0", {"cpu": f"{cpu:g}"}, "ReplicaSet")
        server.add_deployment(NS, "rides-api-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            source=CsvSource(data),
            forecaster=default_forecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            pods=KubePodReader(api, FAST),
            loop=LoopSettings(observe_placeholders=False, read_node_pods=True),
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
    assert daemon_answer["components"]["share"] == replayed.replicas  # the backtest's
    # Only the daemon sees the nodes: no node is leaving, so its disruption component is 0, and
    # the CLI's plan and report, which cannot know, leave the component out.
    assert daemon_answer["components"].pop("disruption") == 0
    assert the_answer(planned) == daemon_answer
    assert the_answer(reported["plan"]["now"]) == daemon_answer
