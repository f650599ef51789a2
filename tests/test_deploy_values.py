"""One pool schema from Helm values to the policy file: the chart's values.schema.json is generated
from the policy models, `validate` reads values files, and the chart renders what they describe."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from deploy_render import CHART, REPO, render_chart
from test_deploy import BUFFER_CLUSTER_VALUES, GPU_VALUES, MULTI_VALUES

from predictive_headroom.cli import main
from predictive_headroom.policy.chart import values_schema, values_to_policy

helm = pytest.importorskip("helm_python", reason="needs helm-python-sdk")

VALUES = {"multi": MULTI_VALUES, "buffers": BUFFER_CLUSTER_VALUES, "gpu": GPU_VALUES}

PAUSE_DIGEST = "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"
"""The chart's default pause digest (registry.k8s.io/pause:3.10's image index)."""


def test_the_committed_schema_is_the_generated_one():
    committed = json.loads((CHART / "values.schema.json").read_text())
    assert committed == values_schema(), (
        "deploy/helm/predictive-headroom/values.schema.json is stale; regenerate it with `make schema`"
    )


def _policy_of(objects) -> dict:
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap"]
    return yaml.safe_load(cm["data"]["config.yaml"])


@pytest.mark.parametrize("name", sorted(VALUES))
def test_the_chart_copies_each_pool_into_the_policy_as_validate_reads_it(name):
    """The ConfigMap holds the values' pools as they are, targets filled in the way `validate`
    fills them: the chart and the Python model agree on every pool."""
    values = VALUES[name]
    rendered = _policy_of(render_chart(values))
    expected = values_to_policy(values, "predictive-headroom", "predictive-headroom")
    assert json.loads(json.dumps(rendered)) == json.loads(json.dumps(expected))


@pytest.mark.parametrize("name", sorted(VALUES))
def test_test_values_pass_validate(name, tmp_path, capsys):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(VALUES[name]))
    assert main(["validate", "--values", str(path)]) == 0, capsys.readouterr().err
    assert "ok (Helm values)" in capsys.readouterr().out


def test_the_chart_defaults_and_every_example_pass_validate(capsys):
    files = [
        CHART / "values.yaml",
        *sorted((REPO / "config").glob("*.yaml")),
        REPO / "deploy/kustomize/base/config.yaml",
        REPO / "deploy/kustomize/overlays/example/config.yaml",
        REPO / "deploy/kustomize/overlays/adopt/config.yaml",
        REPO / "predictive_headroom/data/demo.yaml",
    ]
    assert main(["validate", *map(str, files)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"{CHART / 'values.yaml'}: ok (Helm values): 1 pool(s)" in out
    assert out.count(": ok (") == len(files)


BAD_VALUES = """\
image: {repository: registry.example.com/ph, tag: dev}
pools:
  - name: web
    maxReplicas: 5
    schedules:
      - {name: day, timezone: Europe/Berln, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: 2}
    forecast:
      query: sum(rate(http_requests_total[5m])
      demandPerReplica: 50
"""


def test_a_bad_time_zone_and_unbalanced_promql_fail_validate_naming_both(tmp_path, capsys):
    path = tmp_path / "my-values.yaml"
    path.write_text(BAD_VALUES)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err
    assert (
        "line 6: pools[0].schedules[0].timezone: unknown IANA time zone 'Europe/Berln'; "
        "did you mean 'Europe/Berlin'?"
    ) in err
    assert "line 8: pools[0].forecast.query: not valid PromQL at column 4" in err
    assert "sum(rate(http_requests_total[5m])\n         ^" in err
    # Helm refuses the same values before anything reaches the cluster (the time zone by the
    # schema; PromQL, which no JSON schema can parse, is what `validate` is for).
    with pytest.raises(helm.HelmError, match="/pools/0/schedules/0/timezone"):
        render_chart(yaml.safe_load(BAD_VALUES))


@pytest.mark.slow
def test_validate_reads_stdin():
    result = subprocess.run(
        [sys.executable, "-m", "predictive_headroom", "validate", "-"],
        input=BAD_VALUES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "<stdin>: 2 problem(s)" in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "image: {tag: '1'}\ndryRn: true\n",
            "line 2: dryRn: unknown key 'dryRn'; did you mean 'dryRun'?",
        ),
        (
            "placeholder:\n  image: {tag: latest}\n",
            "line 2: placeholder.image.tag: 'latest' is not allowed here (a pinned tag",
        ),
        (
            "pools:\n  - name: web\n    maxReplicas: 3\n    resources: {cpu: 1}\n",
            "line 4: pools[0].resources: resources moved to placeholder.requests",
        ),
        (
            "priorityClass: {value: -20}\n",
            "line 1: priorityClass.value: -20 is below Cluster Autoscaler's "
            "--expendable-pods-priority-cutoff -10",
        ),
        (
            "pools:\n  - name: Web_1\n    maxReplicas: 3\n",
            "line 2: pools[0].name: pool name 'Web_1' must be a DNS label",
        ),
    ],
)
def test_values_problems_name_the_line_and_field(text, expected, tmp_path, capsys):
    path = tmp_path / "v.yaml"
    path.write_text(text)
    assert main(["validate", "--values", str(path)]) == 2
    assert expected in capsys.readouterr().err


def test_a_pool_without_target_in_a_policy_file_hints_at_values(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("pools:\n  - name: web\n    maxReplicas: 3\n")
    assert main(["validate", str(path)]) == 2
    assert "target may be left out: pass --values" in capsys.readouterr().err


def test_gpu_placeholders_render_as_users_run_them():
    objects = render_chart(GPU_VALUES)
    (deployment,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("placeholder-gpu")
    ]
    template = deployment["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {
            "cpu": "7",
            "memory": "28Gi",
            "nvidia.com/gpu": "1",
            "ephemeral-storage": "20Gi",
        },
        # A GPU cannot be overcommitted: its limit must equal the request, so the chart sets it.
        "limits": {"memory": "28Gi", "nvidia.com/gpu": "1"},
    }
    assert container["image"] == f"mirror.example.com:5000/pause:3.10@{PAUSE_DIGEST}"
    assert pod["imagePullSecrets"] == [{"name": "mirror-pull"}, {"name": "gpu-pull"}]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu"}
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",  # its own; the chart's default spread adds none
    ]
    # Still least privilege: no token, non-root, nothing writable.
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize(
    ("repository", "registry", "image"),
    [
        ("registry.k8s.io/pause", "", "registry.k8s.io/pause:3.10"),
        ("registry.k8s.io/pause", "mirror.local", "mirror.local/pause:3.10"),
        ("pause", "harbor.example.com/k8s-proxy", "harbor.example.com/k8s-proxy/pause:3.10"),
        ("mirror.example.com/infra/pause", "", "mirror.example.com/infra/pause:3.10"),
    ],
)
def test_the_registry_override_replaces_the_registry(repository, registry, image):
    values = {"placeholder": {"image": {"repository": repository, "registry": registry}}}
    image += f"@{PAUSE_DIGEST}"  # a mirror that copies the image index keeps its digest
    (container,) = [
        o["spec"]["template"]["spec"]["containers"][0]
        for o in render_chart(values)
        if o["kind"] == "Deployment" and "placeholder" in o["metadata"]["name"]
    ]
    assert container["image"] == image


def test_the_chart_starts_in_dry_run_as_the_docs_say():
    (daemon,) = [
        o
        for o in render_chart()
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == "daemon"
    ]
    env = {
        e["name"]: e.get("value")
        for e in daemon["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PH_DRY_RUN"] == "true"
    readme = (REPO / "deploy/README.md").read_text()
    assert "| `dryRun` | `true` |" in readme


def test_schema_is_plain_draft_07():
    schema = json.loads(Path(CHART / "values.schema.json").read_text())
    generated = json.dumps(schema["$defs"])
    assert '"prefixItems"' not in generated and '"title"' not in generated
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"


def _yaml_examples(path: Path) -> list[str]:
    """Every YAML example in a Markdown file that describes pools (```yaml blocks and heredocs)."""
    text = path.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    blocks += re.findall(r"cat > [\w.-]+ <<EOF\n(.*?)\nEOF", text, flags=re.S)
    return [b.replace("${GATEWAY}", "172.18.0.1") for b in blocks if "pools:" in b]


@pytest.mark.parametrize("doc", ["README.md", "deploy/README.md"])
def test_every_pool_example_in_the_docs_passes_validate(doc, tmp_path, capsys):
    examples = _yaml_examples(REPO / doc)
    assert examples, f"no pool examples found in {doc}"
    for i, example in enumerate(examples):
        path = tmp_path / f"example-{i}.yaml"
        path.write_text(example)
        assert main(["validate", str(path)]) == 0, f"{doc} example {i}:\n{capsys.readouterr().err}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pools: 3\n", "line 1: pools: Input should be a valid list (got 3)"),
        ("pools: [3]\n", "line 1: pools[0]: Input should be a valid dictionary"),
        (
            "pools: [{name: a, maxReplicas: 1, target: 5}]\n",
            "pools[0].target: Input should be a valid dictionary",
        ),
        ("image: 3\n", "line 1: image: 3 is not of type 'object'"),
    ],
)
def test_malformed_values_are_problems_not_crashes(text, expected, tmp_path, capsys):
    path = tmp_path / "v.yaml"
    path.write_text(text)
    assert main(["validate", "--values", str(path)]) == 2
    assert expected in capsys.readouterr().err


def test_make_render_with_bad_values_prints_helms_message_and_the_unit_hint_without_a_traceback(
    tmp_path,
):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - name: web\n    maxReplicas: 4\n    leadTime: 4\n")
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "deploy_render.py"),
            "--out",
            str(tmp_path / "rendered"),
            "-f",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert "at '/pools/0/leadTime': 'anyOf' failed" in done.stderr  # Helm's own message
    assert "line 4: pools[0].leadTime: " in done.stderr
    assert "4m or 4s" in done.stderr  # the policy loader's unit hint
    assert not (tmp_path / "rendered" / "helm.yaml").exists()
