"""`validate`: every bad input is reported with its field path, line and what is expected."""

import subprocess
import sys
from pathlib import Path

import pytest

from predictive_headroom.cli import main
from predictive_headroom.policy.load import ConfigError, load_policy, parse_policy

REPO = Path(__file__).resolve().parents[1]

GOOD_POOL = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 10
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_policy(text, "test.yaml")
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            GOOD_POOL
            + "    schedules:\n      - {name: a, start: '0 25 * * *', end: '0 18 * * *', desiredReplicas: 1}\n",
            "line 6: pools[0].schedules[0].start: invalid cron expression '0 25 * * *'",
        ),
        (
            GOOD_POOL
            + "    schedules:\n      - {name: a, start: '0 8 * *', end: '0 18 * * *', desiredReplicas: 1}\n",
            "pools[0].schedules[0].start: cron expression '0 8 * *' has 4 fields; expected 5",
        ),
        (
            GOOD_POOL
            + "    schedules:\n      - {name: a, timezone: Europe/Berln, start: '0 8 * * *', end: '0 9 * * *', desiredReplicas: 1}\n",
            "pools[0].schedules[0].timezone: unknown IANA time zone 'Europe/Berln'; did you mean 'Europe/Berlin'?",
        ),
        (
            GOOD_POOL
            + "    schedules:\n      - {name: a, start: '0 8 * * *', end: '0  8 * * *', desiredReplicas: 1}\n",
            "pools[0].schedules[0].end: end '0  8 * * *' equals start",
        ),
        (
            GOOD_POOL + "    minReplicas: 12\n",
            "line 5: pools[0].minReplicas: minReplicas 12 is greater than maxReplicas 10",
        ),
        (
            GOOD_POOL
            + "    protection: 95%\n    forecast: {query: q, demandPerReplica: 5, burstQuantile: 0.9}\n",
            "line 6: pools[0].forecast.burstQuantile: set protection or forecast.burstQuantile, not both",
        ),
        (
            GOOD_POOL
            + "    protection: 95%\n    forecast: {query: q, demandPerReplica: 5, reserve: 2}\n",
            "line 6: pools[0].forecast.reserve: set protection or forecast.reserve, not both",
        ),
        (
            GOOD_POOL + "    protection: 95%\n",
            "line 5: pools[0].protection: protection needs a forecast",
        ),
        (
            GOOD_POOL + "    protection: 120%\n    forecast: {query: q, demandPerReplica: 5}\n",
            "pools[0].protection: Input should be less than or equal to 1",
        ),
        (
            GOOD_POOL + "    protection: most\n    forecast: {query: q, demandPerReplica: 5}\n",
            "line 5: pools[0].protection: 'most' is not a number; write a protection like 95%",
        ),
        (
            GOOD_POOL + "    minReplicas: -1\n",
            "pools[0].minReplicas: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            GOOD_POOL + "    leadTime: -5m\n",
            "pools[0].leadTime: a duration cannot be negative, got '-5m'",
        ),
        (
            GOOD_POOL + "    leadTime: soon\n",
            "pools[0].leadTime: expected a duration such as 90s, 10m, 6h or 28d, got 'soon'",
        ),
        (
            GOOD_POOL
            + "    proportional:\n      ladder: {nodesToReplicas: [[1, 1], [5, 2], [1, 4]]}\n",
            "pools[0].proportional.ladder.nodesToReplicas: threshold 1 appears twice (steps 0 and 2)",
        ),
        (
            GOOD_POOL + "    leadTim: 5m\n",
            "line 5: pools[0].leadTim: unknown key 'leadTim'; did you mean 'leadTime'?",
        ),
        (
            GOOD_POOL
            + "    schedules:\n      - {name: a, start: '0 8 * * *', end: '0 9 * * *', desiredReplicas: 1}\n"
            "      - {name: a, start: '0 10 * * *', end: '0 11 * * *', desiredReplicas: 1}\n",
            "line 7: pools[0].schedules[1].name: duplicate window name 'a'",
        ),
        (
            GOOD_POOL + GOOD_POOL.split("\n", 1)[1],
            "line 5: pools[1].name: duplicate pool name 'web'",
        ),
        (
            GOOD_POOL + "    proportional:\n      linear: {}\n",
            "set coresPerReplica or nodesPerReplica",
        ),
        (
            GOOD_POOL + "    forecast: {query: up, demandPerReplica: 0}\n",
            "pools[0].forecast.demandPerReplica: Input should be greater than 0",
        ),
        ("pools:\n  - name: web\n    target: [oops\n", "not valid YAML"),
        ("pools: []\n", "pools: List should have at least 1 item"),
        ("- just a list\n", "expected a mapping with a 'pools' list"),
    ],
)
def test_each_bad_input_is_named(text, expected):
    found = problems(text)
    assert any(expected in p for p in found), found


