"""One instant of one series, four ways in: `plan --at`, `report --at` and the daemon (`run --once`'s
refit and reconcile, with the real Kubernetes client against the test API server) give the same
desired replicas, components and burst allowance; the backtest's replay gives the same share
component (from its app pods x their request, which `plan` and `report` are given as `--requests`
and the daemon reads from the pods on the nodes). And one answer on a shaped pool (issue 54): with
the node's shape in the policy, share:, disruption: and --current, the daemon, `plan`, `report`,
`tune`, `backtest` and both pages simulate one node and give the same kept, node-hours, money,
verdict against fixed headroom and replicas."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer

from predictive_headroom import cli
from predictive_headroom.app.fit import default_forecaster
from predictive_headroom.commands import parse_time
from predictive_headroom.core.planner import plan_to_dict
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.load import load_policy
from predictive_headroom.replay.planner import share_parts
from predictive_headroom.replay.setup import resolve
from predictive_headroom.sources.csvsource import CsvSource

AT = "2014-12-22T00:00:00Z"  # the instant the three commands once disagreed on
NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")


def demo_policy(path: Path) -> Path:
    """The bundled demo policy, with room to show the forecast and a proportional rule on nodes."""
    text = (resources.files("predictive_headroom") / "data" / "demo.yaml").read_text()
    policy = yaml.safe_load(text)
    pool = policy["pools"][0]
    pool["maxReplicas"] = 400
    pool["proportional"] = {"linear": {"nodesPerReplica": 2}}
    pool["share"] = {"cpu": "10%"}
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def the_answer(plan: dict) -> dict:
    """What must agree: desired replicas, reason, components and the burst allowance."""
    details = plan["details"]
    return {
        "desired_replicas": plan["desired_replicas"],
        "reason": plan["reason"],
        "components": plan["components"],
        **{
            key: details.get(key)
            for key in ("forecast_status", "ramp", "burst", "burst_source", "burst_fallback")
        },
    }


@pytest.fixture(scope="module")
def data() -> Path:
    with resources.as_file(
        resources.files("predictive_headroom") / "data" / "nab_nyc_taxi_30min.csv"
    ) as path:
        yield Path(path)


@pytest.mark.slow
def test_plan_report_and_the_daemon_agree_at_one_instant(tmp_path, capsys, data) -> None:
    config = demo_policy(tmp_path / "policy.yaml")
    # The backtest's share component at AT: the app pods known a minute before (the observation
    # delay), each requesting what a placeholder requests (2 cores)
    replay = resolve(CsvSource(data).full(), load_policy(config).pools[0])
    at = int(np.searchsorted(replay.times, parse_time(AT)))
    assert replay.times[at] == parse_time(AT)
    delay = round(replay.plan_settings.delay / 60)
    replayed = share_parts(replay.pool, replay.pods, delay)[at]
    assert replayed is not None and replayed.replicas > 0
    cpu = replayed.requested["cpu"]
    assert cpu == 2.0 * replay.pods[at - delay]
    nodes = ["--nodes", "4", "--cores", "32", "--requests", f"cpu={cpu:g}"]

    assert (
        cli.main(["plan", "-c", str(config), "--at", AT, "--data", str(data), *nodes, "-o", "json"])
        == 0
    )
    [planned] = json.loads(capsys.readouterr().out)["pools"]

    out = tmp_path / "report"
    args = ["report", "-c", str(config), "--at", AT, "--data", str(data), "--out", str(out)]
    assert cli.main([*args, *nodes]) == 0
    [reported] = json.loads((out / "report.json").read_text())["pools"]

    with FakeApiServer() as server:
        for i in range(4):
            server.add_node(f"node-{i}", cpu="8")
        server.add_pod("rides", "rides-api-0", "node-0", {"cpu": f"{cpu:g}"}, "ReplicaSet")
        server.add_deployment(NS, "rides-api-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            source=CsvSource(data),
            forecaster=default_forecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            pods=KubePodReader(api, FAST),
            loop=LoopSettings(observe_placeholders=False, read_node_pods=True),
            clock=lambda: parse_time(AT),
        )
        assert daemon.refit()
        result = daemon.reconcile()
        [outcome] = result.pools
        assert outcome.action == "scaled", outcome.error
        assert server.replicas(NS, "rides-api-placeholder") == outcome.plan.desired

    daemon_answer = the_answer(plan_to_dict(outcome.plan))
    assert daemon_answer["burst_source"] == "model" and daemon_answer["burst_fallback"] is None
    assert daemon_answer["components"]["proportional"] == 2
    assert daemon_answer["components"]["share"] == replayed.replicas  # the backtest's
    # Only the daemon sees the nodes: no node is leaving, so its disruption component is 0, and
    # the CLI's plan and report, which cannot know, leave the component out.
    assert daemon_answer["components"].pop("disruption") == 0
    assert the_answer(planned) == daemon_answer
    assert the_answer(reported["plan"]["now"]) == daemon_answer


# One answer (issue 54, item 4): a pool with the node's shape in its policy (cost.nodeCpu and
# nodeMemory: 7 placeholders of 2 CPU and 4 GiB on a node), a share: and a disruption: section,
# and the user's fixed N (`--current`). Every command and page simulates that node, and says the
# same protection kept, node-hours and money a day, verdict against fixed headroom and replicas.

NODE = {"nodeCpu": 16, "nodeMemory": "30Gi"}  # 7 placeholders of 2 CPU and 4 GiB fit, not 8
CURRENT = 6
SHAPED_WINDOW = 2 * 86_400.0


def shaped_policy(path: Path) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 40,
        "leadTime": "4m",
        "protection": "90%",
        "forecast": {"query": "q", "demandPerReplica": 8, "history": "28d"},
        "placeholder": {"requests": {"cpu": "2", "memory": "4Gi"}},
        "share": {"cpu": "60%"},
        "disruption": {"spot": True, "interruptionRate": "2%/day"},
    }
    cost = {"costPerCpuHour": 0.04, "costPerGiBHour": 0.005, **NODE}
    path.write_text(yaml.safe_dump({"pools": [pool], "cost": cost}, sort_keys=False))
    return path


def _json_cli(capsys, *argv: str) -> dict:
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1), out  # tune says 1 when the promise fell short
    return json.loads(out)


def _figures(promise: dict) -> dict:
    """What must agree of the daemon's promise: kept, node-hours and money a day, the verdict."""
    return {
        key: promise[key]
        for key in ("asked", "kept", "overhead_node_hours_per_day", "money_per_day", "reserve")
    } | {"against_fixed": promise["against_fixed"], "node_slots": promise.get("node_slots")}


