"""`validate` starts with only what it runs (issue 63): 8-16 s of wall for 1 s of CPU on a loaded
2-core machine was the import of numpy, the whole kubernetes client (for one pure function,
`parse_quantity`), the Prometheus source's HTTP libraries and the settings loader. Each command
imports the libraries it uses; `validate` uses none of those."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from kubernetes.utils import parse_quantity as kubernetes_parse_quantity

from predictive_headroom.policy.units import parse_quantity

REPO = Path(__file__).resolve().parents[1]
NOT_FOR_VALIDATE = ("numpy", "kubernetes", "requests", "urllib3", "pydantic_settings", "tqdm")


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "config/example.yaml"],
        ["validate", "--values", "deploy/helm/predictive-headroom/values.yaml"],
    ],
    ids=["policy", "values"],
)
def test_validate_imports_none_of_the_other_commands_libraries(args):
    code = (
        "import sys\n"
        "from predictive_headroom.cli import main\n"
        f"assert main({args!r}) == 0\n"
        "print('modules:', *sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("modules:")]
    loaded = set(line.split()[1:])
    assert "pydantic" in loaded and "predictive_headroom" in loaded  # what it does need
    assert not loaded & set(NOT_FOR_VALIDATE), sorted(loaded & set(NOT_FOR_VALIDATE))


@pytest.mark.parametrize(
    "text", ["500m", "2", "1Gi", "1.5", "64", "1e3", "2k", "512Ki", "0", ".5", "1E", "100M"]
)
def test_the_quantity_parser_is_the_kubernetes_clients_own(text):
    assert parse_quantity(text) == kubernetes_parse_quantity(text)
    assert isinstance(parse_quantity(text), Decimal)


@pytest.mark.parametrize("text", ["1GB", "abc", "", "1.2.3"])
def test_what_the_kubernetes_client_refuses_is_refused(text):
    with pytest.raises(ValueError):
        kubernetes_parse_quantity(text)
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_an_error_of_a_module_the_command_imported_is_an_input_error(tmp_path, capsys):
    """`cli._handle` catches the errors of the modules a command loaded (a missing --data CSV
    is a SourceError: exit code 2 with its message, no traceback)."""
    from predictive_headroom.cli import main

    missing = tmp_path / "none.csv"
    assert main(["forecast", "-c", "config/example.yaml", "--data", str(missing)]) == 2
    assert "file not found" in capsys.readouterr().err
