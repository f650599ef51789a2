"""Units that cannot be misread: a duration needs its unit, a share is `95%` or `0.95`.

`leadTime: 4` once meant 4 seconds without a word; now every place that reads a duration (policy
and Helm values fields, CLI options, the chart's own duration settings) refuses a bare number
and suggests both readings, and every place that reads a share refuses `95` and suggests `95%`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from predictive_headroom.cli import main
from predictive_headroom.policy.durations import parse_duration
from predictive_headroom.policy.shares import parse_share

POOL = """\
pools:
  - name: web
    target: {kind: Deployment, namespace: headroom, name: web}
    maxReplicas: 5
"""
FORECAST = "    forecast: {query: up, demandPerReplica: 5}\n"


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("6h", 21600),
        ("28d", 28 * 86400),
        ("1h30m", 5400),
        (0, 0),
        ("0", 0),
    ],
)
def test_durations_with_a_unit(given, seconds):
    assert parse_duration(given) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("given", "shown"), [(4, "4"), ("4", "4"), (" 4 ", "4"), (2.5, "2.5"), ("300", "300")]
)
def test_a_bare_number_is_refused_with_both_readings(given, shown):
    with pytest.raises(ValueError, match=f"did you mean {shown}m or {shown}s"):
        parse_duration(given)


@pytest.mark.parametrize(
    ("given", "share"), [("95%", 0.95), ("0.95", 0.95), (0.95, 0.95), ("99.9%", 0.999), (1, 1.0)]
)
def test_shares(given, share):
    assert parse_share(given) == pytest.approx(share)


@pytest.mark.parametrize("given", [95, "95", 95.5])
def test_95_suggests_95_percent(given):
    with pytest.raises(ValueError, match=r"did you mean 95(\.5)?%\?"):
        parse_share(given)


def _validate(tmp_path, capsys, text: str, *flags: str) -> tuple[int, str]:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    code = main(["validate", *flags, str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("    leadTime: 4\n", "pools[0].leadTime: 4 has no unit: did you mean 4m or 4s?"),
        ("    scaleDownStabilization: '30'\n", "pools[0].scaleDownStabilization: 30 has no unit"),
        (
            "    forecast: {query: up, demandPerReplica: 5, step: 300}\n",
            "pools[0].forecast.step: 300 has no unit: did you mean 300m or 300s?",
        ),
        (
            "    forecast: {query: up, demandPerReplica: 5, observationDelay: 60}\n",
            "pools[0].forecast.observationDelay: 60 has no unit",
        ),
        (
            "    protection: 95\n" + FORECAST,
            "pools[0].protection: 95 is not a protection: did you mean 95%?",
        ),
        (
            "    forecast: {query: up, demandPerReplica: 5, burstQuantile: 95}\n",
            "pools[0].forecast.burstQuantile: 95 is not a quantile: did you mean 95%?",
        ),
    ],
)
def test_validate_names_the_misread_unit_on_its_line(tmp_path, capsys, field, line):
    code, out = _validate(tmp_path, capsys, POOL + field)
    assert code == 2
    assert f"line 5: {line}" in out


@pytest.mark.parametrize(
    "field",
    [
        "    leadTime: 4m\n",
        "    protection: 95%\n" + FORECAST,
        "    protection: 0.95\n" + FORECAST,
        "    forecast: {query: up, demandPerReplica: 5, burstQuantile: 90%}\n",
    ],
)
def test_validate_accepts_units_and_percentages(tmp_path, capsys, field):
    code, out = _validate(tmp_path, capsys, POOL + field)
    assert (code, "ok (policy)") == (0, out[out.index("ok") : out.index("ok") + 11])


def test_helm_values_durations_need_units_too(tmp_path, capsys):
    text = "serviceMonitor:\n  interval: '30'\npools:\n  - name: general\n    maxReplicas: 3\n    leadTime: 4\n"
    code, out = _validate(tmp_path, capsys, text, "--values")
    assert code == 2
    assert "line 2: serviceMonitor.interval: '30' does not match" in out
    assert "a Prometheus duration with its unit" in out
    assert "line 6: pools[0].leadTime: 4 has no unit: did you mean 4m or 4s?" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["plan", "--config", "config/minimal.yaml", "--step", "4"],
            "--step: 4 has no unit: did you mean 4m or 4s?",
        ),
        (
            ["plan", "--config", "config/minimal.yaml", "--horizon", "24"],
            "--horizon: 24 has no unit",
        ),
        (["size", "--fraction", "90"], "--fraction: 90 is not a share: did you mean 90%?"),
    ],
)
def test_cli_options_refuse_bare_numbers(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--protection", "95"], "--protection: 95 is not a protection: did you mean 95%?"),
        (["--dial", "0.9,95"], "--dial: 95 is not a quantile: did you mean 95%?"),
        (
            ["--stabilization-dial", "5m,15"],
            "--stabilization-dial: '15' is not a duration: 15 has no unit",
        ),
    ],
)
def test_backtest_lists_refuse_bare_numbers(tmp_path, argv, message, capsys):
    data = tmp_path / "d.csv"
    data.write_text("timestamp,value\n2026-01-01T00:00:00Z,1\n")
    assert main(["backtest", "--data", str(data), *argv]) == 2
    assert message in capsys.readouterr().err


# Issue 63 item 2: a resource amount without a unit where a bare number cannot be meant.
SHAPED = POOL.replace("    maxReplicas: 5\n", "    maxReplicas: 5\n    placeholder:\n")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            SHAPED + "      memory: 64\n",
            "line 6: pools[0].placeholder.memory: 64 has no unit, so it is 64 bytes: "
            "did you mean 64Gi?",
        ),
        (
            SHAPED + "      memory: 512\n",
            "line 6: pools[0].placeholder.memory: 512 has no unit, so it is 512 bytes: "
            "did you mean 512Mi?",
        ),
        (
            SHAPED + "      requests: {memory: 64}\n",
            "line 6: pools[0].placeholder.requests.memory: 64 has no unit, so it is 64 bytes",
        ),
        (
            SHAPED + "      cpu: 2000\n",
            "line 6: pools[0].placeholder.cpu: 2000 has no unit, so it is 2000 cores: "
            "did you mean 2000m?",
        ),
        (
            SHAPED + "      limits: {memory: 100}\n",
            "line 6: pools[0].placeholder.limits.memory: 100 has no unit",
        ),
        (
            POOL + "    limits: {memory: 256}\n",
            "line 5: pools[0].limits: limits.memory: 256 has no unit, so it is 256 bytes: "
            "did you mean 256Gi?",
        ),
        (
            POOL + "cost: {nodeCpu: 4, nodeMemory: 64}\n",
            "line 5: cost.nodeMemory: 64 has no unit, so it is 64 bytes: did you mean 64Gi?",
        ),
        (
            POOL + "cost: {nodeCpu: 4000, nodeMemory: 64Gi}\n",
            "line 5: cost.nodeCpu: 4000 cores is no node: did you mean 4?",
        ),
    ],
)
def test_a_resource_amount_that_cannot_be_meant_is_refused_once_where_it_was_written(
    tmp_path, capsys, text, line
):
    code, out = _validate(tmp_path, capsys, text)
    assert code == 2
    assert line in out, out
    assert "1 problem(s)" in out, out  # once, under the field written, not also under its twin


@pytest.mark.parametrize("written", ["memory: 1GB", "requests: {memory: 1GB}"])
def test_a_bad_quantity_is_reported_once_under_the_field_written(tmp_path, capsys, written):
    code, out = _validate(tmp_path, capsys, SHAPED + f"      {written}\n")
    assert code == 2
    field = "requests.memory" if "requests" in written else "memory"
    assert f"pools[0].placeholder.{field}: '1GB' is not a Kubernetes quantity" in out, out
    assert "1 problem(s)" in out, out


@pytest.mark.parametrize(
    "field",
    [
        "      memory: 1073741824\n",  # bytes, written out: a real amount
        "      memory: 512Ki\n",  # a unit: taken as written
        "      cpu: 4000m\n",
        "      cpu: 64\n",
        "      requests: {memory: 0, nvidia.com/gpu: 2000}\n",  # a count: no unit to miss
    ],
)
def test_amounts_with_units_or_that_may_be_meant_load(tmp_path, capsys, field):
    code, out = _validate(tmp_path, capsys, SHAPED + field)
    assert code == 0, out


def test_helm_values_daemon_resources_need_units(tmp_path, capsys):
    text = "resources:\n  requests: {cpu: 100m, memory: 256}\ntmpSizeLimit: 512\n"
    code, out = _validate(tmp_path, capsys, text, "--values")
    assert code == 2
    assert "line 2: resources.requests.memory: 256 has no unit" in out
    assert "did you mean 256Mi?" in out
    assert "line 3: tmpSizeLimit: 512 has no unit" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--node-cpu", "4", "--node-memory", "64"],
            "--node-memory: 64 has no unit, so it is 64 bytes: did you mean 64Gi?",
        ),
        (["--node-cpu", "4000", "--node-memory", "64Gi"], "--node-cpu: 4000 cores is no node"),
    ],
)
def test_cli_node_shape_and_requests_need_units(capsys, flags, message):
    try:
        code = main(["plan", "--config", "config/minimal.yaml", "--nodes", "3", *flags])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_size_app_pod_needs_units(capsys):
    assert main(["size", "--from-file", "x.json", "--app-pod", "cpu=1,memory=512"]) == 2
    assert "--app-pod memory=512: 512 has no unit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("placeholder", "path"),
    [
        ({"memory": 64}, "/pools/0/placeholder/memory"),
        ({"requests": {"memory": 64}}, "/pools/0/placeholder/requests/memory"),
        ({"cpu": 2000}, "/pools/0/placeholder/cpu"),
    ],
)
def test_the_chart_refuses_them_too(placeholder, path):
    """`helm install` checks the chart's schema, generated from the same models: a bare amount
    that cannot be meant fails the render at its field (`validate --values` says what was meant)."""
    helm = pytest.importorskip("helm_python", reason="needs helm-python-sdk")
    from deploy_render import render_chart

    pool = {"name": "general", "maxReplicas": 3, "placeholder": placeholder}
    with pytest.raises(helm.HelmError) as exc:
        render_chart({"pools": [pool]})
    assert f"at '{path}': 'not' failed" in str(exc.value)
    render_chart({"pools": [{**pool, "placeholder": {"memory": "64Gi", "cpu": "2000m"}}]})
