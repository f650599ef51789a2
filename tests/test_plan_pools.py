"""`plan` with per-pool node counts (issue 49 item 4): `--nodes gpu=3` gives one pool its own
count; a pool whose rule counts only its nodeSelector's nodes says when it ran on the totals."""

import json

import pytest

from predictive_headroom.cli import main

POLICY = """
pools:
  - name: web
    target: {namespace: headroom, name: web-placeholder}
    maxReplicas: 50
    proportional:
      linear: {coresPerReplica: 64, nodesPerReplica: 4}
  - name: gpu
    target: {namespace: headroom, name: gpu-placeholder}
    maxReplicas: 20
    placeholder: {nodeSelector: {pool: gpu}}
    proportional:
      nodeSelector: {pool: gpu}
      linear: {nodesPerReplica: 2}
"""
AT = ["--at", "2026-11-27T00:00:00Z", "-o", "json"]


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def planned(capsys, config, *flags):
    assert main(["plan", "-c", config, *flags, *AT]) == 0
    captured = capsys.readouterr()
    pools = json.loads(captured.out)["pools"]
    return {p["name"]: p["components"].get("proportional") for p in pools}, captured.err


def test_a_pools_own_count_is_what_its_rule_counts(config, capsys):
    counts, err = planned(capsys, config, "--nodes", "14", "--cores", "224", "--nodes", "gpu=3")
    # web: max(ceil(224/64), ceil(14/4)) = 4 on the totals; gpu: ceil(3/2) = 2 on its own 3 nodes.
    assert counts == {"web": 4, "gpu": 2}
    assert "totals" not in err


def test_a_selector_pool_on_the_totals_says_so(config, capsys):
    counts, err = planned(capsys, config, "--nodes", "14", "--cores", "224")
    assert counts == {"web": 4, "gpu": 7}
    assert (
        "note: pool gpu's proportional rule counts the nodes labelled pool=gpu, but ran on the "
        "totals given (14 nodes, 224 cores); pass --nodes gpu=N"
    ) in err
    assert "pool web" not in err  # web counts every node: the totals are its own


def test_every_pool_its_own(config, capsys):
    counts, _ = planned(
        capsys, config, "--nodes", "web=8", "--cores", "web=512", "--nodes", "gpu=6"
    )
    assert counts == {"web": 8, "gpu": 3}


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--nodes", "gpo=3"], "no pool named 'gpo'; pools: web, gpu"),
        (
            ["--nodes", "web=14", "--nodes", "gpu=3"],
            "pool 'web' counts cores in its proportional rule; pass --cores web=C",
        ),
        (["--nodes", "3", "--nodes", "4"], "--nodes given twice for every pool"),
        (["--nodes", "gpu=2.5"], "a node count is a whole number"),
        (
            ["--nodes", "14", "--cores", "224", "--cores", "gpu=48"],
            "--cores gpu= needs --nodes gpu=N",
        ),
    ],
)
def test_a_bad_per_pool_count_exits_2_naming_it(config, capsys, flags, words):
    assert main(["plan", "-c", config, *flags]) == 2
    assert words in capsys.readouterr().err
