"""The quota cap (issue 65 item 4): the arithmetic of the room the namespace's ResourceQuotas
leave the placeholders (scopes, the pods count, what the pool's own placeholders already use),
`plan --quota-room`, and `validate` refusing a `quota:` it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from predictive_headroom import cli
from predictive_headroom.core.components import read_caps, registration
from predictive_headroom.core.context import QuotaRoom, QuotaSeen
from predictive_headroom.core.quota import applies, quota_part
from predictive_headroom.policy.config import Pool

GI = 2.0**30
NS = "headroom"
REQUEST = {"cpu": 1.0, "memory": 2 * GI}


def quota_pool(**extra: object) -> dict:
    return {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 20,
        "leadTime": "5m",
        "placeholder": {"requests": {"cpu": "1", "memory": "2Gi"}},
        **extra,
    }


def write_policy(path: Path, **extra: object) -> Path:
    path.write_text(yaml.safe_dump({"pools": [quota_pool(**extra)]}, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("hard", "used", "own", "cap", "by"),
    [
        ({"requests.cpu": 10.0}, {"requests.cpu": 7.0}, 0, 3, "compute: requests.cpu"),
        # the pool's own 2 placeholders are counted in `used`: their room is theirs again
        ({"requests.cpu": 10.0}, {"requests.cpu": 7.0}, 2, 5, "compute: requests.cpu"),
        ({"cpu": 10.0, "memory": 8 * GI}, {}, 0, 4, "compute: memory"),  # 8Gi / 2Gi
        ({"pods": 6.0, "requests.cpu": 100.0}, {"pods": 4.0}, 1, 3, "compute: pods"),
        ({"count/pods": 2.0}, {}, 0, 2, "compute: count/pods"),
        # used beyond hard (the quota lowered): none fit, never fewer than none
        ({"requests.cpu": 4.0}, {"requests.cpu": 9.0}, 0, 0, "compute: requests.cpu"),
        # 1.5 cores left hold one 1-core placeholder, not two
        ({"requests.cpu": 2.5}, {"requests.cpu": 1.0}, 0, 1, "compute: requests.cpu"),
    ],
)
def test_the_room_is_hard_minus_used_plus_what_the_pool_uses(hard, used, own, cap, by) -> None:
    part = quota_part(QuotaRoom((QuotaSeen("compute", hard, used),), own=own), REQUEST)
    assert part is not None and (part.replicas, part.by) == (cap, by)
    assert part.to_details()["quota_by"] == by


def test_resources_the_placeholder_does_not_use_set_no_cap() -> None:
    room = QuotaRoom((QuotaSeen("objects", {"services": 1.0, "requests.nvidia.com/gpu": 0.0}),))
    assert quota_part(room, REQUEST) is None
    gpu = QuotaRoom((QuotaSeen("gpus", {"requests.nvidia.com/gpu": 4.0}, {}),))
    part = quota_part(gpu, {**REQUEST, "nvidia.com/gpu": 2.0})
    assert part is not None and part.replicas == 2 and part.by == "gpus: requests.nvidia.com/gpu"


def test_limits_quotas_count_the_placeholders_limits() -> None:
    room = QuotaRoom((QuotaSeen("lim", {"limits.memory": 10 * GI}),))
    part = quota_part(room, REQUEST, {"memory": 5 * GI})
    assert part is not None and part.replicas == 2
    # without limits given, a placeholder's limits are its requests
    assert quota_part(room, REQUEST).replicas == 5  # type: ignore[union-attr]


def test_the_smallest_room_of_every_applying_quota_names_the_cap() -> None:
    room = QuotaRoom(
        (
            QuotaSeen("team", {"requests.cpu": 20.0, "pods": 50.0}, {"pods": 10.0}),
            QuotaSeen("mem", {"requests.memory": 12 * GI}, {"requests.memory": 4 * GI}),
        )
    )
    part = quota_part(room, REQUEST)
    assert part is not None and part.replicas == 4 and part.by == "mem: requests.memory"
    assert part.fit == {"team: requests.cpu": 20, "team: pods": 40, "mem: requests.memory": 4}


@pytest.mark.parametrize(
    ("scopes", "selector", "priority_class", "counted"),
    [
        ((), (), "ph", True),
        (("NotBestEffort",), (), "ph", True),  # a placeholder requests something
        (("BestEffort",), (), "ph", False),
        (("Terminating",), (), "ph", False),  # no activeDeadlineSeconds
        (("NotTerminating",), (), "ph", True),
        ((), (("PriorityClass", "In", ("ph", "low")),), "ph", True),
        ((), (("PriorityClass", "In", ("high",)),), "ph", False),
        ((), (("PriorityClass", "NotIn", ("high",)),), "ph", True),
        ((), (("PriorityClass", "Exists", ()),), "ph", True),
        ((), (("PriorityClass", "In", ("ph",)),), None, False),  # not known: not applied
        ((), (("BestEffort", "DoesNotExist", ()),), "ph", True),
        (("NotBestEffort",), (("PriorityClass", "In", ("high",)),), "ph", False),  # all must hold
    ],
)
def test_quota_scopes_decide_whether_it_counts_the_placeholders(
    scopes, selector, priority_class, counted
) -> None:
    quota = QuotaSeen("q", {"pods": 1.0}, {}, scopes, selector)
    assert applies(quota, priority_class) is counted
    part = quota_part(QuotaRoom((quota,), priority_class=priority_class), REQUEST)
    assert (part is not None) is counted


def test_a_best_effort_placeholder_is_counted_by_best_effort_quotas_only() -> None:
    quota = QuotaSeen("be", {"pods": 3.0}, {}, ("BestEffort",))
    assert applies(quota, None, best_effort=True)
    assert quota_part(QuotaRoom((quota,)), {}).replicas == 3  # type: ignore[union-attr]


def test_the_cap_is_on_for_deployments_by_default_off_with_ignore_and_not_replayed() -> None:
    quota = registration("quota")
    assert quota.enabled(Pool.model_validate(quota_pool()))
    assert not quota.enabled(Pool.model_validate(quota_pool(quota="ignore")))
    # a replay never gives the quotas, so the cap does not make it plan instant by instant
    assert read_caps(Pool.model_validate(quota_pool())) == []


def test_plan_with_quota_room_caps_the_plan_and_names_the_quota(tmp_path, capsys) -> None:
    config = write_policy(tmp_path / "p.yaml", minReplicas=8)
    args = ["plan", "-c", str(config), "--at", "2026-01-01T00:00:00Z", "-o", "json"]
    assert cli.main([*args, "--quota-room", "cpu=8,memory=32Gi,pods=3"]) == 0
    [pool] = json.loads(capsys.readouterr().out)["pools"]
    assert pool["desired_replicas"] == 3 and pool["reason"] == "quota"
    assert pool["components"]["quota"] == 3
    assert pool["details"]["quota_by"] == "--quota-room: pods"
    assert cli.main([*args, "--quota-room", "cpu=8,memory=32Gi,pods=3", "-o", "table"]) == 0
    assert "the quota cap holds 3 placeholders (--quota-room: pods sets it)" in (
        capsys.readouterr().out
    )
    assert cli.main(args) == 0  # no room given: no cap
    [pool] = json.loads(capsys.readouterr().out)["pools"]
    assert pool["desired_replicas"] == 8 and "quota" not in pool["components"]
    assert cli.main([*args, "--quota-room", "cpu"]) == 2
    assert "--quota-room: 'cpu' is not resource=quantity" in capsys.readouterr().err


def test_plan_with_quota_ignore_reads_no_room(tmp_path, capsys) -> None:
    config = write_policy(tmp_path / "p.yaml", minReplicas=8, quota="ignore")
    args = ["plan", "-c", str(config), "--at", "2026-01-01T00:00:00Z", "-o", "json"]
    assert cli.main([*args, "--quota-room", "pods=3"]) == 0
    [pool] = json.loads(capsys.readouterr().out)["pools"]
    assert pool["desired_replicas"] == 8 and "quota" not in pool["components"]


def test_validate_refuses_a_quota_setting_naming_the_field(tmp_path, capsys) -> None:
    config = write_policy(tmp_path / "p.yaml", quota="respected")
    assert cli.main(["validate", str(config)]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    assert "quota" in text and "'respect'" in text and "'ignore'" in text, text


def test_the_pages_know_the_cap_from_the_registry_alone() -> None:
    from predictive_headroom.pages.glossary import GLOSSARY
    from predictive_headroom.report.html import REASON_COLOURS

    assert REASON_COLOURS["quota"] == registration("quota").colour
    assert "ResourceQuotas" in GLOSSARY["quota"]
