"""`predictive-headroom size`: placeholder requests from the nodes and their DaemonSets."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from fake_apiserver import FakeApiServer, Recorded

from predictive_headroom.cli import main
from predictive_headroom.commands import size
from predictive_headroom.core.sizing import app_pods_per_placeholder, node_shapes, pod_requests
from predictive_headroom.policy.placeholder import Placeholder

FIXTURE = Path(__file__).parent / "data" / "kubectl_nodes_pods.json"
ITEMS = json.loads(FIXTURE.read_text())["items"]


def _by_name(shapes):
    return {s.name: s for s in shapes}


def test_each_shape_gets_a_fraction_of_what_its_heaviest_daemonsets_leave():
    shapes = _by_name(node_shapes(ITEMS))
    assert sorted(shapes) == ["c5.2xlarge", "g5.2xlarge", "m5.xlarge"]
    m5 = shapes["m5.xlarge"]
    # m5-b carries kube-proxy (100m, 128Mi), aws-node (its 200m init container outweighs the
    # 25m container; 64Mi) and fluent-bit (250m, 320Mi): 550m and 512Mi; the cordoned node and
    # the app pod on m5-a do not count.
    assert m5.nodes == ["m5-a", "m5-b"]
    assert m5.daemonsets["cpu"] == Decimal("0.55")
    assert m5.daemonsets["memory"] == 512 * 2**20
    assert m5.placeholder == {"cpu": "3033m", "memory": "12950Mi"}  # 0.9 x (3920m - 550m), ...
    # A Failed DaemonSet pod holds nothing.
    assert shapes["c5.2xlarge"].placeholder == {"cpu": "6849m", "memory": "13003Mi"}
    # A GPU is counted in whole devices: the placeholder takes the free one, not 0.9 of it; the
    # device plugin's pod overhead counts.
    assert shapes["g5.2xlarge"].placeholder == {
        "cpu": "6795m",
        "memory": "26539Mi",
        "nvidia.com/gpu": "1",
    }


def test_the_suggestion_is_a_valid_placeholder_that_fits():
    for shape in node_shapes(ITEMS, {"karpenter.sh/nodepool": "gpu"}):
        placeholder = Placeholder(requests=shape.placeholder)
        assert placeholder.pod_limits() == {"nvidia.com/gpu": "1"}
        free_cpu = shape.allocatable["cpu"] - shape.daemonsets["cpu"]
        assert Decimal(placeholder.cpu_cores) <= free_cpu


@pytest.mark.parametrize(
    ("fraction", "cpu"),
    [(1.0, "3370m"), (0.5, "1685m"), (0.9, "3033m")],
)
def test_fraction(fraction, cpu):
    (m5,) = node_shapes(ITEMS, {"node.kubernetes.io/instance-type": "m5.xlarge"}, fraction)
    assert m5.placeholder["cpu"] == cpu


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5])
def test_bad_fraction(fraction):
    with pytest.raises(ValueError, match="must be above 0 and at most 1"):
        node_shapes(ITEMS, fraction=fraction)


def test_pod_requests_follow_the_scheduler():
    pod = {
        "spec": {
            "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}, {}],
            "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "10Mi"}}}],
            "overhead": {"cpu": "50m"},
        }
    }
    assert pod_requests(pod) == {"cpu": Decimal("1.05"), "memory": Decimal(2**30)}


def test_app_pods_per_placeholder():
    room = {"cpu": "3033m", "memory": "12950Mi"}
    assert app_pods_per_placeholder(room, {"cpu": "500m", "memory": "1Gi"}) == 6
    assert app_pods_per_placeholder(room, {"memory": "4Gi"}) == 3


def test_cli_prints_values_to_paste_and_demand_per_replica(capsys):
    code = main(
        [
            "size",
            "--from-file",
            str(FIXTURE),
            "-l",
            "karpenter.sh/nodepool=general",
            "--app-pod",
            "cpu=500m,memory=1Gi",
            "--demand-per-pod",
            "40",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "requests: {cpu: 3033m, memory: 12950Mi}" in out
    assert "forecast.demandPerReplica: 240  (6 app pods fit in one placeholder)" in out
    assert "g5.2xlarge" not in out


def test_cli_json_and_a_pool_from_a_values_file(tmp_path, capsys):
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "pools": [
                    {
                        "name": "gpu",
                        "maxReplicas": 2,
                        "placeholder": {"nodeSelector": {"karpenter.sh/nodepool": "gpu"}},
                    }
                ]
            }
        )
    )
    args = ["size", "--from-file", str(FIXTURE), "--config", str(values), "--pool", "gpu"]
    assert main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["selector"] == {"karpenter.sh/nodepool": "gpu"}
    (shape,) = doc["shapes"]
    assert shape["placeholder_requests"]["nvidia.com/gpu"] == "1"
    assert shape["free_pod_slots"] == 110 - 3  # kube-proxy, aws-node, the device plugin


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-l", "nodepool"], "--selector 'nodepool': expected key=value pairs"),
        (["-l", "karpenter.sh/nodepool=none"], "no schedulable nodes with labels"),
        (["--fraction", "0"], "--fraction: fraction 0.0 must be above 0 and at most 1"),
        (["--demand-per-pod", "3"], "--demand-per-pod needs --app-pod"),
        (["--pool", "web"], "--pool and --config go together"),
    ],
)
def test_cli_errors(args, message, capsys):
    assert main(["size", "--from-file", str(FIXTURE), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("given", ["0.9", "90%"])
def test_fraction_is_a_share_or_a_percentage(given, capsys):
    assert main(["size", "--from-file", str(FIXTURE), "--fraction", given, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["fraction"] == pytest.approx(0.9)


def test_fraction_90_suggests_90_percent(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["size", "--from-file", str(FIXTURE), "--fraction", "90"])
    assert exit_.value.code == 2
    assert "did you mean 90%?" in capsys.readouterr().err


def test_cli_reads_a_file_that_is_not_json(tmp_path, capsys):
    bad = tmp_path / "nodes.yaml"
    bad.write_text("items: []\n")
    assert main(["size", "--from-file", str(bad)]) == 2
    assert "kubectl get nodes,pods -A -o json" in capsys.readouterr().err


def _use_kubeconfig(tmp_path: Path, server: FakeApiServer, monkeypatch) -> None:
    """Point KUBECONFIG at `server`, outside a pod."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "me", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                "current-context": "fake",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_cli_reads_the_cluster_through_the_kubeconfig(tmp_path, monkeypatch, capsys):
    with FakeApiServer() as server:
        for name in ("n1", "n2"):
            server.add_node(
                name,
                cpu="4",
                labels={"node.kubernetes.io/instance-type": "m6i.xlarge", "pool": "web"},
                allocatable={"memory": "15Gi"},
            )
            server.add_pod(
                "kube-system", f"kube-proxy-{name}", name, {"cpu": "100m", "memory": "128Mi"}
            )
        server.add_node("other", cpu="16", labels={"pool": "batch"})
        server.add_pod("web", "app-1", "n1", {"cpu": "2", "memory": "8Gi"}, owner_kind="ReplicaSet")
        _use_kubeconfig(tmp_path, server, monkeypatch)
        assert main(["size", "-l", "pool=web", "-o", "json"]) == 0
        listed = [r.path for r in server.requests("GET")]
    (shape,) = json.loads(capsys.readouterr().out)["shapes"]
    assert shape["shape"] == "m6i.xlarge" and shape["nodes"] == 2
    # 0.9 x (4 - 0.1) CPU and 0.9 x (15Gi - 128Mi)
    assert shape["placeholder_requests"] == {"cpu": "3510m", "memory": "13708Mi"}
    assert any(p.startswith("/api/v1/nodes") for p in listed)
    assert any(p.startswith("/api/v1/pods") for p in listed)


