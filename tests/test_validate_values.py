"""Helm values errors as friendly as policy errors; `validate` says which kind of file it read and
notes the defaults worth knowing (a window without `timezone` is UTC)."""

from __future__ import annotations

import pytest

from predictive_headroom.cli import main

POOL = "pools:\n  - name: web\n    target: {kind: Deployment, namespace: h, name: web}\n    maxReplicas: 3\n"


def _validate(tmp_path, capsys, text: str, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    code = main(["validate", *flags, str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "image:\n  tag: '1'\ndryrun: true\n",
            "line 3: dryrun: unknown key 'dryrun'; did you mean 'dryRun'?",
        ),
        (
            "networkPolicy:\n  enabled: true\n  apiServr: {}\n",
            "line 3: networkPolicy.apiServr: unknown key 'apiServr'; did you mean 'apiServer'?",
        ),
    ],
)
def test_an_unknown_values_key_is_named_on_its_own_line_with_did_you_mean(
    tmp_path, capsys, text, expected
):
    code, _, err = _validate(tmp_path, capsys, text)
    assert code == 2
    assert expected in err
    assert "Additional properties" not in err


@pytest.mark.parametrize(
    ("text", "kind", "why"),
    [
        (
            "dryRun: false\nallowedNamespaces: [h]\n" + POOL,
            "Helm values",
            "it has Helm values keys (dryRun, allowedNamespaces); --policy",
        ),
        (POOL, "policy", "its keys (pools) are none of the chart's settings"),
        (POOL + "cost: {currency: EUR}\n", "policy", "its keys (pools, cost)"),
    ],
)
def test_validate_says_which_kind_it_assumed(tmp_path, capsys, text, kind, why):
    code, out, _ = _validate(tmp_path, capsys, text)
    assert code == 0
    assert f"note: read as a {kind} file: {why}" in out


def test_a_policy_with_a_typo_is_read_as_a_policy(tmp_path, capsys):
    code, _, err = _validate(tmp_path, capsys, POOL + "cots: {currency: EUR}\n")
    assert code == 2
    assert "note: read as a policy file" in err
    assert "line 5: cots: unknown key 'cots'; did you mean 'cost'?" in err


def test_a_values_typo_of_a_chart_key_is_read_as_values(tmp_path, capsys):
    code, _, err = _validate(tmp_path, capsys, "dryrun: false\n" + POOL)
    assert code == 2
    assert "note: read as a Helm values file: it has Helm values keys (dryrun (like dryRun)" in err


def test_no_note_when_the_kind_is_given(tmp_path, capsys):
    code, out, _ = _validate(tmp_path, capsys, POOL, "--policy")
    assert code == 0 and "read as" not in out


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        ("10.0.0.10", "'10.0.0.10' is an address, not a CIDR block: write 10.0.0.10/32"),
        ("fd00::1", "'fd00::1' is an address, not a CIDR block: write fd00::1/128"),
        ("10.0.0.1/24", "'10.0.0.1/24' has host bits set: the block is 10.0.0.0/24"),
        ("10.0.0.0/33", "'10.0.0.0/33' is not a CIDR block such as 10.0.0.0/24"),
        ("apiserver", "'apiserver' is not a CIDR block such as 10.0.0.0/24"),
    ],
)
def test_cidrs_are_parsed(tmp_path, capsys, cidr, message):
    text = f"networkPolicy:\n  enabled: true\n  apiServer:\n    cidrs:\n      - {cidr}\n"
    code, _, err = _validate(tmp_path, capsys, text, "--values")
    assert code == 2
    assert f"line 5: networkPolicy.apiServer.cidrs[0]: {message}" in err
    assert err.count("networkPolicy.apiServer.cidrs[0]") == 1  # one message, not the schema's too


def test_peer_ip_blocks_are_parsed_too(tmp_path, capsys):
    text = (
        "networkPolicy:\n  ingressFrom:\n    - ipBlock: {cidr: 10.1.0.0/16, except: [10.1.2.3]}\n"
    )
    code, _, err = _validate(tmp_path, capsys, text, "--values")
    assert code == 2
    assert "networkPolicy.ingressFrom[0].ipBlock.except[0]: '10.1.2.3' is an address" in err