def test_yaml_syntax_error_has_a_line_number():
    found = problems("pools:\n  - name: web\n    target: {namespace: ns\n    maxReplicas: 1\n")
    assert found[0].startswith("line ")


def test_every_problem_is_reported_at_once():
    text = GOOD_POOL.replace(
        "maxReplicas: 10", "maxReplicas: 1\n    minReplicas: 3\n    leadTim: 5m"
    ) + (
        "    schedules:\n      - {name: a, timezone: Mars/Base, start: '0 8 * * *', end: '0 8 * * *', desiredReplicas: -2}\n"
    )
    found = problems(text)
    for fragment in (
        "minReplicas 3 is greater",
        "unknown key 'leadTim'",
        "Mars/Base",
        "equals start",
        "desiredReplicas",
    ):
        assert any(fragment in p for p in found), (fragment, found)


def test_shipped_examples_are_valid(capsys):
    files = sorted(str(p) for p in (REPO / "config").glob("*.yaml"))
    assert files
    assert main(["validate", *files]) == 0
    out = capsys.readouterr().out
    assert all(f"{f}: ok (policy):" in out for f in files)


def test_validate_exits_2_and_lists_problems_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD_POOL + "    minReplicas: 12\n    leadTim: 1m\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "pools[0].minReplicas" in err and "pools[0].leadTim" in err