def _the_daemon(config: Path, history, at: float, cpu: float):
    """The daemon's refit and reconcile at `at` on the test API server (4 nodes, one app pod
    requesting `cpu`): its outcome, the replicas written and its promise as the report shows it."""
    from test_backtest import SeasonalNaiveForecaster
    from test_retune import SeriesSource

    from predictive_headroom.core.price import pool_price

    with FakeApiServer() as server:
        for n in range(4):
            server.add_node(f"node-{n}", cpu="16")
        server.add_pod("app", "app-0", "node-0", {"cpu": f"{cpu:g}"}, "ReplicaSet")
        server.add_deployment(NS, "web-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            source=SeriesSource(history),
            forecaster=SeasonalNaiveForecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            pods=KubePodReader(api, FAST),
            loop=LoopSettings(observe_placeholders=False, read_node_pods=True),
            clock=lambda: at,
        )
        daemon.retune_window = SHAPED_WINDOW
        assert daemon.refit()
        [outcome] = daemon.reconcile().pools
        assert outcome.action == "scaled", outcome.error
        written = server.replicas(NS, "web-placeholder")
        policy = load_policy(config)
        written_promise = daemon.tunings["web"].report(pool_price(policy.pools[0], policy.cost))
    return outcome, written, written_promise


@pytest.mark.slow
def test_every_command_and_page_gives_one_answer_on_a_shaped_pool(
    tmp_path, capsys, monkeypatch
) -> None:
    from test_backtest import series
    from test_review import fast, write_csv

    fast(monkeypatch)
    monkeypatch.setenv("PH_RETUNE_WINDOW", str(SHAPED_WINDOW))
    history = series(9)
    data = write_csv(tmp_path / "demand.csv", history)
    config = shaped_policy(tmp_path / "policy.yaml")
    at = float(history.end)
    when = f"{np.datetime64(int(at), 's')}Z"
    # The share component at `at`: the app pods known a minute before, 2 CPU each
    replay = resolve(history, load_policy(config).pools[0])
    i = int(np.searchsorted(replay.times, at))
    assert replay.times[i] == at
    share = share_parts(replay.pool, replay.pods, round(replay.plan_settings.delay / 60))[i]
    assert share is not None
    cpu = share.requested["cpu"]

    outcome, written, written_promise = _the_daemon(config, history, at, cpu)
    assert outcome.plan.components["share"] == share.replicas
    assert outcome.plan.reason == "share", outcome.plan.components  # the share binds

    requests = ["--requests", f"cpu={cpu:g}"]
    base = ["-c", str(config), "--data", str(data)]
    plan = _json_cli(capsys, "plan", *base, "--at", when, *requests, "-o", "json")
    report_dir = tmp_path / "report"
    assert cli.main(["report", *base, "--at", when, *requests, "--out", str(report_dir)]) == 0
    report = json.loads((report_dir / "report.json").read_text())
    tune = _json_cli(capsys, "tune", *base, "--current", str(CURRENT), "-q", "-o", "json")
    page_dir = tmp_path / "bt"
    bt_args = [*base, "--protection", "90%", "--current", str(CURRENT), "-q"]
    backtest = _json_cli(capsys, "backtest", *bt_args, "--out", str(page_dir), "-o", "json")
    flagged = _json_cli(
        capsys, "backtest", *bt_args, "--node-cpu", "16", "--node-memory", "30Gi", "-o", "json"
    )

    # One node: the policy's shape, simulated and priced, with or without the flags saying it.
    assert backtest["settings"]["node_slots"] == 7
    assert "holding 7 placeholders" in tune["cost"]["assumed"]
    assert backtest["current"] == flagged["current"]
    assert (
        backtest["promise"][0]["realized_protection"]
        == flagged["promise"][0]["realized_protection"]
    )
    # The user's N on the whole history: one figure and one verdict in tune and the backtest.
    [theirs] = tune["current"]
    assert backtest["current"] == [theirs]
    # The daemon's view: the same promise figures, verdict and replicas everywhere.
    [entry] = backtest["promise"]
    [row] = plan["pools"]
    [section] = report["pools"]
    views = {
        "daemon": written_promise,
        "plan": row["promise"],
        "report": section["promise"],
        "tune": tune["daemon_now"]["promise"],
        "backtest": entry["daemon_now"]["promise"],
    }
    want = _figures(written_promise)
    assert want["against_fixed"] is not None and want["node_slots"] == 7
    assert want["money_per_day"] is not None
    for who, promise in views.items():
        assert _figures(promise) == want, who
    replicas = {
        "daemon": written,
        "plan": row["desired_replicas"],
        "report": section["plan"]["now"]["desired_replicas"],
        "tune": tune["daemon_now"]["replicas"],
        "backtest": entry["daemon_now"]["replicas"],
    }
    assert set(replicas.values()) == {written}, replicas
    # daemon_now plans with every registered component, as the daemon does (the share binds)
    components = plan_to_dict(outcome.plan)["components"]
    assert tune["daemon_now"]["components"] == components
    assert entry["daemon_now"]["components"] == components
    # The pages word the one verdict, and nothing on them says the opposite.
    said = want["against_fixed"]["says"]
    report_page = (report_dir / "index.html").read_text()
    backtest_page = (page_dir / "backtest.html").read_text()
    assert said in report_page and said in backtest_page
    assert theirs["says"][1:] in backtest_page  # its first letter a capital there
    # The whole history against the user's N and the daemon's days against the static curve,
    # one function: here both find fixed headroom better (the share binds, dearer than a fixed N).
    assert theirs["verdict"]["better"] == want["against_fixed"]["better"] == "fixed"
    assert theirs["says"].startswith(theirs["verdict"]["says"])
    assert "less unserved demand than static" not in backtest_page


