"""`plan` through the real entry point: JSON shape, timeline, cluster flags, errors."""

import json
from pathlib import Path

import pytest

from predictive_headroom.cli import main

POLICY = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    minReplicas: 1
    maxReplicas: 10
    leadTime: 15m
    schedules:
      - {name: business-hours, timezone: Europe/Berlin, start: "0 8 * * 1-5", end: "0 18 * * 1-5", desiredReplicas: 4}
    proportional:
      linear: {nodesPerReplica: 4, coresPerReplica: 64}
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_json_shape(config, capsys):
    # Monday 2026-11-23 07:50 Berlin (06:50Z) is inside the 15-minute lead of the 08:00 window.
    out = run_json(
        capsys,
        "plan",
        "--config",
        config,
        "--at",
        "2026-11-23T07:50:00+01:00",
        "--nodes",
        "8",
        "--cores",
        "64",
        "-o",
        "json",
    )
    assert out["at"] == "2026-11-23T06:50:00Z"
    [pool] = out["pools"]
    assert pool["name"] == "web"
    assert pool["desired_replicas"] == 4
    assert pool["reason"] == "schedule:business-hours"
    assert pool["components"] == {
        "min": 1,
        "max": 10,
        "schedule": 4,
        "proportional": 2,
        "forecast": None,
    }


def test_plan_proportional_wins_on_a_big_cluster(config, capsys):
    out = run_json(
        capsys,
        "plan",
        "-c",
        config,
        "--at",
        "2026-11-28T12:00:00Z",
        "--nodes",
        "30",
        "--cores",
        "240",
        "--schedulable-nodes",
        "24",
        "-o",
        "json",
    )
    assert out["pools"][0]["desired_replicas"] == 6  # ceil(24/4); Saturday, no window
    assert out["pools"][0]["reason"] == "proportional"


def test_timeline_shows_when_the_window_opens(config, capsys):
    out = run_json(
        capsys,
        "plan",
        "-c",
        config,
        "--at",
        "2026-11-23T00:00:00Z",
        "--horizon",
        "24h",
        "--step",
        "5m",
        "-o",
        "json",
    )
    steps = out["pools"][0]["steps"]
    assert len(steps) == 24 * 12 + 1
    opened = next(s for s in steps if s["desired_replicas"] == 4)
    assert opened["at"] == "2026-11-23T06:45:00Z"  # 08:00 CET minus the 15-minute lead
    assert steps[-1]["desired_replicas"] == 1


def test_timeline_table(config, capsys):
    assert main(["plan", "-c", config, "--at", "2026-11-23T00:00:00Z", "--horizon", "24h"]) == 0
    out = capsys.readouterr().out
    assert "2026-11-23T06:45:00Z  4" in out and "schedule:business-hours" in out
    assert "hold:scale-down-stabilization" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--at", "2026-11-23T07:50:00"], "has no UTC offset"),
        (["--at", "tomorrow"], "is not an ISO-8601 time"),
        (["--nodes", "8"], "counts cores in its proportional rule; pass --cores"),
        (["--cores", "8"], "--cores and --schedulable-nodes need --nodes"),
        (
            ["--nodes", "4", "--cores", "8", "--schedulable-nodes", "5"],
            "must be between 0 and --nodes 4",
        ),
        (["--pool", "api"], "no pool named 'api'; pools: web"),
    ],
)
def test_plan_errors_exit_2(config, capsys, argv, message):
    assert main(["plan", "-c", config, *argv]) == 2
    assert message in capsys.readouterr().err


