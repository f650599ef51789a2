"""Policies that validate but can never be right (issue 49 item 2): `validate` exits 0 with a
`warning:` line naming the field and why, or refuses what nothing could mean."""

from datetime import UTC, datetime

import pytest

from predictive_headroom.cli import main
from predictive_headroom.policy.lint import Level, policy_findings, raw_counters
from predictive_headroom.policy.load import ConfigError, parse_policy

NOW = datetime(2026, 11, 27, tzinfo=UTC).timestamp()


def pool(extra: str = "", forecast: str = "", placeholder: str = "") -> str:
    return f"""
pools:
  - name: web
    target: {{namespace: ns, name: web-placeholder}}
    maxReplicas: 2000000
{extra}
{forecast}
{placeholder}
"""


def findings(text: str) -> list[tuple[str, str, str]]:
    return [(f.path, f.level, f.message) for f in policy_findings(parse_policy(text), NOW)]


@pytest.mark.parametrize(
    "query, counters",
    [
        (
            "sum(nginx_ingress_controller_requests_total)",
            ["nginx_ingress_controller_requests_total"],
        ),
        ("http_requests_total", ["http_requests_total"]),
        ('sum by (svc) (http_requests_total{code="200"})', ["http_requests_total"]),
        ("sum(max_over_time(x_total[1h]))", ["x_total"]),
        ("sum(rate(http_requests_total[5m])) + 0 * y_total", ["y_total"]),
        ("sum(rate(http_requests_total[5m]))", []),
        ("sum(increase(http_requests_total[1h]))", []),
        ("sum(irate(x_total[5m])) by (a)", []),
        ("sum(kube_pod_container_resource_requests{resource='cpu'})", []),
        ("sum(rate(x_total[5m:1m]))", []),
    ],
)
def test_a_counter_read_without_rate_is_found(query, counters):
    assert raw_counters(query) == counters


def test_every_kind_of_never_right_is_a_warning_naming_its_field():
    text = pool(
        extra="""    minReplicas: 1000000
    schedules:
      - {name: launch, timezone: Europe/Berlin, from: "2025-11-28 06:00", to: "2025-11-28 23:00", desiredReplicas: 20000}
    proportional:
      nodeSelector: {pool: gpu}
      linear: {nodesPerReplica: 4}""",
        forecast="""    forecast: {query: "sum(http_requests_total)", demandPerReplica: 50}""",
    )
    found = findings(text)
    paths = {path: (level, message) for path, level, message in found}
    assert set(paths) == {
        "pools[0].minReplicas",
        "pools[0].schedules[0].desiredReplicas",
        "pools[0].schedules[0].to",
        "pools[0].forecast.query",
        "pools[0].proportional.nodeSelector",
    }
    assert "1,000,000 placeholders is more than 10,000" in paths["pools[0].minReplicas"][1]
    assert "20,000" in paths["pools[0].schedules[0].desiredReplicas"][1]
    assert paths["pools[0].schedules[0].to"][0] == Level.NOTE
    assert "never open again" in paths["pools[0].schedules[0].to"][1]
    assert "sum(rate(http_requests_total[5m]))" in paths["pools[0].forecast.query"][1]
    assert "pool=gpu" in paths["pools[0].proportional.nodeSelector"][1]
    assert "any node" in paths["pools[0].proportional.nodeSelector"][1]


def test_with_a_node_shape_the_bound_is_what_the_nodes_hold():
    shape = "cost: {nodeCpu: 8, nodeMemory: 32Gi}"
    big = pool(extra="    minReplicas: 1", placeholder='    placeholder: {cpu: "16", memory: 8Gi}')
    [(path, level, message)] = findings(big + shape)
    assert path == "pools[0].minReplicas" and level == Level.WARNING
    assert "cannot hold even one" in message
    many = pool(
        extra="    minReplicas: 50000", placeholder='    placeholder: {cpu: "2", memory: 4Gi}'
    )
    [(_, _, message)] = findings(many + shape)
    assert "more than 5,000 nodes of 4 placeholder(s) each" in message


def test_a_sensible_policy_has_no_findings():
    text = pool(
        extra="""    minReplicas: 2
    schedules:
      - {name: day, timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: 5}
      - {name: sale, timezone: UTC, from: "2026-12-01", to: "2026-12-01", desiredReplicas: 9}
    proportional:
      nodeSelector: {pool: web}
      linear: {nodesPerReplica: 4}""",
        forecast="""    forecast: {query: "sum(rate(http_requests_total[5m]))", demandPerReplica: 50}""",
        placeholder="    placeholder: {nodeSelector: {pool: web}}",
    )
    assert findings(text) == []