@pytest.mark.parametrize(
    ("kept", "forecast", "fixed", "better"),
    [
        (0.95, 10.0, 12.0, "forecast"),  # cheaper than the fixed N at the same protection
        (0.95, 12.0, 12.0, "forecast"),  # a tie goes to the forecast
        (0.95, 12.0, 10.0, "fixed"),
        (0.95, 12.0, None, "forecast"),  # no fixed N kept it
        (0.95, None, 10.0, "fixed"),  # the forecast never kept the N's protection
    ],
)
def test_one_verdict_against_fixed_headroom(kept, forecast, fixed, better) -> None:
    from predictive_headroom.core.verdict import verdict

    static = verdict(kept, forecast, fixed, fixed_replicas=14, over="over the last 7 days")
    yours = verdict(kept, forecast, fixed, fixed_replicas=20, yours=True, over="on this history")
    for judged in (static, yours):
        assert judged.to_dict()["better"] == better
        assert judged.to_dict()["forecast_beats_fixed"] is (better == "forecast")
    assert ("did not beat a fixed N over the last 7 days" in static.says()) is (better == "fixed")
    assert yours.says() == (
        "your fixed 20 did better on this history"
        if better == "fixed"
        else "predictive headroom beat your fixed 20 on this history"
    )


def test_every_registered_component_is_read_in_a_replay(tmp_path) -> None:
    from predictive_headroom.core.components import READ
    from predictive_headroom.core.settings import resolve_settings
    from predictive_headroom.replay.planner import replay_parts

    pool = load_policy(shaped_policy(tmp_path / "policy.yaml")).pools[0]
    settings = resolve_settings(pool)
    pods = np.full(10, 12, dtype=np.int64)
    parts = replay_parts(pool, pods, 9, settings, node_slots=7, nodes=3)
    assert (
        set(parts)
        == {str(r.name) for r in READ if r.enabled(pool) and r.replayed}
        == {
            "share",
            "disruption",
        }
    )
    assert parts["share"].replicas == 8  # 60% of 12 pods x 2 CPU = 14.4 CPU: 8 of 2 CPU


