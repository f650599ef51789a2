"""Render the Helm chart and the kustomize manifests under deploy/ into lists of objects for tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from deploy_kustomize import render_kustomization

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "predictive-headroom"
KUSTOMIZE = REPO / "deploy" / "kustomize"
RELEASE = "predictive-headroom"
NAMESPACE = "predictive-headroom"

Object = dict[str, Any]


TEST_API_SERVER = "192.0.2.1/32"
"""The API server address offline renders give the chart (TEST-NET-1, documentation only): with no
cluster to look up the `kubernetes` endpoints in, the chart refuses to render its NetworkPolicy
unless `networkPolicy.apiServer.cidrs` (or `allowAny`) says where the API server is, as a user
rendering with `helm template` must."""


def render_chart(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    api_server: str | None = TEST_API_SERVER,
    kubeconfig: Path | None = None,
    is_upgrade: bool = False,
) -> list[Object]:
    """Render the chart with Helm's own engine (helm-python-sdk) and return its objects.

    Offline (no `kubeconfig`: `lookup` finds nothing, as in `helm template`), values that leave the
    API server's address open get `api_server` as `networkPolicy.apiServer.cidrs` (None: they keep
    it open, and the chart refuses them). With `kubeconfig`, rendered against that cluster as
    `helm install` (or `helm upgrade`) does: `lookup` reads live objects, nothing is written.
    Raises helm_python.HelmError with Helm's message when values or templates are rejected.
    """
    how = {"release": release, "namespace": namespace, "kubeconfig": kubeconfig}
    return objects_of(render_manifests(values, api_server=api_server, is_upgrade=is_upgrade, **how))


def objects_of(manifests: dict[str, str]) -> list[Object]:
    """The objects of rendered manifests (NOTES.txt and other text left out)."""
    objects: list[Object] = []
    for path, text in sorted(manifests.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def render_manifests(
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    api_server: str | None = TEST_API_SERVER,
    kubeconfig: Path | None = None,
    is_upgrade: bool = False,
) -> dict[str, str]:
    """Each file the chart renders (template path -> text, NOTES.txt included), as
    `render_chart` renders them."""
    import helm_python as helm

    how = {"name": release, "namespace": namespace}
    how |= {"is_upgrade": True} if is_upgrade else {"is_install": True}
    with helm.Chart.load(CHART) as chart:
        if kubeconfig is not None:
            with helm.Config(kubeconfig_path=kubeconfig, namespace=namespace) as config:
                manifests = config.render(chart, values or {}, **how)
        else:
            manifests = chart.render(with_api_server(values or {}, api_server), **how)
    return dict(manifests)


def with_api_server(values: dict[str, Any], api_server: str | None) -> dict[str, Any]:
    """`values` with `networkPolicy.apiServer.cidrs: [api_server]` when they name no API server
    address and do not allow any (unchanged when `api_server` is None)."""
    given = ((values.get("networkPolicy") or {}).get("apiServer")) or {}
    if api_server is None or given.get("cidrs") or given.get("allowAny"):
        return values
    policy = dict(values.get("networkPolicy") or {})
    policy["apiServer"] = {**given, "cidrs": [api_server]}
    return {**values, "networkPolicy": policy}


def render_kustomize(name: str) -> list[Object]:
    """Render deploy/kustomize/<name> (e.g. "base", "overlays/example")."""
    return render_kustomization(KUSTOMIZE / name)


def main(argv: list[str] | None = None) -> int:
    """`python tests/deploy_render.py [--out DIR] [-f VALUES]...`: write the chart's and the
    kustomize base's manifests as Helm and kustomize would, without either installed, and print
    the chart's NOTES as `helm install` does."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", default="rendered", help="directory to write (default rendered)")
    parser.add_argument("-f", "--values", action="append", default=[], help="a Helm values file")
    parser.add_argument(
        "--api-server",
        help="the API server's address as a CIDR (e.g. 172.18.0.2/32), which an offline render "
        "cannot look up; without it the values must set networkPolicy.apiServer",
    )
    args = parser.parse_args(argv)
    import helm_python as helm

    values: dict[str, Any] = {}
    for path in args.values:
        try:
            values.update(yaml.safe_load(Path(path).read_text()) or {})
        except (OSError, yaml.YAMLError) as exc:
            print(f"cannot read the values file {path}: {exc}", file=sys.stderr)
            return 2
    try:
        manifests = render_manifests(values, api_server=args.api_server)
        notes = next((t for p, t in manifests.items() if p.endswith("NOTES.txt")), "")
        rendered = (
            ("helm.yaml", objects_of(manifests)),
            ("kustomize-base.yaml", render_kustomize("base")),
        )
    except helm.HelmError as exc:
        print(f"Helm refused to render the chart:\n{str(exc).rstrip()}", file=sys.stderr)
        for line in _loader_problems(args.values):
            print(line, file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, objects in rendered:
        (out / name).write_text(yaml.safe_dump_all(objects, sort_keys=False))
        print(f"{out / name}: {len(objects)} objects")
    if notes.strip():  # what `helm install` prints after it: the chart's NOTES
        (out / "NOTES.txt").write_text(notes)
        print(f"{out / 'NOTES.txt'}: the chart's NOTES, as helm install prints them:\n")
        print(notes.strip("\n"))
    return 0


def _loader_problems(paths: list[str]) -> list[str]:
    """What `predictive-headroom validate --values` says of each values file (its line, field and
    a hint such as the unit a bare duration needs), as lines to print after Helm's message."""
    from predictive_headroom.policy.chart import DEFAULT_NAMESPACE, DEFAULT_RELEASE, values_problems
    from predictive_headroom.policy.load import ConfigError, read_yaml

    lines = []
    for path in paths:
        try:
            data, index = read_yaml(Path(path).read_text(), path)
            problems = values_problems(data, index, DEFAULT_RELEASE, DEFAULT_NAMESPACE)
        except ConfigError as exc:
            problems = exc.problems
        if problems:
            lines.append(f"predictive-headroom validate --values {path} says:")
            lines += [f"  - {p}" for p in problems]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
