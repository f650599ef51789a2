"""CPA arithmetic, table-driven like CPA's own controller tests."""

import pytest

from predictive_headroom.core.proportional import (
    ladder_replicas,
    linear_replicas,
    proportional_floor,
)
from predictive_headroom.policy.config import Ladder, Linear, Proportional
from predictive_headroom.protocols import ClusterState


@pytest.mark.parametrize(
    "params, nodes, cores, expected",
    [
        ({"coresPerReplica": 2, "nodesPerReplica": 1}, 1, 2, 1),
        ({"coresPerReplica": 2, "nodesPerReplica": 1}, 3, 4, 3),  # nodes win
        ({"coresPerReplica": 2, "nodesPerReplica": 4}, 3, 9, 5),  # ceil(9/2) cores win
        ({"coresPerReplica": 256, "nodesPerReplica": 16}, 100, 400, 7),  # ceil(100/16)
        ({"nodesPerReplica": 8}, 17, 1000, 3),  # cores omitted
        ({"coresPerReplica": 64}, 100, 65, 2),  # nodes omitted
        ({"coresPerReplica": 64, "min": 3}, 1, 1, 3),  # min
        ({"coresPerReplica": 1, "max": 5}, 10, 100, 5),  # max
        ({"nodesPerReplica": 10, "preventSinglePointFailure": True}, 2, 8, 2),  # HA
        ({"nodesPerReplica": 10, "preventSinglePointFailure": True}, 1, 8, 1),  # one node: no HA
        # CPA's edge rules (its controller code; no upstream test covers them):
        (
            {"nodesPerReplica": 10, "preventSinglePointFailure": True, "max": 1},
            5,
            8,
            2,
        ),  # HA after max
        ({"nodesPerReplica": 10}, 0, 0, 1),  # min omitted is 1
        ({"nodesPerReplica": 10, "min": 0}, 0, 0, 0),  # an explicit 0 is kept (see README)
        ({"nodesPerReplica": 1, "max": 0}, 500, 0, 500),  # max 0: no cap
        ({"coresPerReplica": 0, "nodesPerReplica": 4}, 8, 1000, 2),  # divisor 0: unset
        ({"coresPerReplica": 4, "nodesPerReplica": 0}, 100, 8, 2),
    ],
)
def test_linear(params, nodes, cores, expected):
    assert linear_replicas(Linear(**params), nodes, cores) == expected


LADDER = {
    "coresToReplicas": [[1, 1], [64, 3], [512, 5], [1024, 7]],
    "nodesToReplicas": [[1, 1], [2, 2]],
}


@pytest.mark.parametrize(
    "params, nodes, cores, expected",
    [
        (LADDER, 1, 1, 1),
        (LADDER, 2, 1, 2),  # nodes ladder wins
        (LADDER, 2, 64, 3),  # threshold reached exactly
        (LADDER, 2, 63, 2),
        (LADDER, 10, 600, 5),  # largest threshold not above the value
        (LADDER, 10, 5000, 7),
        ({"nodesToReplicas": [[1, 0], [5, 2]]}, 3, 0, 0),  # a ladder may yield 0
        (
            {"nodesToReplicas": [[2, 4], [5, 6]]},
            1,
            0,
            4,
        ),  # below the first threshold: first step (CPA)
        ({"coresToReplicas": [[0, 1], [8, 3]]}, 0, 0, 1),
        ({"nodesToReplicas": [[5, 2], [1, 1], [10, 4]]}, 7, 0, 2),  # any order: sorted on load
        ({"nodesToReplicas": [[10, 4], [5, 2], [1, 1]]}, 0, 0, 1),  # below the smallest threshold
    ],
)
def test_ladder(params, nodes, cores, expected):
    assert ladder_replicas(Ladder(**params), nodes, cores) == expected


@pytest.mark.parametrize(
    "include_unschedulable, expected",
    [(False, 2), (True, 3)],  # 12 nodes / 5 per replica vs 10 schedulable
)
def test_unschedulable_nodes_count_only_when_asked(include_unschedulable, expected):
    rule = Proportional(
        linear=Linear(nodesPerReplica=5, includeUnschedulableNodes=include_unschedulable)
    )
    cluster = ClusterState(nodes=12, cores=48, schedulable_nodes=10, schedulable_cores=40)
    assert proportional_floor(rule, cluster) == expected


def test_label_selector_text():
    rule = Proportional(
        linear=Linear(nodesPerReplica=1), nodeSelector={"pool": "spot", "arch": "arm64"}
    )
    assert rule.label_selector == "arch=arm64,pool=spot"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"coresPerReplica": 0, "nodesPerReplica": 0}, "set coresPerReplica or nodesPerReplica"),
        ({"nodesPerReplica": 1, "min": 5, "max": 3}, "min 5 is greater than max 3"),
        ({"nodesPerReplica": -1}, "greater than or equal to 0"),
    ],
)
def test_linear_rejects(params, message):
    with pytest.raises(ValueError, match=message):
        Linear(**params)


def test_ladder_rejects_a_repeated_threshold():
    # CPA sorts with an unstable sort, so which of two equal thresholds wins is undefined there.
    with pytest.raises(ValueError, match="threshold 5 appears twice"):
        Ladder(nodesToReplicas=[[1, 1], [5, 2], [5, 3]])