def test_where_the_two_verdicts_differ_the_page_says_why() -> None:
    from predictive_headroom.backtest.page import _verdict_notes
    from predictive_headroom.core.verdict import verdict, why_they_differ

    yours = verdict(0.9, 12.0, 10.0, fixed_replicas=20, yours=True, over="on this history")
    daemon = verdict(0.95, 8.0, 9.0, fixed_replicas=14, over="over the last 7 days judged to T")
    agreeing = verdict(0.95, 11.0, 9.0, fixed_replicas=14, over="over the last 7 days judged to T")
    assert why_they_differ(yours.to_dict(), agreeing.to_dict()) == ""
    assert why_they_differ(yours.to_dict(), None) == ""
    note = why_they_differ(yours.to_dict(), daemon.to_dict())
    assert "compare different things" in note
    assert "your fixed 20 at the 90.0% it kept on this history" in note
    assert (
        "the static curve at the 95.0% the forecast kept over the last 7 days judged to T" in note
    )
    data = {
        "current": [{"verdict": yours.to_dict()}],
        "promise": [{"daemon_now": {"promise": {"against_fixed": daemon.to_dict()}}}],
    }
    assert _verdict_notes(data) == [note]


# The budget cap (issue 56): at one instant the daemon (what it planned since midnight, in
# memory), `plan` and `report` (`--budget-spent` at `--at`) and the backtest's replay (what the
# simulated pool held earlier that day) give the same budget component and plan.

BUDGETED = {
    "name": "web",
    "target": {"namespace": NS, "name": "web-placeholder"},
    "minReplicas": 10,
    "maxReplicas": 40,
    "scaleDownStabilization": "0s",
    "budget": {"nodeHoursPerDay": 20, "timezone": "Europe/Berlin"},
}


def _plan_json(capsys, config: Path, at: float, spent: float, *extra: str) -> dict:
    when = f"{np.datetime64(int(at), 's')}Z"
    spend = ["--budget-spent", f"{spent!r}"]
    [row] = _json_cli(capsys, "plan", "-c", str(config), "--at", when, *spend, "-o", "json")[
        "pools"
    ]
    return row


