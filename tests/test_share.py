"""The share component through the seam: a pool's `share:` keeps placeholders for a share of
what its pods request. Sized the same by the core, the daemon (real kubernetes client against the
test API server), `plan --requests` and the backtest's replay; left out with a reason when the
pods cannot be read; bad input named by `validate`. And the seam itself: every registered
component is read by the daemon, defined in the glossary, named in the metric's help."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_disruption import NOW, Clock, gauge, make_daemon, server  # noqa: F401  (a fixture)

from predictive_headroom import cli
from predictive_headroom.core.components import REGISTRY, winner
from predictive_headroom.core.share import share_part
from predictive_headroom.core.vocabulary import Feed
from predictive_headroom.daemon.components import Readers, watches
from predictive_headroom.pages.glossary import GLOSSARY
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.share import Share
from predictive_headroom.replay.planner import World, planner_strategy, share_parts

GI = 2.0**30
NS = "headroom"


def share_policy(path: Path, share: dict, **extra: object) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 20,
        "leadTime": "5m",
        "placeholder": {"requests": {"cpu": "1", "memory": "1Gi"}, "nodeSelector": {"pool": "web"}},
        "share": share,
        **extra,
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("share", "requested", "placeholder", "expected"),
    [
        ({"cpu": "10%"}, {"cpu": 412.0}, {"cpu": 2.0}, 21),  # 41.2 cores in 2-core placeholders
        ({"cpu": "10%"}, {"cpu": 400.0}, {"cpu": 2.0}, 20),  # exactly 20: not rounded past it
        ({"memory": "15%"}, {"memory": 100 * GI}, {"cpu": 1.0, "memory": 4 * GI}, 4),
        (
            {"cpu": "10%", "memory": "50%"},
            {"cpu": 10.0, "memory": 8 * GI},
            {"cpu": 1.0, "memory": GI},
            4,
        ),
        ({"nvidia.com/gpu": "1"}, {}, {"cpu": 4.0, "nvidia.com/gpu": 1.0}, 1),  # absolute
        ({"nvidia.com/gpu": 3}, {"nvidia.com/gpu": 40.0}, {"nvidia.com/gpu": 2.0}, 2),
        ({"cpu": "10%"}, {}, {"cpu": 1.0}, 0),  # nothing runs: nothing kept
        ({"cpu": "2500m"}, {}, {"cpu": 1.0}, 3),  # an amount of cpu takes its unit
        ({"cpu": "0%"}, {"cpu": 100.0}, {"cpu": 1.0}, 0),
        ({"cpu": "100%"}, {"cpu": 3.5}, {"cpu": 1.0}, 4),
    ],
)
def test_the_share_in_placeholders_is_the_largest_ratio_rounded_up(
    share, requested, placeholder, expected
) -> None:
    assert share_part(Share(share), requested, placeholder).replicas == expected


def test_the_daemon_sizes_the_share_from_the_pods_on_the_pools_nodes(tmp_path, server) -> None:  # noqa: F811
    # web's nodes run 9 cores and 5.5Gi of counted requests (test_disruption's fixture: the
    # DaemonSet's, the mirror pod, the placeholder, the finished job and batch's node left out)
    config = share_policy(tmp_path / "p.yaml", {"cpu": "50%"})
    daemon = make_daemon(config, server, Clock(NOW))
    [outcome] = daemon.reconcile().pools
    plan = outcome.plan
    assert outcome.error is None
    assert plan.components["share"] == 5 and plan.reason == "share"  # 4.5 cores: 5 placeholders
    assert plan.details["share_requested"] == {"cpu": 9.0}
    assert server.replicas(NS, "web-placeholder") == 5
    assert gauge(daemon, "predictive_headroom_component_replicas", component="share") == 5
    assert daemon.status()["share"]["web"]["replicas"] == 5

    config = share_policy(tmp_path / "q.yaml", {"cpu": "50%", "memory": "100%"})
    plan = make_daemon(config, server, Clock(NOW)).reconcile().pools[0].plan
    assert plan.components["share"] == 6  # 5.5Gi in 1Gi placeholders


@pytest.mark.parametrize("refused", ["403", "not read"])
def test_pods_that_cannot_be_read_leave_the_share_out_and_the_rest_plans(
    tmp_path,
    server,  # noqa: F811
    refused,
) -> None:
    if refused == "403":
        server.fail("GET", r"^/api/v1/pods$", 403, times=None)
    config = share_policy(tmp_path / "p.yaml", {"cpu": "50%"}, minReplicas=2)
    daemon = make_daemon(config, server, Clock(NOW), read_pods=refused == "403")
    [outcome] = daemon.reconcile().pools
    assert outcome.error is None
    assert "share" not in outcome.plan.components
    assert outcome.plan.desired == 2 and outcome.plan.reason == "min"
    why = daemon.status()["share"]["web"]["left_out"]
    assert ("forbidden" in why) if refused == "403" else ("disruption.readPods" in why)


def test_plan_with_requests_gives_the_share(tmp_path, capsys) -> None:
    config = share_policy(tmp_path / "p.yaml", {"cpu": "10%"}, maxReplicas=100)
    args = ["plan", "-c", str(config), "--at", "2026-01-01T00:00:00Z", "-o", "json"]
    assert cli.main([*args, "--requests", "cpu=412"]) == 0
    [pool] = json.loads(capsys.readouterr().out)["pools"]
    assert pool["components"]["share"] == 42 and pool["reason"] == "share"  # 41.2 cores
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    assert "share" not in json.loads(captured.out)["pools"][0]["components"]
    assert "--requests" in captured.err
    assert cli.main([*args, "--requests", "cpu"]) == 2
    assert "resource=quantity" in capsys.readouterr().err
    assert cli.main([*args, "--requests", "cpu=40000,memory=800Gi"]) == 2  # 40,000 cores
    assert (
        "--requests cpu=40000: 40000 has no unit, so it is 40000 cores: did you mean 40000m?"
        in (capsys.readouterr().err)
    )


def test_the_replay_sizes_the_share_from_the_app_pods_known_then() -> None:
    pool = Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": NS, "name": "p"},
            "maxReplicas": 50,
            "placeholder": {"cpu": "2", "memory": "4Gi"},
            "share": {"cpu": "25%"},
        }
    )
    pods = np.array([4, 8, 8, 40, 12])
    parts = share_parts(pool, pods, delay_steps=1)
    assert parts[0] is None  # nothing known yet
    # app pods are placeholder-sized: 25% of 4 pods' requests is one placeholder, of 40 ten
    assert [p.replicas for p in parts[1:]] == [1, 2, 2, 10]


@pytest.mark.parametrize(
    ("share", "words"),
    [
        ({"cpu": "150%"}, ["share.cpu", "between 0% and 100%"]),
        ({"memory": "-5%"}, ["share.memory", "between 0% and 100%"]),
        ({"cpu": "-1"}, ["share.cpu", "non-negative"]),
        ({"cpu": "lots"}, ["share.cpu", "'lots'"]),
        ({"nvidia.com/gpu": 1}, ["share.nvidia.com/gpu", "does not request nvidia.com/gpu"]),
        # a bare number for cpu or memory is 10% meant (it would keep 10 cores): refused
        ({"cpu": 10}, ["share.cpu", "did you mean 10%?", "4000m", "nvidia.com/gpu: 1"]),
        ({"memory": "15"}, ["share.memory", "did you mean 15%?", "2Gi"]),
        ({"cpu": 400}, ["share.cpu", "400 has no unit", "written with %"]),
    ],
)
def test_validate_names_the_field_and_the_resource(tmp_path, capsys, share, words) -> None:
    config = share_policy(tmp_path / "p.yaml", share)
    assert cli.main(["validate", str(config)]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    for word in words:
        assert word in text, text


def test_ties_name_the_first_component_in_the_documented_order() -> None:
    assert winner({"min": 3, "share": 3, "forecast": 3}) == ("forecast", 3)
    assert winner({"min": 3, "share": 3, "disruption": 3}) == ("disruption", 3)
    assert winner({"min": 3, "share": 3}) == ("share", 3)
    assert winner({"min": 4, "share": 3}) == ("min", 4)


def test_every_registered_component_is_read_configured_defined_and_labelled() -> None:
    from predictive_headroom.daemon.inputs import Inputs
    from predictive_headroom.daemon.metrics import Metrics

    metrics = Metrics()
    read = watches(Readers(Inputs(None, None, metrics), metrics))  # type: ignore[arg-type]
    for registered in REGISTRY:
        name = str(registered.name)
        assert name in metrics.component._documentation
        assert registered.glossary is None or GLOSSARY[name] == registered.glossary
        if registered.section is not None:
            assert registered.section in Pool.model_fields, f"no pool section {registered.section}"
        if registered.feed == Feed.CONTEXT:
            assert name in read, f"no daemon watch reads {name}"
            assert registered.glossary, f"no glossary entry for {name}"


def test_the_report_holds_the_share_over_its_horizon_beside_the_disruption_reserve(
    tmp_path,
) -> None:
    from test_report import report_of

    from predictive_headroom.core.disruption import DisruptionPart
    from predictive_headroom.core.vocabulary import DisruptionSource
    from predictive_headroom.policy.load import load_policy

    policy = load_policy(share_policy(tmp_path / "p.yaml", {"cpu": "10%"}))
    parts = {
        "web": {
            "share": share_part(Share({"cpu": "10%"}), {"cpu": 41.0}, {"cpu": 1.0}),
            "disruption": DisruptionPart(9, 1, 2, DisruptionSource.PODS),
        }
    }
    (pool,) = report_of(policy, {}, {}, {}, NOW, parts=parts).pools
    assert (pool.now.desired, pool.now.reason) == (10, "disruption")  # room 9 + reserve 1
    assert pool.now.components["share"] == 5  # 4.1 cores
    assert pool.plan_desired[-1] == 5 and pool.plan_reasons[-1] == "share"  # the room went


def test_the_replay_plans_the_share_over_the_timeline_as_at_each_instant() -> None:
    """The backtest's fast path (`desired_at_once` given the share's timeline) writes what
    planning each minute with the share component writes: windows, minReplicas, the cap and the
    stabilisation window included."""
    from predictive_headroom.core.engine import PoolTimeline
    from predictive_headroom.core.settings import resolve_settings

    pool = Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": NS, "name": "p"},
            "minReplicas": 1,
            "maxReplicas": 9,
            "scaleDownStabilization": "7m",
            "placeholder": {"cpu": "1"},
            "share": {"cpu": "20%"},
            "schedules": [
                {"name": "w", "start": "10 * * * *", "end": "25 * * * *", "desiredReplicas": 4}
            ],
        }
    )
    rng = np.random.default_rng(7)
    pods = rng.integers(0, 60, size=240)
    times = 1e9 + 60.0 * np.arange(pods.size)
    settings = resolve_settings(pool)
    fast = planner_strategy(pool, times, (), None, 0.0, settings, World(pods))[1]
    timeline = PoolTimeline(pool, times, None, None, (), settings)
    shares = share_parts(pool, pods, round(settings.delay / 60))
    slow = [timeline.plan(i, None, {"share": s} if s else {}).desired for i, s in enumerate(shares)]
    assert np.asarray(fast).tolist() == slow
    assert max(slow) == 9 and len(set(slow)) > 3  # the cap binds; the count moves
