"""What a new user reads in the CLI: an example in every `--help`, the burst allowance in
words, and a comment when MAPE and MASE disagree."""

from __future__ import annotations

import logging
import math
import shlex
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from predictive_headroom.cli import COMMANDS, build_parser
from predictive_headroom.commands.plan_text import burst_text, rounded
from predictive_headroom.core.planner import Plan
from predictive_headroom.pages.format import accuracy_comment


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_ends_with_an_example_that_parses(name, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args([name, "--help"])
    text = capsys.readouterr().out
    example = text[text.index("\nexample:\n") :]
    commands = [
        part.split("#")[0].strip()
        for line in example.splitlines()[2:]
        for part in line.replace("|", ";").split(";")
        if part.strip().startswith("predictive-headroom ")
    ]
    assert commands and all(c.split()[1] == name for c in commands), example
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])  # exits 2 on a bad example
        assert args.command == name


def _plan(burst: float, source: str = "model", fallback: str | None = None) -> Plan:
    details = {"forecast_status": "ok", "ramp": 0.0, "burst": burst, "burst_source": source}
    if fallback:
        details["burst_fallback"] = fallback
    return Plan("web", 0.0, 1, 1, "forecast", {"forecast": 1}, details)


@pytest.mark.parametrize(
    ("burst", "source", "fallback", "per_replica", "text"),
    [
        (
            -0.4638,
            "model",
            None,
            50.0,
            "-0.46 (model; no rise beyond the ramp expected, adds nothing)",
        ),
        (354.2189, "model", None, 200.0, "354 demand = 1.77 placeholders (model)"),
        (12.345, "profile", "stale", 50.0, "12.3 demand = 0.25 placeholders (profile: stale)"),
        (3.14159, "model", None, None, "3.14 demand (model)"),
    ],
)
def test_the_burst_allowance_is_rounded_and_explained(burst, source, fallback, per_replica, text):
    assert burst_text(_plan(burst, source, fallback), per_replica) == text


def test_no_forecast_no_burst():
    plan = Plan("web", 0.0, 1, 1, "min", {"min": 1}, {"forecast_status": "off"})
    assert burst_text(plan, 50.0) == "-"


@pytest.mark.parametrize(("value", "text"), [(1234.5, "1234"), (12.34, "12.3"), (-0.4638, "-0.46")])
def test_rounded(value, text):
    assert rounded(value) == text


def test_mape_and_mase_disagreeing_is_explained():
    comment = accuracy_comment(194.1, 0.71)
    assert comment is not None
    assert "MAPE 194% and MASE 0.71 disagree" in comment
    assert "near-zero demand" in comment and "Read MASE" in comment


def test_a_small_mape_with_mase_above_1_is_explained():
    comment = accuracy_comment(4.2, 1.3)
    assert comment is not None and "repeating the last season would have done as well" in comment


@pytest.mark.parametrize(("mape", "mase"), [(12.0, 0.8), (80.0, 1.4), (None, 0.7), (200.0, None)])
def test_no_comment_when_they_agree_or_one_is_missing(mape, mase):
    assert accuracy_comment(mape, mase) is None


def test_tune_help_leads_with_current_and_budget(capsys):
    """The flags most users come to `tune` for are in the first line of its description."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]  # after the usage block
    first = description.splitlines()[0]
    assert "--current" in first and "--budget" in description.split("?")[0], description


@pytest.mark.slow
def test_warnings_come_after_the_commands_output(tmp_path):
    """Through one pipe (a terminal, or `2>&1 | less`): the table first, then the warnings in a
    block, not WARNING lines before the output they are about."""
    start = datetime(2026, 11, 2, tzinfo=UTC).timestamp()
    rows = ["timestamp,value"]
    for i in range(9 * 48):  # nine days of 30-minute samples, one a recording error
        value = 1e7 if i == 8 * 48 + 10 else 100 + 50 * math.sin(2 * math.pi * i / 48)
        rows.append(f"{datetime.fromtimestamp(start + 1800 * i, UTC):%Y-%m-%dT%H:%M:%SZ},{value}")
    (tmp_path / "spike.csv").write_text("\n".join(rows) + "\n")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "predictive_headroom", "backtest", "--data", "spike.csv"),
            *("--warmup", "7d", "--quiet", "--workers", "1"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout
    out = done.stdout
    block = out.index(" warning(s) while it ran:")
    assert out.index("strategy ") < block, out
    assert out.index("WARNING predictive_headroom.backtest.run: outlier") > block, out
    logged = [i for i, line in enumerate(out.splitlines()) if line.startswith(("WARNING", "ERROR"))]
    assert min(logged) > out[:block].count("\n"), out  # every log line in the block after it


def test_a_warning_said_at_once_is_not_held(capsys):
    """A long replay's projection is said before it runs; other warnings wait for the output."""
    from predictive_headroom.cli import _HeldWarnings
    from predictive_headroom.core.vocabulary import AT_ONCE

    handler = _HeldWarnings()
    log = logging.getLogger("test.held")
    log.addHandler(handler)
    try:
        log.warning("the replay takes about 2 h", extra={AT_ONCE: True})
        log.warning("an outlier")
        assert capsys.readouterr().err == "WARNING test.held: the replay takes about 2 h\n"
        print("the table")
        handler.write_held()
        seen = capsys.readouterr()
        assert seen.out == "the table\n"
        assert seen.err == "-- 1 warning(s) while it ran:\nWARNING test.held: an outlier\n"
    finally:
        log.removeHandler(handler)
