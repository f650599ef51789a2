"""Dry-run holds nothing: each placeholder Deployment starts at its pool's minReplicas, and a
Helm upgrade keeps the count the daemon chose (rendered by Helm's own engine, offline)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_render import CHART, TEST_API_SERVER, render_chart, render_kustomize, with_api_server

helm = pytest.importorskip("helm_python", reason="needs helm-python-sdk")

LOOKUP = 'lookup "apps/v1" "Deployment" .namespace .name'


def _replicas(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        o["metadata"]["name"].rsplit("-", 1)[-1]: o["spec"].get("replicas", "left out (1)")
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "placeholder"
    }


def _pools(*pools: dict[str, Any]) -> dict[str, Any]:
    return {"pools": [{"maxReplicas": 4, **p} for p in pools]}


def test_install_starts_every_placeholder_at_its_pools_min_replicas():
    objects = render_chart(_pools({"name": "gpu"}, {"name": "general", "minReplicas": 2}))
    assert _replicas(objects) == {"gpu": 0, "general": 2}


def test_default_chart_holds_no_placeholder_on_install():
    assert _replicas(render_chart()) == {"general": 0}


def _render_with_live(tmp_path: Path, live: str, *, is_upgrade: bool) -> dict[str, Any]:
    """Render a copy of the chart whose `lookup` of a placeholder answers `live` (a template
    expression), as it does against a cluster; helm-python-sdk's own lookup answers nothing."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    helpers = chart / "templates" / "_helpers.tpl"
    text = helpers.read_text()
    assert LOOKUP in text, "the placeholder's replicas no longer come from a lookup"
    helpers.write_text(text.replace(LOOKUP, live))
    with helm.Chart.load(chart) as loaded:
        manifests = loaded.render(
            with_api_server(
                _pools({"name": "gpu"}, {"name": "general", "minReplicas": 1}), TEST_API_SERVER
            ),
            name="predictive-headroom",
            namespace="predictive-headroom",
            is_install=not is_upgrade,
            is_upgrade=is_upgrade,
        )
    objects = [
        d
        for path, text in manifests.items()
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]
    return _replicas(objects)


def test_upgrade_keeps_the_live_count_the_daemon_chose(tmp_path):
    live = 'dict "spec" (dict "replicas" 7)'
    assert _render_with_live(tmp_path, live, is_upgrade=True) == {"gpu": 7, "general": 7}


def test_upgrade_adding_a_pool_starts_it_at_min_replicas(tmp_path):
    assert _render_with_live(tmp_path, "dict", is_upgrade=True) == {"gpu": 0, "general": 1}


@pytest.mark.parametrize("name", ["base", "overlays/example"])
def test_kustomize_placeholders_start_at_min_replicas(name):
    objects = render_kustomize(name)
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o["data"]]
    pools = yaml.safe_load(config["data"]["config.yaml"])["pools"]
    want = {p["name"]: p.get("minReplicas", 0) for p in pools}
    assert _replicas(objects) == want