def test_good_cidrs_pass(tmp_path, capsys):
    text = "networkPolicy:\n  apiServer:\n    cidrs: [10.0.0.1/32, 172.16.0.0/12, 'fd00::/64']\n"
    code, out, _ = _validate(tmp_path, capsys, text, "--values")
    assert code == 0, out


def test_the_chart_refuses_a_bare_address_too():
    helm = pytest.importorskip("helm_python")
    from deploy_render import render_chart

    values = {"networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.10"]}}}
    with pytest.raises(helm.HelmError, match="cidrs"):
        render_chart(values)


def test_a_window_without_timezone_is_noted_as_utc(tmp_path, capsys):
    text = POOL + (
        "    schedules:\n"
        "      - {name: rush, start: '0 8 * * *', end: '0 9 * * *', desiredReplicas: 2}\n"
        "      - {name: eve, timezone: UTC, start: '0 18 * * *', end: '0 19 * * *', desiredReplicas: 1}\n"
    )
    code, out, _ = _validate(tmp_path, capsys, text)
    assert code == 0
    assert "note: pools[0].schedules[0] (rush) has no timezone, so its times are UTC" in out
    assert "schedules[1]" not in out


# --- the chart's security settings (issue 63) ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "prometheus:\n  url: http://prom:9090\n  bearerToken: {enabled: true}\n",
            "line 2: prometheus.url: Prometheus URL 'http://prom:9090' is plain http:// and a "
            "bearer token",
        ),
        (  # the chart's default URL is http:// too
            "dryRun: true\nprometheus:\n  bearerToken: {enabled: true}\n",
            "line 3: prometheus.bearerToken: Prometheus URL "
            "'http://prometheus-operated.monitoring.svc:9090' is plain http://",
        ),
        (
            "disruption:\n  readPods: true\n",
            "line 2: disruption.readPods: with readPods: true, list the namespaces",
        ),
        (
            "serviceMonitor:\n  enabled: true\n  token:\n    create: false\n",
            "line 4: serviceMonitor.token.create: with create: false, name the Secret",
        ),
    ],
)
def test_what_the_chart_refuses_for_security_validate_refuses_where_written(
    tmp_path, capsys, text, expected
):
    code, _, err = _validate(tmp_path, capsys, text, "--values")
    assert code == 2
    assert expected in err


@pytest.mark.parametrize(
    "text",
    [
        "prometheus:\n  url: http://prom:9090\n  bearerToken: {enabled: true}\n  insecure: true\n",
        "prometheus:\n  url: https://prom:9090\n  bearerToken: {enabled: true}\n",
        "disruption: {readPods: true, readPodsNamespaces: [web]}\n",
        "disruption: {readPods: true, readPodsClusterWide: true}\n",
        "serviceMonitor: {enabled: true, token: {create: false, secretName: mine}}\n",
    ],
)
def test_the_explicit_choices_pass(tmp_path, capsys, text):
    code, out, err = _validate(
        tmp_path, capsys, text + "image: {digest: sha256:" + "a" * 64 + "}\n"
    )
    assert code == 0, err
    assert "warning" not in out


def test_an_empty_image_digest_is_a_warning_that_says_how_to_get_one(tmp_path, capsys):
    code, out, _ = _validate(tmp_path, capsys, "allowedNamespaces: [h]\n" + POOL, "--values")
    assert code == 0  # it renders; pinning is the user's step after the build
    assert "1 warning(s)" in out
    assert "warning: image.digest: empty: the daemon image is pulled by tag" in out
    assert "docker inspect --format '{{index .RepoDigests 0}}' IMAGE:TAG" in out
    code, out, _ = _validate(tmp_path, capsys, "placeholder: {image: {digest: ''}}\n", "--values")
    assert "warning: placeholder.image.digest: empty: the pause image is pulled by tag" in out
    pinned = "image: {digest: sha256:" + "0" * 64 + "}\n"
    code, out, _ = _validate(tmp_path, capsys, pinned + "allowedNamespaces: [h]\n" + POOL)
    assert code == 0 and "warning" not in out
