"""Every count of a policy fits what Kubernetes stores (int32), and past it the field is named
(issue 64, item 6): `maxReplicas: 10^40` was accepted and planned with."""

from __future__ import annotations

import pytest

from predictive_headroom.cli import main
from predictive_headroom.policy.model import INT32_MAX

POOL = """\
pools:
  - name: api
    target: {{namespace: ns, name: api-placeholder}}
    maxReplicas: {max}
{extra}"""


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("", "pools[0].maxReplicas"),
        ("    minReplicas: {big}\n", "pools[0].minReplicas"),
        (
            '    schedules: [{{name: s, timezone: UTC, start: "0 8 * * *", end: "0 9 * * *", '
            "desiredReplicas: {big}}}]\n",
            "pools[0].schedules[0].desiredReplicas",
        ),
        (
            '    forecast: {{query: "up", demandPerReplica: 1, reserve: {big}}}\n',
            "pools[0].forecast.reserve",
        ),
        (
            "    proportional: {{linear: {{nodesPerReplica: 1, max: {big}}}}}\n",
            "pools[0].proportional.linear.max",
        ),
        (
            "    proportional: {{ladder: {{nodesToReplicas: [[0, 1], [10, {big}]]}}}}\n",
            "pools[0].proportional.ladder.nodesToReplicas[1][1]",
        ),
    ],
)
def test_a_count_beyond_int32_exits_2_from_validate_naming_the_field(
    tmp_path, capsys, extra, field
) -> None:
    big = 10**40
    first = "10000000000000000000000000000000000000000" if not extra else "10"
    path = tmp_path / "p.yaml"
    path.write_text(POOL.format(max=first, extra=extra.format(big=big)))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{field}: must be at most 2,147,483,647" in err, err
    assert "int32" in err


def test_the_largest_int32_count_is_accepted(tmp_path, capsys) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(POOL.format(max=INT32_MAX, extra=""))
    assert main(["validate", str(path)]) == 0


def test_the_charts_replica_count_is_bounded_the_same_way(tmp_path, capsys) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(f"replicaCount: {10**40}\n")
    assert main(["validate", "--values", str(values)]) == 2
    assert "replicaCount:" in capsys.readouterr().err
    values.write_text(f"replicaCount: {INT32_MAX}\n")
    assert main(["validate", "--values", str(values)]) == 0