def test_plan_with_bad_config_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - name: web\n")
    assert main(["plan", "-c", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "pools[0].target: required field is missing" in err and "pools[0].maxReplicas" in err


GAP_POLICY = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 10
    leadTime: 0s
    schedules:
      - {name: night, timezone: Europe/Berlin, start: "30 2 * * *", end: "0 4 * * *", desiredReplicas: 3}
"""


@pytest.mark.parametrize(
    "at, desired, reason",
    [
        ("2026-03-29T01:59:00+01:00", 0, "min"),  # just before the clocks jump 02:00 -> 03:00
        ("2026-03-29T03:00:00+02:00", 3, "schedule:night"),  # 02:30 does not exist: opens at 03:00
        ("2026-03-29T03:15:00+02:00", 3, "schedule:night"),
        ("2026-03-29T04:00:00+02:00", 0, "min"),
    ],
)
def test_plan_opens_a_window_whose_start_is_in_the_spring_forward_gap(
    tmp_path, capsys, at, desired, reason
):
    path = tmp_path / "policy.yaml"
    path.write_text(GAP_POLICY)
    [pool] = run_json(capsys, "plan", "-c", str(path), "--at", at, "-o", "json")["pools"]
    assert (pool["desired_replicas"], pool["reason"]) == (desired, reason)


def test_timeline_on_the_gap_day_opens_at_three(tmp_path, capsys):
    path = tmp_path / "policy.yaml"
    path.write_text(GAP_POLICY)
    out = run_json(
        capsys,
        "plan",
        "-c",
        str(path),
        "--at",
        "2026-03-29T00:00:00Z",
        "--horizon",
        "3h",
        "--step",
        "15m",
        "-o",
        "json",
    )
    opened = next(s for s in out["pools"][0]["steps"] if s["desired_replicas"] == 3)
    assert opened["at"] == "2026-03-29T01:00:00Z"  # 03:00 CEST, the first instant after the gap


@pytest.mark.parametrize("step", ["15m", "5m", "1m"])
def test_timeline_rows_sit_on_the_step_grid_and_on_the_exact_change_instants(config, capsys, step):
    out = run_json(
        capsys,
        "plan",
        "-c",
        config,
        "--at",
        "2026-11-23T00:03:20Z",
        "--horizon",
        "24h",
        "--step",
        step,
        "-o",
        "json",
    )
    steps = out["pools"][0]["steps"]
    assert steps[0]["at"] == "2026-11-23T00:03:20Z"  # now, then the grid
    assert (
        steps[1]["at"]
        == {
            "15m": "2026-11-23T00:15:00Z",
            "5m": "2026-11-23T00:05:00Z",
            "1m": "2026-11-23T00:04:00Z",
        }[step]
    )
    changes, last = [], None
    for s in steps:
        if (s["desired_replicas"], s["reason"]) != last:
            changes.append((s["at"], s["desired_replicas"], s["reason"]))
            last = (s["desired_replicas"], s["reason"])
    # The same instants whatever the step: the window opens 15 minutes early at 06:45, closes at
    # 17:00 (18:00 CET), and stabilisation holds the count until 30 minutes after that.
    assert changes[1:] == [
        ("2026-11-23T06:45:00Z", 4, "schedule:business-hours"),
        ("2026-11-23T17:00:00Z", 4, "hold:scale-down-stabilization"),
        ("2026-11-23T17:30:00Z", 1, "min"),
    ]


def test_a_window_opening_between_grid_points_shows_at_its_instant(tmp_path, capsys):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.replace("leadTime: 15m", "leadTime: 13m"))
    out = run_json(
        capsys,
        "plan",
        "-c",
        str(path),
        "--at",
        "2026-11-23T06:00:00Z",
        "--horizon",
        "2h",
        "-o",
        "json",
    )
    opened = next(s for s in out["pools"][0]["steps"] if s["desired_replicas"] == 4)
    assert opened["at"] == "2026-11-23T06:47:00Z"


@pytest.mark.slow
def test_the_demos_plan_is_the_same_at_any_step_and_is_the_reports_plan(tmp_path, capsys):
    """The demo's `plan --step 30m` and `--step 5m` print the same rows, and the report made at the
    same instant lists the same changes (reasons included): one horizon grid, planned each minute."""
    from importlib import resources

    from predictive_headroom.commands import parse_time
    from predictive_headroom.commands.demo import DATA, END, START, write_csv
    from predictive_headroom.sources.csvsource import read_csv_history

    package = resources.files("predictive_headroom") / "data"
    with resources.as_file(package / DATA) as path:
        history = read_csv_history(path).since(parse_time(START)).until(parse_time(END))
    write_csv(history, tmp_path / "taxi.csv")
    (tmp_path / "policy.yaml").write_text((package / "demo.yaml").read_text())
    common = ["-c", str(tmp_path / "policy.yaml"), "--data", str(tmp_path / "taxi.csv")]
    printed = {}
    for step in ("30m", "5m"):
        argv = ["plan", *common, "--at", END, "--horizon", "48h", "--step", step]
        assert main(argv) == 0
        printed[step] = capsys.readouterr().out
    assert printed["30m"] == printed["5m"]
    rows = [line.split()[:3] for line in printed["30m"].splitlines() if line.startswith("2014-")]
    assert main(["report", *common, "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    changes = report["pools"][0]["plan"]["changes"]
    assert [[c["at"], str(c["desired_replicas"]), c["reason"]] for c in changes] == rows
    assert any(r[2] == "hold:scale-down-stabilization" for r in rows)


FORECAST_POLICY = """\
pools:
  - name: api
    target: {namespace: ns, name: api-placeholder}
    maxReplicas: 10
    forecast: {query: "sum(rate(x[5m]))", demandPerReplica: 20, burstModel: profile}
  - name: idle
    target: {namespace: ns, name: idle-placeholder}
    minReplicas: 1
    maxReplicas: 10
    forecast: {query: "sum(rate(x[5m]))", demandPerReplica: 20, enabled: false}
"""


@pytest.fixture
def demand(tmp_path):
    """Three days of a daily wave every 5 minutes, ending 2015-03-04T00:00:00Z."""
    import math
    from datetime import UTC, datetime, timedelta

    end = datetime(2015, 3, 4, tzinfo=UTC)
    rows = ["timestamp,value"]
    for k in range(3 * 288, -1, -1):
        t = end - timedelta(minutes=5 * k)
        hour = t.hour + t.minute / 60
        rows.append(f"{t:%Y-%m-%dT%H:%M:%SZ},{100 + 60 * math.sin(2 * math.pi * hour / 24):.1f}")
    (tmp_path / "demand.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "policy.yaml").write_text(FORECAST_POLICY)
    return str(tmp_path / "policy.yaml"), str(tmp_path / "demand.csv")


def test_plan_with_data_and_no_at_plans_at_the_end_of_the_data(demand, capsys):
    policy, csv = demand
    out = run_json(capsys, "plan", "-c", policy, "--data", csv, "--pool", "api", "-o", "json")
    assert out["at"] == "2015-03-04T00:00:00Z"
    [api] = out["pools"]
    assert api["details"]["forecast_status"] == "ok" and "why" not in api
    assert not api["reason"].startswith("min:")


def test_plan_at_an_instant_the_data_does_not_cover_exits_2_saying_what_the_file_covers(
    demand, capsys
):
    policy, csv = demand
    argv = ["plan", "-c", policy, "--data", csv, "--pool", "api", "--at", "2026-11-24T00:00:00Z"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot read demand history" in err
    assert "the file covers 2015-03-01T00:00:00Z to 2015-03-04T00:00:00Z" in err


def test_every_row_of_the_plan_says_why_a_pool_has_no_forecast(demand, capsys):
    """A pool whose forecast failed plans its floors; its row says why, in text and JSON."""
    from predictive_headroom.commands import plan as plan_command
    from predictive_headroom.core.series import NoForecast

    why = plan_command.why_minimum(
        {"api": NoForecast("fit-error", "Prophet failed: boom"), "idle": NoForecast("disabled")}
    )
    assert why == {"api": "no forecast (fit-error): Prophet failed: boom"}
    policy, csv = demand
    short = Path(csv).with_name("short.csv")
    lines = Path(csv).read_text().splitlines()
    short.write_text("\n".join(lines[:1] + lines[-100:]) + "\n")  # 8 hours: under a day
    short = str(short)
    assert main(["plan", "-c", policy, "--data", short]) == 0
    text = capsys.readouterr().out
    assert "api   0        min:insufficient-history" in text
    assert "pool api plans its floors only (min:...): no forecast (insufficient-history)" in text
    out = run_json(capsys, "plan", "-c", policy, "--data", short, "-o", "json")
    api = next(p for p in out["pools"] if p["name"] == "api")
    assert api["why"].startswith("no forecast (insufficient-history)")


def test_the_components_column_names_the_reserve(demand, capsys):
    """Issue 63: `desired 3, reason forecast` stood beside `forecast=0`, nothing saying the
    reserve held the three; the column now names every part, the reserve included."""
    policy, csv = demand
    text = (
        Path(policy).read_text().replace("burstModel: profile}", "burstModel: profile, reserve: 3}")
    )
    Path(policy).write_text(text)
    out = run_json(capsys, "plan", "-c", policy, "--data", csv, "--pool", "api", "-o", "json")
    [api] = out["pools"]
    assert api["details"]["reserve"] == 3
    floors = max(v for k, v in api["components"].items() if k not in ("max",) and v is not None)
    assert api["desired_replicas"] == floors + 3
    assert main(["plan", "-c", policy, "--data", csv, "--pool", "api"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("api "))
    assert "reserve=+3" in row and f"forecast={api['components']['forecast']}" in row, row
    argv = [
        "plan",
        "-c",
        policy,
        "--data",
        csv,
        "--pool",
        "api",
        "--horizon",
        "2h",
        "--step",
        "30m",
    ]
    assert main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("2015-")]
    assert rows and all("reserve=+3" in line for line in rows), rows
    timeline = run_json(capsys, *argv, "-o", "json")
    assert all(step["reserve"] == 3 for step in timeline["pools"][0]["steps"])