EXPIRED = "The provided continue parameter is too old to display a consistent list result."


def _continued(request: Recorded) -> bool:
    return bool(request.query.get("continue"))


def test_an_expired_continue_token_restarts_the_lists_and_every_node_and_pod_counts_once(
    tmp_path, monkeypatch, capsys, caplog
):
    """`size` lists through the package's pager: a 410 Gone on a later page (the continue token
    expired) restarts the list from the beginning, so no page is counted twice."""
    monkeypatch.setattr(size, "PAGE_SIZE", 2)
    with FakeApiServer() as server:
        for i in range(5):
            server.add_node(
                f"n{i}", cpu="4", labels={"pool": "web"}, allocatable={"memory": "15Gi"}
            )
            server.add_pod(
                "kube-system", f"kube-proxy-{i}", f"n{i}", {"cpu": "100m", "memory": "128Mi"}
            )
        server.fail("GET", r"^/api/v1/nodes$", 410, message=EXPIRED, when=_continued)
        server.fail("GET", r"^/api/v1/pods$", 410, message=EXPIRED, when=_continued)
        _use_kubeconfig(tmp_path, server, monkeypatch)
        with caplog.at_level(logging.WARNING):
            assert main(["size", "-l", "pool=web", "-o", "json"]) == 0
        lists = {
            path: [r.query for r in server.requests("GET", path)]
            for path in ("/api/v1/nodes", "/api/v1/pods")
        }
    (shape,) = json.loads(capsys.readouterr().out)["shapes"]
    assert shape["nodes"] == 5 and shape["daemonset_pods"] == 1
    # 0.9 x (4 - 0.1) CPU and 0.9 x (15Gi - 128Mi): each kube-proxy counted once
    assert shape["placeholder_requests"] == {"cpu": "3510m", "memory": "13708Mi"}
    for queries in lists.values():
        # the first page, the next one answered 410, then the whole list in one request
        assert [q.get("continue", "") for q in queries] == ["", "2", ""]
        assert queries[0]["limit"] == "2" and "limit" not in queries[-1]
    expired = [r for r in caplog.records if "continue token expired (410 Gone)" in r.getMessage()]
    assert len(expired) == 2