@pytest.mark.parametrize("field", ["start", "end"])
@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6 *"])
def test_a_cron_that_can_never_fire_is_an_error(field, cron):
    crons = {"start": "0 8 * * *", "end": "0 18 * * *", field: cron}
    text = pool(
        extra=f"""    schedules:
      - {{name: w, timezone: UTC, start: "{crons["start"]}", end: "{crons["end"]}", desiredReplicas: 1}}"""
    )
    with pytest.raises(ConfigError) as err:
        parse_policy(text)
    [problem] = err.value.problems
    assert problem.path == f"pools[0].schedules[0].{field}"
    assert "never fires" in problem.message and "30 February" in problem.message


def test_a_leap_day_cron_fires_and_is_fine():
    text = pool(
        extra="""    schedules:
      - {name: w, timezone: UTC, start: "0 0 29 2 *", end: "0 0 1 3 *", desiredReplicas: 1}"""
    )
    [(_, level, message)] = findings(text)  # fine: only the note on one day a year
    assert level == Level.NOTE and "29 February only" in message


def small_pool(extra: str) -> str:
    return pool(extra=extra).replace("maxReplicas: 2000000", "maxReplicas: 5")


@pytest.mark.parametrize(
    "extra, path, words",
    [
        (
            """    schedules:
      - {name: sale, timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: 20}""",
            "pools[0].schedules[0].desiredReplicas",
            ["'sale' asks for 20 placeholders", "maxReplicas is 5", "gets 5 while open"],
        ),
        (
            """    proportional:
      linear: {nodesPerReplica: 4, min: 8}""",
            "pools[0].proportional.linear.min",
            ["asks for 8 placeholders as its floor", "never gets more than 5"],
        ),
        (
            """    proportional:
      linear: {coresPerReplica: 16, max: 50}""",
            "pools[0].proportional.linear.max",
            ["asks for 50 placeholders as its own cap", "maxReplicas is 5"],
        ),
        (
            """    proportional:
      ladder: {nodesToReplicas: [[1, 1], [10, 4], [20, 9], [40, 30]]}""",
            "pools[0].proportional.ladder.nodesToReplicas",
            ["asks for 9 placeholders from 20 nodes on", "maxReplicas is 5"],
        ),
    ],
)
def test_asking_for_more_than_max_replicas_is_a_warning(extra, path, words):
    [(found, level, message)] = findings(small_pool(extra))
    assert found == path and level == Level.WARNING
    for word in words:
        assert word in message, message


def test_within_max_replicas_there_is_no_warning():
    text = small_pool(
        """    schedules:
      - {name: day, timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: 5}
    proportional:
      ladder: {nodesToReplicas: [[1, 1], [40, 5]]}"""
    )
    assert findings(text) == []


@pytest.mark.parametrize(
    "start, end, day, event",
    [
        (
            "0 6 27 11 *",
            "0 23 27 11 *",
            "27 November",
            '2026-11-27 06:00" and to: "2026-11-27 23:00',
        ),
        (
            "30 7 24 dec *",
            "0 0 25 12 *",
            "24 December",
            '2026-12-24 07:30" and to: "2026-12-25 00:00',
        ),
        ("@yearly", "0 12 1 1 *", "1 January", '2027-01-01 00:00" and to: "2027-01-01 12:00'),
    ],
)
def test_a_cron_on_one_day_of_one_month_notes_the_dated_event_form(start, end, day, event):
    text = pool(
        extra=f"""    schedules:
      - {{name: sale, timezone: Europe/Berlin, start: "{start}", end: "{end}", desiredReplicas: 3}}"""
    )
    [(path, level, message)] = findings(text)
    assert path == "pools[0].schedules[0].start" and level == Level.NOTE
    assert f"fires on {day} only, every year" in message
    assert f'from: "{event}"' in message


@pytest.mark.parametrize("start", ["0 6 27 * *", "0 6 * 11 *", "0 6 27 11 1-5", "0 6 1,15 11 *"])
def test_a_cron_on_more_days_has_no_dated_event_note(start):
    text = pool(
        extra=f"""    schedules:
      - {{name: w, timezone: UTC, start: "{start}", end: "0 23 * * *", desiredReplicas: 3}}"""
    )
    assert findings(text) == []


def test_validate_prints_each_warning_and_exits_0(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(
        pool(
            extra="    minReplicas: 1000000",
            forecast='    forecast: {query: "x_total", demandPerReplica: 5}',
        )
    )
    assert main(["validate", "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 warning(s)" in out
    assert "  warning: pools[0].minReplicas: 1,000,000 placeholders" in out
    assert "  warning: pools[0].forecast.query: x_total is a counter" in out
