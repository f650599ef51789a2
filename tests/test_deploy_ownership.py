"""Issue 45 item 1, in the chart and in `validate`: targets only in the release namespace and in
`allowedNamespaces`, never in kube-system; Roles only there."""

from __future__ import annotations

import helm_python as helm
import pytest
import yaml
from deploy_render import NAMESPACE, render_chart

from predictive_headroom.cli import main


def _pool(namespace: str, name: str = "web", target: str = "web-placeholder") -> dict:
    return {"name": name, "maxReplicas": 3, "target": {"namespace": namespace, "name": target}}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"pools": [_pool("kube-system", target="coredns")]},
            'pools[0].target.namespace: "kube-system" is refused',
        ),
        (
            {"pools": [{"name": "a", "maxReplicas": 1}, _pool("team-b", target="payments-api")]},
            'pools[1].target.namespace: "team-b" is not in allowedNamespaces (allowed: '
            f"{NAMESPACE}, the release namespace first)",
        ),
        (
            {"allowedNamespaces": ["kube-system"], "pools": [_pool("kube-system")]},
            "allowedNamespaces",
        ),
    ],
)
def test_the_chart_refuses_targets_outside_the_allowed_namespaces(values, message) -> None:
    with pytest.raises(helm.HelmError) as exc:
        render_chart(values)
    assert message in str(exc.value)


def test_roles_and_placeholders_are_rendered_only_in_the_allowed_namespaces() -> None:
    values = {
        "allowedNamespaces": ["workloads", "unused"],
        "pools": [{"name": "general", "maxReplicas": 2}, _pool("workloads", "spot", "spot-ph")],
    }
    objects = render_chart(values)
    roles = {o["metadata"]["namespace"] for o in objects if o["kind"] == "Role"}
    assert roles == {NAMESPACE, "workloads"}  # "unused" has no target: no Role there
    deployments = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "Deployment"
    }
    assert ("workloads", "spot-ph") in deployments
    placeholder = next(o for o in objects if o["metadata"]["name"] == "spot-ph")
    assert placeholder["metadata"]["labels"]["predictive-headroom.io/pool"] == "spot"


def _validate(tmp_path, capsys, values: dict) -> tuple[int, str]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    code = main(["validate", "--values", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_validate_says_the_same_before_install(tmp_path, capsys) -> None:
    code, said = _validate(tmp_path, capsys, {"pools": [_pool("team-b", target="payments-api")]})
    assert code == 2
    assert "line 5: pools[0].target.namespace: 'team-b' is not in allowedNamespaces" in said
    code, said = _validate(tmp_path, capsys, {"pools": [_pool("kube-system", target="coredns")]})
    assert code == 2 and "targets in kube-system are refused" in said
    allowed = {"allowedNamespaces": ["team-b"], "pools": [_pool("team-b", target="payments-api")]}
    code, said = _validate(tmp_path, capsys, allowed)
    assert code == 0, said
