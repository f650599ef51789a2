"""The `limits:` cap: the placeholders' total requests stay within the pool's limits, at every
instant the plan is made (plan, replay), on a CapacityBuffer's spec.limits, and bad input is
refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest
from fake_apiserver import FakeApiServer
from pydantic import ValidationError

from predictive_headroom.core.engine import PlanInputs, plan_over_time
from predictive_headroom.core.limits import limits_part
from predictive_headroom.core.planner import PlanRecord
from predictive_headroom.core.settings import resolve_settings
from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.planner import planner_strategy

NS = "apps"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")
GPU = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
T0 = 1_764_000_000.0
ALL_DAY = {"name": "all", "timezone": "UTC", "start": "0 0 * * *", "end": "0 23 * * *"}


def pool(limits: object = None, **overrides: object) -> Pool:
    spec: dict[str, object] = {
        "name": "gpu",
        "target": {"namespace": NS, "name": "gpu-placeholder"},
        "minReplicas": 1,
        "maxReplicas": 40,
        "placeholder": {"requests": GPU},
        "scaleDownStabilization": "30m",
    }
    if limits is not None:
        spec["limits"] = limits
    spec.update(overrides)
    return Pool.model_validate(spec)


@pytest.mark.parametrize(
    "limits, cap, by",
    [
        ({"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8}, 8, "nvidia.com/gpu"),
        ({"cpu": "64"}, 16, "cpu"),
        ({"cpu": "66"}, 16, "cpu"),  # the floor: 16.5 placeholders do not fit 17
        ({"memory": "1Ti"}, 64, "memory"),
        ({"cpu": "4000m"}, 1, "cpu"),
    ],
)
def test_the_cap_is_the_fewest_placeholders_any_limit_allows(limits, cap, by) -> None:
    p = pool(limits)
    part = limits_part(p.limits.amounts, p.placeholder.amounts)
    assert part is not None and (part.replicas, part.by) == (cap, by)


@pytest.mark.parametrize(
    "limits, field, words",
    [
        ({"ephemeral-storage": "10Gi"}, "limits.ephemeral-storage", "does not request"),
        ({"cpu": 0}, "limits.cpu", "allows no placeholder"),
        ({"cpu": "-4"}, "limits.cpu", "is negative"),
        ({"memory": "lots"}, "limits.memory", "not a Kubernetes quantity"),
        ({"nvidia.com/gpu": "0.5"}, "limits.nvidia.com/gpu", "fewer than minReplicas 1"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(limits, field, words) -> None:
    with pytest.raises(ValidationError) as err:
        pool(limits)
    assert field in str(err.value) and words in str(err.value)


def test_a_cap_below_min_replicas_names_both_values() -> None:
    with pytest.raises(ValidationError) as err:
        pool({"cpu": "8"}, minReplicas=3)
    message = str(err.value)
    assert "limits.cpu 8 allows 2 placeholders" in message and "minReplicas 3" in message


def plan_at(p: Pool, recent: tuple[PlanRecord, ...] = ()):
    inputs = PlanInputs(None, None, None, resolve_settings(p))
    return plan_over_time(p, [T0], inputs, recent).plans[0]


def test_the_limits_cap_holds_the_plan_and_says_so() -> None:
    window = {**ALL_DAY, "desiredReplicas": 30}
    capped = plan_at(pool({"nvidia.com/gpu": 8}, schedules=[window]))
    assert (capped.desired, capped.reason) == (8, "limits")
    assert capped.components["limits"] == 8 and capped.components["max"] == 40
    assert capped.details["limits_by"] == "nvidia.com/gpu"
    free = plan_at(pool({"nvidia.com/gpu": 32}, schedules=[window]))
    assert (free.desired, free.reason) == (30, "schedule:all")
    # maxReplicas and limits equal: the reason names maxReplicas, the first cap
    tie = plan_at(pool({"nvidia.com/gpu": 40}, schedules=[{**window, "desiredReplicas": 50}]))
    assert (tie.desired, tie.reason) == (40, "max")


def test_the_limits_cap_wins_over_the_scale_down_hold() -> None:
    held = plan_at(pool({"nvidia.com/gpu": 5}), (PlanRecord(T0 - 600, 12),))
    assert (held.desired, held.raw, held.reason) == (5, 1, "limits")
    within = plan_at(pool({"nvidia.com/gpu": 20}), (PlanRecord(T0 - 600, 12),))
    assert (within.desired, within.reason) == (12, "hold:scale-down-stabilization")


def test_the_replay_caps_every_minute_at_the_limits() -> None:
    window = {**ALL_DAY, "desiredReplicas": 30}
    p = pool({"nvidia.com/gpu": 6}, schedules=[window], minReplicas=0)
    times = T0 + 60.0 * np.arange(120)
    _, at_once = planner_strategy(p, times, (), None, 0.0, resolve_settings(p))
    assert isinstance(at_once, np.ndarray) and int(at_once.max()) == 6
    one_by_one = [plan_at_each(p, times, i) for i in range(0, 120, 37)]
    assert all(d <= 6 for d in one_by_one)


def plan_at_each(p: Pool, times: np.ndarray, i: int) -> int:
    inputs = PlanInputs(None, None, None, resolve_settings(p))
    return plan_over_time(p, times[: i + 1], inputs).plans[-1].desired


def buffer_pool(limits: object = None) -> Pool:
    target = {"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"}
    return pool(limits, target=target)


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_a_capacity_buffer_gets_the_pools_limits_as_its_spec_limits(version) -> None:
    with FakeApiServer(capacity_buffer_versions=(version,)) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 0)
        server.edit_capacity_buffer(NS, "gpu-buffer", {"spec": {"limits": {"cpu": "100"}}})
        actuator = TargetActuator(server.api_client(), FAST)
        actuator.scale(buffer_pool({"nvidia.com/gpu": 8, "memory": "256Gi"}), 3, "limits", False)
        spec = server.capacity_buffer(NS, "gpu-buffer")["spec"]
        assert spec["replicas"] == 3
        # exactly the pool's: the limit on cpu it does not set is removed
        assert spec["limits"] == {"nvidia.com/gpu": "8", "memory": "256Gi"}


def test_a_pool_without_limits_leaves_the_buffers_own_alone() -> None:
    with FakeApiServer(capacity_buffer_versions=("v1beta1",)) as server:
        server.add_capacity_buffer(NS, "gpu-buffer", 0)
        server.edit_capacity_buffer(NS, "gpu-buffer", {"spec": {"limits": {"cpu": "100"}}})
        TargetActuator(server.api_client(), FAST).scale(buffer_pool(), 2, "min", False)
        assert server.writes("/capacitybuffers/")[-1].body["spec"] == {"replicas": 2}
        assert server.capacity_buffer(NS, "gpu-buffer")["spec"]["limits"] == {"cpu": "100"}