def test_missing_file(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "file not found" in capsys.readouterr().err


@pytest.mark.slow
def test_console_entry_point_runs():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "predictive_headroom",
            "validate",
            str(REPO / "config" / "example.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "ok (policy): 2 pool(s)" in result.stdout


def test_example_covers_every_policy_field():
    policy = load_policy(REPO / "config" / "example.yaml")
    web = policy.pool("web")
    assert web.proportional and web.proportional.linear and web.forecast and web.schedules
    assert policy.pool("batch").target.kind == "CapacityBuffer"
    assert policy.cost and policy.cost.cost_per_gib_hour > 0


def test_unknown_holiday_country_is_rejected():
    found = problems(GOOD_POOL + "    forecast: {query: up, demandPerReplica: 1, holidays: XX}\n")
    assert any(
        "pools[0].forecast.holidays: no holiday calendar for country code 'XX'" in p for p in found
    ), found


@pytest.mark.parametrize(
    "query, expected",
    [
        ("sum(rate(x[5m])", "column 4: parenthesis '(' is never closed"),
        ('sum(rate(x{job="web}[5m]))', 'column 16: string opened with " is never closed'),
        ("sum(rate(x[5m])))", "column 17: unexpected closing ')'"),
        ("rate(x)", "not valid PromQL: expected type matrix in call to function 'rate'"),
    ],
)
def test_promql_is_parsed_with_position_and_query(query, expected):
    found = problems(GOOD_POOL + f"    forecast: {{query: '{query}', demandPerReplica: 1}}\n")
    (problem,) = found
    assert problem.startswith("line 5: pools[0].forecast.query: ") and expected in problem, found
    assert query in problem


@pytest.mark.parametrize(
    "query",
    [
        'histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket{job="web"}[5m])))',
        "last_over_time(taxi_passengers[30m])",
        "rollup_candlestick(x[5m])",  # a MetricsQL function: the backend decides
    ],
)
def test_valid_promql_passes(query):
    parse_policy(GOOD_POOL + f"    forecast: {{query: '{query}', demandPerReplica: 1}}\n")


@pytest.mark.parametrize(
    "start, end, message",
    [
        ("@daily", "@hourly", None),
        ("@midnight", "0 6 * * *", None),
        ("@daily", "@midnight", "equals start"),
        ("@every 5m", "0 6 * * *", "@every is not supported"),
        ("@fortnightly", "0 6 * * *", "unknown cron descriptor '@fortnightly'"),
    ],
)
def test_cron_descriptors_as_keda_accepts_them(start, end, message):
    text = GOOD_POOL + (
        f"    schedules:\n      - {{name: a, start: '{start}', end: '{end}', desiredReplicas: 1}}\n"
    )
    if message is None:
        assert parse_policy(text).pools[0].schedules[0].start == start
    else:
        assert any(message in p for p in problems(text))


@pytest.mark.parametrize(
    "url, message",
    [
        (
            "prometheus:9090",
            "has no scheme; write it with http:// or https://, e.g. http://prometheus:9090",
        ),
        ("localhost:9090/prom", "has no scheme"),
        ("ftp://prom:21", "uses ftp://"),
        ("http://", "has no host"),
    ],
)
def test_prometheus_url_needs_a_scheme(url, message, monkeypatch):
    from pydantic import ValidationError

    from predictive_headroom.policy.settings import Settings

    monkeypatch.setenv("PH_PROMETHEUS_URL", url)
    with pytest.raises(ValidationError, match=message):
        Settings()


def test_prometheus_url_with_a_scheme_passes(monkeypatch):
    from predictive_headroom.policy.settings import Settings

    monkeypatch.setenv("PH_PROMETHEUS_URL", "https://thanos.example.com/prometheus")
    assert Settings().prometheus_url == "https://thanos.example.com/prometheus"


def test_every_listed_time_zone_loads():
    """zones.txt (the schema's enum) names only zones zoneinfo can load: IANA never removes a
    name (old ones stay as links), so a newer tzdata keeps this true."""
    from zoneinfo import ZoneInfo

    from predictive_headroom.policy.zones import zone_names

    names = zone_names()
    assert len(names) > 400 and "Europe/Berlin" in names and "UTC" in names
    for name in names:
        ZoneInfo(name)


def test_plan_without_nodes_says_the_proportional_rule_was_skipped(capsys):
    config = str(REPO / "config" / "example.yaml")
    assert main(["plan", "--config", config, "--at", "2026-11-23T07:00:00Z"]) == 0
    assert "proportional rule of pool(s) web was skipped: pass --nodes" in capsys.readouterr().err
    assert (
        main(
            ["plan", "-c", config, "--at", "2026-11-23T07:00:00Z", "--nodes", "3", "--cores", "12"]
        )
        == 0
    )
    assert "skipped" not in capsys.readouterr().err


def test_protection_reads_percent_or_share():
    for text in ("95%", "0.95"):
        policy = parse_policy(
            GOOD_POOL
            + f"    protection: {text!r}\n    forecast: {{query: q, demandPerReplica: 5}}\n",
            "t.yaml",
        )
        assert policy.pools[0].protection == 0.95


def test_a_pool_key_written_under_forecast_says_it_belongs_on_the_pool():
    found = problems(
        GOOD_POOL
        + "    forecast:\n      query: up\n      demandPerReplica: 1\n      protection: 95%\n"
    )
    assert found == [
        "line 8: pools[0].forecast.protection: unknown key 'protection' here: it belongs on the "
        "pool (pools[0].protection), not under forecast; move it up one level"
    ], found


@pytest.mark.parametrize(
    "window, field, words",
    [
        # a date under end (from given): only the message that fixes it, not "has 2 fields"
        (
            "{name: sale, from: '2026-11-27 06:00', end: '2026-11-27 23:00', desiredReplicas: 1}",
            "end",
            ["is a date", "write to: '2026-11-27 23:00' in place of end"],
        ),
        (
            "{name: sale, start: '2026-11-27', to: '2026-11-28', desiredReplicas: 1}",
            "start",
            ["is a date", "write from: '2026-11-27' in place of start"],
        ),
        (
            "{name: sale, start: '0 8 * * *', end: '0 9 * * *', from: 2026-11-27, to: 2026-11-28, desiredReplicas: 1}",
            "from",
            ["not both: remove start/end or from/to"],
        ),
    ],
)
def test_a_window_mixing_recurring_and_dated_keys_gets_only_the_message_that_fixes_it(
    window, field, words
):
    [problem] = problems(GOOD_POOL + f"    schedules:\n      - {window}\n")
    assert f"pools[0].schedules[0].{field}: " in problem, problem
    for word in words:
        assert word in problem, problem


def test_dates_under_start_and_end_point_at_from_and_to():
    found = problems(
        GOOD_POOL
        + "    schedules:\n      - {name: a, start: '2026-11-27', end: '2026-11-28', desiredReplicas: 1}\n"
    )
    assert len(found) == 2 and all("is a date, not a cron" in p for p in found), found
    assert "(from: '2026-11-27')" in found[1] and "(to: '2026-11-28')" in found[0], found


@pytest.mark.parametrize(
    "key, value, where",
    [
        ("skipHolidays", "DE", "it belongs under schedules (pools[0].schedules[].skipHolidays)"),
        ("desiredReplicas", "3", "pools[0].schedules[].desiredReplicas"),
        ("query", "up", "it belongs under forecast (pools[0].forecast.query)"),
    ],
)
def test_a_key_that_belongs_further_down_says_where(key, value, where):
    [problem] = problems(GOOD_POOL + f"    {key}: {value}\n")
    assert problem.startswith(f"line 5: pools[0].{key}: unknown key {key!r} here: ")
    assert where in problem, problem


def test_a_key_in_another_section_of_the_pool_says_where_it_goes():
    [problem] = problems(
        GOOD_POOL + "    forecast: {query: up, demandPerReplica: 5, skipHolidays: DE}\n"
    )
    assert "pools[0].forecast.skipHolidays: unknown key 'skipHolidays' here: " in problem
    assert "it belongs under schedules (pools[0].schedules[].skipHolidays)" in problem, problem


@pytest.mark.parametrize(
    "cron, words",
    [
        ("0 25 * * *", "hour field '25': 25 is out of range; the hour field takes 0-23"),
        ("61 8 * * *", "minute field '61': 61 is out of range; the minute field takes 0-59"),
        (
            "0 8 32 * *",
            "day-of-month field '32': 32 is out of range; the day-of-month field takes 1-31",
        ),
        (
            "0 8 * 13 *",
            "month field '13': 13 is out of range; the month field takes 1-12 or jan-dec",
        ),
        ("0 18-8 * * *", "hour field '18-8': the range '18-8' runs backwards"),
        ("0 */0 * * *", "hour field '*/0': the step '0' is not a whole number of at least 1"),
        ("0 8 * jab *", "month field 'jab': 'jab' is not a number"),
    ],
)
def test_cron_field_errors_are_in_the_products_words(cron, words):
    [problem] = problems(
        GOOD_POOL
        + f"    schedules:\n      - {{name: a, start: '{cron}', end: '0 23 * * *', desiredReplicas: 1}}\n"
    )
    assert words in problem, problem
    assert "Error validating" not in problem and "Unrecognized" not in problem, problem


@pytest.mark.parametrize(
    "added, expected",
    [
        (
            "",
            "line 3: pools[0].target.kinds: unknown key 'kinds'; did you mean 'kind'? "
            "(allowed: apiVersion, kind, name, namespace)",
        ),
        (
            "    placeholder: {spread: {mod: none}}\n",
            "line 5: pools[0].placeholder.spread.mod: unknown key 'mod'; did you mean 'mode'? "
            "(allowed: mode, topologyKey, whenUnsatisfiable)",
        ),
        (
            "    proportional: {linear: {coresPerReplica: .inf}}\n",
            "line 5: pools[0].proportional.linear.coresPerReplica: Input should be a finite "
            "number (got inf)",
        ),
        (
            "    disruption: {taint: [a]}\n",
            "line 5: pools[0].disruption.taint: unknown key 'taint'; did you mean 'taints'? "
            "(allowed: enabled, interruptionRate, spot, taints)",
        ),
        (
            "cost: {currancy: USD}\n",
            "line 5: cost.currancy: unknown key 'currancy'; did you mean 'currency'? (allowed: "
            "costPerCpuHour, costPerGiBHour, currency, nodeCpu, nodeHourPrice, nodeMemory)",
        ),
    ],
)
def test_every_policy_section_refuses_bad_keys_and_numbers_in_the_same_words(added, expected):
    """The five files of policy sections share one base (`policy.model.PolicyModel`)."""
    text = (
        GOOD_POOL + added if added else GOOD_POOL.replace("placeholder}", "placeholder, kinds: x}")
    )
    assert problems(text) == [expected]


def test_every_policy_section_subclasses_the_one_base():
    import importlib
    import inspect
    import pkgutil

    from pydantic import BaseModel, RootModel

    import predictive_headroom.policy as package
    from predictive_headroom.policy.model import PolicyModel

    other_bases = {"ChartPolicy", "Settings"}  # chart values keep unknown keys; the environment
    strays = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            is_model = issubclass(cls, BaseModel) and cls.__module__ == module.__name__
            is_model = is_model and not issubclass(cls, RootModel)  # a value, not a section
            if is_model and not issubclass(cls, PolicyModel) and name not in other_bases:
                strays.append(f"{module.__name__}.{name}")
    assert strays == [], f"{strays}: subclass policy.model.PolicyModel, not a copy of its config"
