"""Issue 54 item 1, in the chart, the kustomize overlay and `validate --values`: a pool's
placeholder declared existing (`placeholder.existing: true`) renders no Deployment, only the rights
on its name; the chart and `validate` say which label to put on it; `priorityClass` can name an
existing class; what an existing placeholder cannot mean fails the render naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from deploy_render import (
    CHART,
    NAMESPACE,
    RELEASE,
    TEST_API_SERVER,
    render_chart,
    render_kustomize,
    with_api_server,
)

from predictive_headroom.cli import main
from predictive_headroom.policy.load import parse_policy

helm = pytest.importorskip("helm_python", reason="needs helm-python-sdk")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

NAME = "overprov-cluster-overprovisioner-default"
LABEL_COMMAND = f"kubectl label deployment -n overprov {NAME} predictive-headroom.io/pool=web"
ADOPT_VALUES: dict[str, Any] = {
    "allowedNamespaces": ["overprov"],
    "priorityClass": {"create": False, "name": "overprovisioning"},
    "pools": [
        {
            "name": "web",
            "maxReplicas": 40,
            "target": {"namespace": "overprov", "name": NAME},
            "placeholder": {"existing": True, "requests": {"cpu": "1000m", "memory": "1000Mi"}},
        },
        {"name": "general", "maxReplicas": 5},
    ],
}


def _with_pool(**changes: Any) -> dict[str, Any]:
    values = copy.deepcopy(ADOPT_VALUES)
    values["pools"][0].update(changes)
    return values


def _notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(
            with_api_server(values, TEST_API_SERVER),
            name=RELEASE,
            namespace=NAMESPACE,
            is_install=True,
        )
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def test_an_existing_placeholder_gets_rbac_on_its_name_and_no_deployment():
    objects = render_chart(ADOPT_VALUES)
    deployments = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "Deployment"}  # fmt: skip
    assert ("overprov", NAME) not in deployments  # no second Deployment of that name
    assert (NAMESPACE, f"{RELEASE}-placeholder-general") in deployments  # the other pool's
    assert not [o for o in objects if o["kind"] == "PriorityClass"]  # the existing class is used
    general = next(o for o in objects if o["metadata"]["name"] == f"{RELEASE}-placeholder-general")
    assert general["spec"]["template"]["spec"]["priorityClassName"] == "overprovisioning"
    (role,) = [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["namespace"] == "overprov"
    ]
    by_resource = {r["resources"][0]: r for r in role["rules"]}
    assert by_resource["deployments/scale"]["resourceNames"] == [NAME]
    assert by_resource["deployments"]["resourceNames"] == [NAME]
    assert by_resource["deployments"]["verbs"] == ["get", "list", "watch"]  # never a write
    (classes,) = [o for o in objects if o["metadata"]["name"].endswith("-priorityclass") and o["kind"] == "ClusterRole"]  # fmt: skip
    assert classes["rules"] == [
        {
            "apiGroups": ["scheduling.k8s.io"],
            "resources": ["priorityclasses"],
            "resourceNames": ["overprovisioning"],
            "verbs": ["get", "list", "watch"],  # a watch of that one class (issue 64)
        }
    ]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.30.0", strict=True)
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    policy = parse_policy(cm["data"]["config.yaml"])
    assert policy.pools[0].placeholder.existing and policy.pools[0].target.name == NAME


def test_no_priority_class_rule_without_an_existing_placeholder():
    objects = render_chart({"pools": [{"name": "general", "maxReplicas": 5}]})
    assert not [o for o in objects if o["metadata"]["name"].endswith("-priorityclass")]


def test_the_notes_say_which_label_to_put_on_it():
    notes = _notes(ADOPT_VALUES)
    assert LABEL_COMMAND in notes
    assert f"Pool web adopts the existing Deployment overprov/{NAME}" in notes
    assert "Pool general adopts" not in notes


def test_validate_says_the_same(tmp_path, capsys):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(ADOPT_VALUES, sort_keys=False))
    assert main(["validate", "--values", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"pools[0] (web) adopts the existing Deployment overprov/{NAME}" in out
    assert LABEL_COMMAND in out


BAD = [
    (
        "a CapacityBuffer target",
        _with_pool(target={"kind": "CapacityBuffer", "namespace": "overprov", "name": "buf"}),
        "pools[0].placeholder.existing: existing: true adopts a placeholder Deployment, and the "
        "target is a CapacityBuffer",
    ),
    (
        "no target name",
        _with_pool(target={"namespace": "overprov"}),
        "pools[0].placeholder.existing: existing: true needs target.name",
    ),
    (
        "a node selector it would ignore",
        _with_pool(placeholder={"existing": True, "nodeSelector": {"pool": "spot"}}),
        "pools[0].placeholder.nodeSelector: nodeSelector is ignored with existing: true",
    ),
    (
        "limits it would ignore",
        _with_pool(placeholder={"existing": True, "limits": {"memory": "2Gi"}}),
        "pools[0].placeholder.limits: limits is ignored with existing: true",
    ),
    (
        "spread it would ignore",
        _with_pool(placeholder={"existing": True, "spread": {"mode": "none"}}),
        "pools[0].placeholder.spread: spread is ignored with existing: true",
    ),
]


@pytest.mark.parametrize(("case", "values", "message"), BAD, ids=[c[0] for c in BAD])
def test_what_an_existing_placeholder_cannot_mean_fails_the_render_and_validate(
    case, values, message, tmp_path, capsys
):
    with pytest.raises(helm.HelmError) as exc:
        render_chart(values)
    assert message in str(exc.value), str(exc.value)
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    assert main(["validate", "--values", str(path)]) == 2
    said = capsys.readouterr().err
    field, _, words = message.partition(": ")
    assert field in said and words.split(":")[0] in said, said


def test_an_existing_priority_class_must_be_named(tmp_path, capsys):
    said = "priorityClass.name: with priorityClass.create: false, name the existing"
    with pytest.raises(helm.HelmError) as exc:
        render_chart({"priorityClass": {"create": False}})
    assert said in str(exc.value)
    path = tmp_path / "values.yaml"
    path.write_text("priorityClass:\n  create: false\n")
    assert main(["validate", "--values", str(path)]) == 2
    assert f"line 1: {said}" in capsys.readouterr().err


def test_the_kustomize_adopt_overlay_renders_no_placeholder_and_names_the_existing_one():
    objects = render_kustomize("overlays/adopt")
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("Deployment", "predictive-headroom-placeholder-general") not in names
    assert ("PriorityClass", "predictive-headroom-placeholder") not in names
    (role,) = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("-targets")]  # fmt: skip
    for rule in role["rules"][:2]:
        assert rule["resourceNames"] == [NAME]
    (classes,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-priorityclass")]  # fmt: skip
    assert classes["rules"][0]["resourceNames"] == ["overprovisioning"]
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    policy = parse_policy(cm["data"]["config.yaml"])
    (pool,) = policy.pools
    assert pool.placeholder.existing and (pool.target.namespace, pool.target.name) == (
        "overprov",
        NAME,
    )
    assert role["metadata"]["namespace"] == "overprov"
    for obj in objects:
        kubernetes_validate.validate(obj, "1.30.0", strict=True)
