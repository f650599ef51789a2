"""cluster-proportional-autoscaler's own unit tests, run against our CPA rules.

Each table is ported from kubernetes-sigs/cluster-proportional-autoscaler
(pkg/autoscaler/controller/{linear,ladder}controller/*_test.go): the same parameters, cluster
sizes and expected replicas, driven through our policy models (so parsing, defaults and sorting
are ours) and `core.proportional`. Parser cases go through `parse_policy`, as a pasted CPA
ConfigMap would.
"""

from __future__ import annotations

import json

import pytest

from predictive_headroom.core.proportional import (
    ladder_replicas,
    ladder_step,
    linear_replicas,
    proportional_floor,
)
from predictive_headroom.policy.config import Ladder, Linear, Proportional
from predictive_headroom.policy.load import ConfigError, parse_policy
from predictive_headroom.protocols import ClusterState


def _policy_with(mode: str, params_json: str) -> str:
    """A one-pool policy whose proportional rule is CPA's ConfigMap value, pasted as it is."""
    return (
        "pools:\n  - name: web\n    target: {namespace: ns, name: web}\n    maxReplicas: 500\n"
        f"    proportional:\n      {mode}: {params_json}\n"
    )


def _parses(mode: str, params_json: str) -> Proportional | None:
    try:
        pool = parse_policy(_policy_with(mode, params_json), "cpa.yaml").pools[0]
    except ConfigError:
        return None
    return pool.proportional


# --- linear_controller_test.go: TestControllerParser --------------------------------------------

LINEAR_PARSER = [
    (
        '{"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100,'
        ' "preventSinglePointFailure": true, "includeUnschedulableNodes": true}',
        (2, 1, 1, 100),
    ),
    # CPA's test means "includeUnschedulableNodes defaults to false" but its trailing comma makes
    # the text invalid JSON, so CPA rejects it. The policy file is YAML, whose flow mappings allow
    # a trailing comma: we accept it with the default the case was written for (the one
    # deliberate difference in this file).
    ('{"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100,}', (2, 1, 1, 100)),
    ('{ "coresPerReplica": {{ 1:1 } }', None),
    ('{ "coresPerReplica": "whatisthis"', None),
    ('{ "nodesPerReplica":  -20 }', None),
    ('{"nodesPerReplica": 1, "min": 100, "max": 50}', None),
    ('{"min": 1, "max": 100}', None),
    (
        '{"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100,'
        ' "preventSinglePointFailure": invalid}',
        None,
    ),
    (
        '{"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100,'
        ' "includeUnschedulableNodes": invalid}',
        None,
    ),
]


@pytest.mark.parametrize(("params", "expected"), LINEAR_PARSER)
def test_linear_parser(params, expected):
    rule = _parses("linear", params)
    if expected is None:
        assert rule is None, f"CPA rejects {params}, we accepted it"
        return
    assert rule is not None and rule.linear is not None, f"CPA accepts {params}, we rejected it"
    lin = rule.linear
    assert (lin.cores_per_replica, lin.nodes_per_replica, lin.min, lin.max) == expected


# --- TestScaleFromSingleParam: coresPerReplica 2, min 2, max 100 --------------------------------

SINGLE = [(0, 2), (1, 2), (2, 2), (3, 2), (4, 2), (6, 3), (6, 3), (10, 5), (11, 6), (19, 10)]
SINGLE += [(20, 10), (21, 11), (30, 15), (40, 20)]


@pytest.mark.parametrize(("cores", "expected"), SINGLE)
def test_linear_scale_from_single_param(cores, expected):
    params = Linear(coresPerReplica=2, min=2, max=100)
    assert linear_replicas(params, 0, cores) == expected


# --- TestScaleFromMultipleParams: 2 cores / 2.5 nodes per replica, min 1, max 100, HA ----------

MULTIPLE = [(0, 0, 1), (1, 2, 2), (2, 3, 2), (3, 4, 2), (4, 4, 2), (6, 4, 3), (6, 5, 3)]
MULTIPLE += [(8, 5, 4), (8, 15, 6), (8, 16, 7), (19, 21, 10), (23, 20, 12), (26, 38, 16)]
MULTIPLE += [(30, 49, 20), (40, 20, 20)]


@pytest.mark.parametrize(("cores", "nodes", "expected"), MULTIPLE)
def test_linear_scale_from_multiple_params(cores, nodes, expected):
    params = Linear(
        coresPerReplica=2, nodesPerReplica=2.5, min=1, max=100, preventSinglePointFailure=True
    )
    assert linear_replicas(params, nodes, cores) == expected


# --- TestScaleFromUnschedulableNodes (linear) ----------------------------------------------------
# (schedulable cores, schedulable nodes, total cores, total nodes, expected). CPA's test passes
# the node count as the total core count; so do we.

LINEAR_UNSCHEDULABLE = [
    (0, 0, 0, 0, 1),
    (1, 1, 1, 1, 1),
    (2, 2, 2, 2, 2),
    (4, 4, 4, 4, 2),
    (2, 2, 4, 4, 2),
    (8, 8, 8, 8, 4),
    (6, 6, 8, 8, 4),
    (21, 21, 210, 210, 100),
]


