"""The docs a new user reads first: a short README whose links resolve, one exit-code table that
matches what the CLI returns, field names as `validate` accepts them, and `make render`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from predictive_headroom.policy.config import Cost

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    "README.md",
    "deploy/README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
]


def test_readme_is_short_and_the_benchmarks_live_in_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 300
    assert "| dataset |" not in readme  # the benchmark tables
    assert "| dataset |" in (REPO / "docs/benchmarks.md").read_text()
    assert "docs/benchmarks.md" in readme


def test_one_exit_code_table():
    readme = (REPO / "README.md").read_text()
    assert readme.count("| exit code |") == 1
    assert "Exit codes:" not in readme  # the two paragraphs that differed
    table = re.search(r"\| exit code \|.*?\n\n", readme, flags=re.S)
    assert table is not None
    codes = re.findall(r"^\| `(\d+)` \|", table.group(0), flags=re.M)
    assert codes == ["0", "1", "2", "130"]


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    path = REPO / doc
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{doc} links to {target}, which does not exist"


@pytest.mark.parametrize("doc", DOCS)
def test_cost_keys_in_the_docs_are_the_ones_validate_accepts(doc):
    accepted = {f.alias or name for name, f in Cost.model_fields.items()}
    named = set(re.findall(r"\bcostPer\w+", (REPO / doc).read_text()))
    assert named <= accepted, (
        f"{doc} names {sorted(named - accepted)}; validate accepts {sorted(accepted)}"
    )


def test_the_timezone_default_is_said_where_keda_windows_are_described():
    readme = (REPO / "README.md").read_text()
    windows = readme[readme.index("**Windows (KEDA cron):**") :][:1200]
    assert "without `timezone` is in UTC" in windows


@pytest.mark.slow
def test_make_render_writes_the_chart_and_kustomize_offline(tmp_path):
    pytest.importorskip("helm_python")
    out = subprocess.run(
        ["make", "-s", "render", f"RENDERED={tmp_path}", "API_SERVER=192.0.2.1/32"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    helm = (tmp_path / "helm.yaml").read_text()
    assert "kind: Deployment" in helm and "replicas: 0" in helm
    assert (tmp_path / "kustomize-base.yaml").read_text().count("kind: ") > 5