def test_the_daemon_plan_report_and_the_replay_agree_on_the_budget(tmp_path, capsys) -> None:
    from test_backtest import series
    from test_review import write_csv

    from predictive_headroom.core.budget import day_of

    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [BUDGETED]}, sort_keys=False))
    history = series(9)
    at = float(day_of(float(history.end), "Europe/Berlin").start + 9 * 3600)  # 09:00 in Berlin
    now = [at]
    with FakeApiServer() as server:
        server.add_deployment(NS, "web-placeholder", 0)
        api = server.api_client()
        daemon = new_daemon(
            config,
            forecaster=default_forecaster(),
            actuator=TargetActuator(api, FAST),
            cluster=KubeClusterReader(api, FAST),
            clock=lambda: now[0],
        )
        [first] = daemon.reconcile().pools  # nothing counted yet: a fresh daemon
        now[0] = at + 3600.0
        [second] = daemon.reconcile().pools  # the first plan held for an hour since
        shown = daemon.status()["budget"]["web"]  # /last-run
    # 20 node-hours over the 15 hours left, 8 placeholders a node: 10.67, so 10 (min wins: 10)
    assert (first.plan.components["budget"], first.plan.desired) == (10, 10)
    # an hour of 10 placeholders is 1.25 node-hours: 18.75 over 14 hours affords 10.7
    spent = 10 * 3600 / 3600 / 8
    assert second.plan.details["budget_spent_node_hours"] == spent
    assert (shown["budget_spent_node_hours"], shown["cap"]) == (spent, 10)
    assert shown["budget"] == "20 overhead node-hours a day"
    for instant, spend, outcome in ((at, 0.0, first), (at + 3600.0, spent, second)):
        row = _plan_json(capsys, config, instant, spend)
        components = dict(outcome.plan.components)
        assert components.pop("disruption") == 0  # only the daemon reads the nodes
        assert row["components"] == components
        assert (row["desired_replicas"], row["reason"]) == (
            outcome.plan.desired,
            outcome.plan.reason,
        )
        out = tmp_path / f"report-{int(instant)}"
        when = f"{np.datetime64(int(instant), 's')}Z"
        data = write_csv(tmp_path / "demand.csv", history)
        report = ["report", "-c", str(config), "--at", when, "--data", str(data), "--out", str(out)]
        assert cli.main([*report, "--budget-spent", f"{spend!r}"]) == 0
        [section] = json.loads((out / "report.json").read_text())["pools"]
        assert section["plan"]["now"]["components"] == components
    # late in the day the budget binds: what the replay held since midnight, given to `plan`
    replay = resolve(history, load_policy(config).pools[0])
    held = replay.plan(replay.pool).placeholders
    late = float(day_of(float(history.end) - 86400.0, "Europe/Berlin").start + 20 * 3600)
    i = int(np.searchsorted(replay.times, late))
    start = int(np.searchsorted(replay.times, day_of(late, "Europe/Berlin").start))
    spent_late = float(held[start:i].sum()) / 60.0 / replay.nodes.node_slots
    row = _plan_json(capsys, config, float(replay.times[i]), spent_late)
    assert row["reason"] == "budget" and row["desired_replicas"] == held[i] < 10


# The limits cap (issue 56): a pool whose `limits:` allow fewer placeholders than the forecast asks
# for is held at the cap, and `plan`, `report`, `tune` and `backtest` (its replay and the daemon's
# instant) say the same count and the same reason.

LIMITED_CAP = 3  # limits.cpu 6 over placeholders of 2 CPU


def limited_policy(path: Path) -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 40,
        "leadTime": "4m",
        "protection": "90%",
        "forecast": {"query": "q", "demandPerReplica": 1, "history": "28d"},
        "placeholder": {"requests": {"cpu": "2", "memory": "4Gi"}},
        "limits": {"cpu": "6"},
    }
    cost = {"costPerCpuHour": 0.04, "costPerGiBHour": 0.005, **NODE}
    path.write_text(yaml.safe_dump({"pools": [pool], "cost": cost}, sort_keys=False))
    return path