@pytest.mark.parametrize(("s_cores", "s_nodes", "cores", "nodes", "expected"), LINEAR_UNSCHEDULABLE)
def test_linear_scale_from_unschedulable_nodes(s_cores, s_nodes, cores, nodes, expected):
    rule = Proportional(
        linear=Linear(
            coresPerReplica=2,
            nodesPerReplica=2,
            min=1,
            max=100,
            preventSinglePointFailure=True,
            includeUnschedulableNodes=True,
        )
    )
    cluster = ClusterState(
        nodes=nodes, cores=nodes, schedulable_nodes=s_nodes, schedulable_cores=s_cores
    )
    assert proportional_floor(rule, cluster) == expected


# --- ladder_controller_test.go: TestControllerParser ----------------------------------------------

UNSORTED_CORES = [
    [0, 0],
    [1, 0],
    [2, 2],
    [3, 3],
    [512, 5],
    [1024, 7],
    [2048, 10],
    [4096, 15],
    [8192, 20],
    [12288, 30],
    [16384, 40],
    [20480, 50],
    [24576, 60],
    [28672, 70],
    [65535, 100],
    [32768, 80],
]

LADDER_PARSER = [
    ('{ "coresToReplicas" : [ [1,1] ] }', {"cores": [(1, 1)], "nodes": []}),
    ('{ "coresToReplicas" : {{ 1:1 } }', None),
    ('{ "coresToReplicas" : [[ "1, "a"]] }', None),
    ('{ "coresToReplicas" : [[:-200]] }', None),
    (
        json.dumps({"coresToReplicas": UNSORTED_CORES}),
        {"cores": sorted(map(tuple, UNSORTED_CORES))},
    ),
    (
        json.dumps(
            {
                "coresToReplicas": [[0, 0], [1, 0], [2, 2], [3, 3]],
                "nodesToReplicas": [[1, 1], [2, 2], [3, 3]],
                "includeUnschedulableNodes": True,
            }
        ),
        {"cores": [(0, 0), (1, 0), (2, 2), (3, 3)], "nodes": [(1, 1), (2, 2), (3, 3)]},
    ),
]


@pytest.mark.parametrize(("params", "expected"), LADDER_PARSER)
def test_ladder_parser(params, expected):
    rule = _parses("ladder", params)
    if expected is None:
        assert rule is None, f"CPA rejects {params}, we accepted it"
        return
    assert rule is not None and rule.ladder is not None, f"CPA accepts {params}, we rejected it"
    # CPA sorts the steps on load; its parser test compares before sorting, we compare after.
    assert rule.ladder.cores_to_replicas == expected["cores"]
    if "nodes" in expected:
        assert rule.ladder.nodes_to_replicas == expected["nodes"]


# --- TestControllerSorter ---------------------------------------------------------------------------

SORTED = [(1, 1), (2, 2), (3, 3), (512, 5), (1024, 7), (2048, 10), (4096, 15), (8192, 20)]
SORTED += [(12288, 30), (16384, 40), (20480, 50), (24576, 60), (28672, 70), (32768, 80)]
SORTED += [(65535, 100)]
SHUFFLED = [SORTED[i] for i in (1, 2, 3, 4, 10, 6, 5, 7, 14, 9, 8, 0, 11, 13, 12)]


@pytest.mark.parametrize("steps", [SHUFFLED, SORTED[::-1]], ids=["shuffled", "descending"])
def test_ladder_sorter(steps):
    assert Ladder(coresToReplicas=steps).cores_to_replicas == SORTED


# --- TestControllerScaler ----------------------------------------------------------------------------

SCALER_STEPS = [(1, 1), (2, 2), (3, 3), (4, 4), (10, 10), (20, 20)]
SCALER = [(0, 1), (1, 1), (2, 2), (3, 3), (4, 4), (6, 4), (6, 4), (10, 10), (11, 10), (19, 10)]
SCALER += [(20, 20), (21, 20), (21, 20), (40, 20)]


@pytest.mark.parametrize(("value", "expected"), SCALER)
def test_ladder_scaler(value, expected):
    assert ladder_step(Ladder(coresToReplicas=SCALER_STEPS).cores_to_replicas, value) == expected


# --- TestControllerScalerFromZero ---------------------------------------------------------------------

FROM_ZERO = [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3)]


@pytest.mark.parametrize("steps", [[(0, 0), (3, 3)], [(1, 0), (3, 3)]], ids=["from0", "from1"])
@pytest.mark.parametrize(("value", "expected"), FROM_ZERO)
def test_ladder_scaler_from_zero(steps, value, expected):
    assert ladder_replicas(Ladder(nodesToReplicas=steps), value, 0) == expected


# --- TestScaleFromUnschedulableNodes (ladder) --------------------------------------------------------


@pytest.mark.parametrize(
    ("include", "cluster", "expected"),
    [
        (True, ClusterState(nodes=3, cores=12, schedulable_nodes=2, schedulable_cores=8), 3),
        (False, ClusterState(nodes=3, cores=12, schedulable_nodes=1, schedulable_cores=4), 1),
    ],
)
def test_ladder_scale_from_unschedulable_nodes(include, cluster, expected):
    rule = Proportional(
        ladder=Ladder(
            coresToReplicas=[(0, 0), (4, 1), (8, 2), (12, 3)],
            nodesToReplicas=[(0, 0), (1, 1), (2, 2), (3, 3)],
            includeUnschedulableNodes=include,
        )
    )
    assert proportional_floor(rule, cluster) == expected
