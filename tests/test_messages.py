"""Messages in the user's language (issue 49 item 3): each names the field, the value and what
it accepts, where the library underneath says something else."""

import pytest

from predictive_headroom.cli import main
from predictive_headroom.policy.cron import cron_trigger
from predictive_headroom.policy.load import ConfigError, parse_policy
from predictive_headroom.policy.promql import check_promql
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import read_csv_history


@pytest.mark.parametrize(
    "cron, words",
    [
        (
            "0 8 * * mon-fry",
            ["day-of-week field 'mon-fry'", "'fry' is not a day", "mon, tue, wed, thu, fri"],
        ),
        ("0 25 * * *", ["hour field '25'", "23"]),
        ("61 8 * * *", ["minute field '61'"]),
        ("0 8 * jann *", ["month field 'jann'"]),
        ("0 8 32 * *", ["day-of-month field '32'"]),
    ],
)
def test_a_bad_cron_names_its_field_and_value(cron, words):
    with pytest.raises(ValueError) as err:
        cron_trigger(cron)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert "invalid literal" not in str(err.value)


@pytest.mark.parametrize(
    "query, column, words",
    [
        ("sum(rate(x[5m])) by ingress", 21, "write by (ingress)"),
        ("sum(rate(x[5m])) without job", 26, "write without (job)"),
        ("foo bar", 5, "'bar'"),
        ("sum(x) +", 8, "'+'"),
    ],
)
def test_an_invalid_query_shows_the_column_and_a_caret(query, column, words):
    with pytest.raises(ValueError) as err:
        check_promql(query)
    text = str(err.value)
    assert f"at column {column}:" in text and words in text
    _, shown, caret = text.splitlines()
    assert shown.strip() == query and caret.index("^") == shown.index(query) + column - 1


def test_a_misspelt_required_field_is_reported_once_with_the_suggestion():
    text = """
pools:
  - name: web
    target: {namespace: ns, name: ph}
    maxReplicas: 5
    schedules:
      - {name: w, start: "0 8 * * *", end: "0 9 * * *", desiredReplica: 3}
"""
    with pytest.raises(ConfigError) as err:
        parse_policy(text)
    [problem] = err.value.problems
    assert problem.path == "pools[0].schedules[0].desiredReplica"
    assert "did you mean 'desiredReplicas'?" in problem.message


def test_a_required_field_missing_outright_is_still_reported():
    text = """
pools:
  - name: web
    target: {namespace: ns, name: ph}
    maxReplicas: 5
    schedules:
      - {name: w, start: "0 8 * * *", end: "0 9 * * *", other: 3}
"""
    with pytest.raises(ConfigError) as err:
        parse_policy(text)
    paths = sorted(p.path for p in err.value.problems)
    assert paths == ["pools[0].schedules[0].desiredReplicas", "pools[0].schedules[0].other"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_csv_says_to_save_it_as_utf8(tmp_path, encoding):
    path = tmp_path / "demand.csv"
    path.write_bytes("timestamp,value\n2024-01-01T00:00:00Z,1\n".encode(encoding))
    with pytest.raises(SourceError) as err:
        read_csv_history(path)
    assert "UTF-16" in str(err.value) and "save it as UTF-8" in str(err.value)


def test_a_leap_second_is_named_as_one(tmp_path):
    path = tmp_path / "demand.csv"
    path.write_text(
        "timestamp,value\n2016-12-31T23:59:59Z,1\n2016-12-31T23:59:60Z,2\n2017-01-01T00:00:00Z,3\n"
    )
    with pytest.raises(SourceError) as err:
        read_csv_history(path)
    assert ":3: timestamp '2016-12-31T23:59:60Z' is a leap second" in str(err.value)


def test_helm_says_a_bare_lead_time_needs_a_unit():
    import helm_python as helm
    from deploy_render import render_chart

    with pytest.raises(helm.HelmError) as err:
        render_chart({"pools": [{"name": "web", "maxReplicas": 5, "leadTime": 5}]})
    assert "/pools/0/leadTime" in str(err.value)
    assert "a bare number is not a duration: add its unit, e.g. 5m" in str(err.value)


def test_validate_prints_the_cron_field_and_the_promql_caret(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(
        """pools:
  - name: web
    target: {namespace: ns, name: ph}
    maxReplicas: 5
    schedules:
      - {name: w, start: "0 8 * * mon-fry", end: "0 9 * * 1-5", desiredReplicas: 3}
    forecast: {query: "sum(rate(x[5m])) by ingress", demandPerReplica: 1}
"""
    )
    assert main(["validate", "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err
    assert "day-of-week field 'mon-fry'" in err
    assert "not valid PromQL at column 21" in err