@pytest.mark.slow
def test_plan_report_tune_and_backtest_agree_where_the_limits_cap_binds(
    tmp_path, capsys, monkeypatch
) -> None:
    from test_backtest import series
    from test_review import fast, write_csv

    fast(monkeypatch)
    monkeypatch.setenv("PH_RETUNE_WINDOW", str(SHAPED_WINDOW))
    history = series(9)
    data = write_csv(tmp_path / "demand.csv", history)
    config = limited_policy(tmp_path / "policy.yaml")
    at = float(history.end)
    when = f"{np.datetime64(int(at), 's')}Z"
    base = ["-c", str(config), "--data", str(data)]

    plan = _json_cli(capsys, "plan", *base, "--at", when, "-o", "json")
    report_dir = tmp_path / "report"
    assert cli.main(["report", *base, "--at", when, "--out", str(report_dir)]) == 0
    report = json.loads((report_dir / "report.json").read_text())
    tune = _json_cli(capsys, "tune", *base, "-q", "-o", "json")
    page_dir = tmp_path / "bt"
    backtest = _json_cli(
        capsys, "backtest", *base, "--protection", "90%", "-q", "--out", str(page_dir), "-o", "json"
    )

    [row] = plan["pools"]
    [section] = report["pools"]
    [entry] = backtest["promise"]
    answers = {
        "plan": (row["desired_replicas"], row["reason"], row["components"]),
        "report": (
            section["plan"]["now"]["desired_replicas"],
            section["plan"]["now"]["reason"],
            section["plan"]["now"]["components"],
        ),
        "tune": (
            tune["daemon_now"]["replicas"],
            tune["daemon_now"]["reason"],
            tune["daemon_now"]["components"],
        ),
        "backtest": (
            entry["daemon_now"]["replicas"],
            entry["daemon_now"]["reason"],
            entry["daemon_now"]["components"],
        ),
    }
    # the forecast plus the re-tune's reserve ask for more than the limits allow
    assert row["components"]["forecast"] + row["details"].get("reserve", 0) > LIMITED_CAP
    assert row["components"]["limits"] == LIMITED_CAP
    want = (LIMITED_CAP, "limits", row["components"])
    for who, (replicas, reason, components) in answers.items():
        # the replays see the simulated nodes (none leaving: disruption 0); the CLI does not
        assert components.pop("disruption", 0) == 0, who
        assert (replicas, reason, components) == want, who
    # The re-tune names the cap that held its reserve: the limits, not maxReplicas.
    said = json.dumps(tune["daemon_now"])
    assert "limits 3 held it at 3" in said and "maxReplicas 3" not in said
    # The replay holds the cap too: the backtest caps a reserve there, and its page shows the cap.
    assert backtest["settings"]["max_replicas"] == LIMITED_CAP
    assert backtest["settings"]["cap_name"] == "limits"
    assert "maxReplicas 3" not in json.dumps(backtest)
    page = (page_dir / "backtest.html").read_text()
    report_page = (report_dir / "index.html").read_text()
    assert "limits 3" in report_page  # the cap's dotted line on the plan chart
    assert page and report_page


def test_the_review_reads_the_budget_as_the_replay_held_it(tmp_path, capsys) -> None:
    """What `tune` and `backtest` plan the daemon's instant with (`parts_reader` ->
    `replay_parts`): the budget from what the replay held earlier that day, the same component
    `plan --budget-spent` gives for that spend."""
    from predictive_headroom.core.budget import day_of
    from predictive_headroom.core.settings import resolve_settings
    from predictive_headroom.replay.planner import replay_parts

    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"pools": [BUDGETED]}, sort_keys=False))
    pool = load_policy(config).pools[0]
    start = day_of(parse_time("2026-06-01T12:00Z"), "Europe/Berlin").start
    times = start - 3600.0 + 60.0 * np.arange(16 * 60)  # from 23:00 the day before to 15:00
    held = np.full(times.size, 12, dtype=np.int64)
    i = times.size - 1
    parts = replay_parts(
        pool, np.zeros(times.size, np.int64), i, resolve_settings(pool), 8, 2, (times, held, None)
    )
    spent = 12 * (times[i] - start) / 3600.0 / 8  # 12 placeholders since midnight, 8 a node
    assert parts["budget"].spent == pytest.approx(spent)
    row = _plan_json(capsys, config, float(times[i]), float(parts["budget"].spent))
    assert row["components"]["budget"] == parts["budget"].replicas