def test_a_refused_list_says_what_size_needs(tmp_path, monkeypatch, capsys):
    with FakeApiServer() as server:
        server.add_node("n1", cpu="4", labels={"pool": "web"})
        server.fail("GET", r"^/api/v1/pods$", 403, message="pods is forbidden", times=None)
        _use_kubeconfig(tmp_path, server, monkeypatch)
        assert main(["size", "-l", "pool=web"]) == 2
        asked = len(server.requests("GET", "/api/v1/pods"))
    err = capsys.readouterr().err
    assert "refused to list nodes or pods (403 pods is forbidden)" in err
    assert "needs get/list on nodes and pods, or use --from-file" in err
    assert asked == 1  # a refusal is not asked again


def test_cli_reports_every_problem_of_the_pool_file(tmp_path, capsys):
    bad = tmp_path / "values.yaml"
    bad.write_text("image: {tag: 1}\npools: [{name: gpu, maxReplicas: -1}]\n")
    assert main(["size", "--from-file", str(FIXTURE), "--config", str(bad), "--pool", "gpu"]) == 2
    err = capsys.readouterr().err
    assert "image.tag" in err and "pools[0].maxReplicas" in err


def test_mixed_shapes_get_per_shape_pools_and_gpu_is_never_merged(capsys):
    assert main(["size", "--from-file", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "take the smallest suggestion" not in out
    assert "nodeSelector: {node.kubernetes.io/instance-type: g5.2xlarge}" in out
    assert "nodeSelector: {node.kubernetes.io/instance-type: m5.xlarge}" in out
    (shared,) = [line for line in out.splitlines() if "in one pool: requests:" in line]
    assert "general-purpose shapes (c5.2xlarge, m5.xlarge)" in shared
    assert "{cpu: 3033m, memory: 12950Mi}" in shared  # the smaller of each: fits c5 and m5
    assert "g5.2xlarge" not in shared and "nvidia.com/gpu" not in shared
    assert "accelerator shapes (g5.2xlarge): a pool each, never merged" in out


def test_mixed_shapes_in_json(capsys):
    assert main(["size", "--from-file", str(FIXTURE), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["general_shared_requests"] == {"cpu": "3033m", "memory": "12950Mi"}
    assert {s["shape"]: s["accelerator"] for s in out["shapes"]} == {
        "c5.2xlarge": False,
        "g5.2xlarge": True,
        "m5.xlarge": False,
    }


def test_one_shape_gets_no_mixed_advice(capsys):
    one = "node.kubernetes.io/instance-type=m5.xlarge"
    assert main(["size", "--from-file", str(FIXTURE), "-l", one]) == 0
    out = capsys.readouterr().out
    assert "shapes and a pool's placeholders" not in out and "nodeSelector" not in out


@pytest.mark.parametrize("name", ["my-values.yaml", "nodes.json"])
def test_the_hint_never_overwrites_the_file_given(tmp_path, name, capsys):
    given = tmp_path / name
    given.write_text("dryRun: true\n")
    assert main(["size", "--from-file", str(given)]) == 2
    err = capsys.readouterr().err
    assert "kubectl get nodes,pods -A -o json > nodes.json" in err
    assert f"> {given}" not in err and f"> {name}" not in err.replace("> nodes.json", "")
