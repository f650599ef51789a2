"""Dated events (`from`/`to`, once) and holiday-aware windows (`skipHolidays`): how a user writes
them, what they plan, and what a mistake in them says (issue 49 item 1)."""

from datetime import UTC, datetime

import numpy as np
import pytest

from predictive_headroom.cli import main
from predictive_headroom.core.engine import schedule_series
from predictive_headroom.core.schedules import open_intervals
from predictive_headroom.policy.config import ScheduleWindow
from predictive_headroom.policy.load import ConfigError, parse_policy

HOUR = 3600.0


def utc(*args):
    return datetime(*args, tzinfo=UTC).timestamp()


def is_open(w, at, lead=0.0):
    return any(a <= at < b for a, b in open_intervals(w, at, at, lead))


def policy(windows: str) -> str:
    return f"""
pools:
  - name: web
    target: {{namespace: headroom, name: web-placeholder}}
    maxReplicas: 50
    leadTime: 5m
    scaleDownStabilization: 0s
    schedules:
{windows}
"""


BLACK_FRIDAY = """
      - name: black-friday
        timezone: Europe/Berlin
        from: 2026-11-27 06:00
        to: 2026-11-27 23:00
        desiredReplicas: 40
"""


def test_a_dated_event_is_open_once_in_its_own_time_zone():
    [w] = parse_policy(policy(BLACK_FRIDAY)).pools[0].schedules
    # 06:00-23:00 Berlin is 05:00-22:00 UTC in November.
    assert open_intervals(w, utc(2026, 1, 1), utc(2027, 12, 31)) == [
        (utc(2026, 11, 27, 5), utc(2026, 11, 27, 22))
    ]
    assert is_open(w, utc(2026, 11, 27, 12))
    assert not is_open(w, utc(2026, 11, 27, 4, 59))
    assert is_open(w, utc(2026, 11, 27, 4, 56), lead=300)  # the lead time opens it early
    assert not is_open(w, utc(2027, 11, 26, 12))  # not next year's Black Friday
    assert not is_open(w, utc(2026, 11, 27, 22))


@pytest.mark.parametrize(
    "start, end, first, last",
    [
        ("2026-11-27", "2026-11-27", utc(2026, 11, 26, 23), utc(2026, 11, 27, 23)),  # the whole day
        ("2026-11-27", "2026-11-29", utc(2026, 11, 26, 23), utc(2026, 11, 29, 23)),
        (
            "2026-11-27T06:00:00+00:00",
            "2026-11-27 08:30",
            utc(2026, 11, 27, 6),
            utc(2026, 11, 27, 7, 30),
        ),
    ],
)
def test_a_date_alone_in_to_includes_that_day(start, end, first, last):
    w = ScheduleWindow.model_validate(
        {"name": "e", "timezone": "Europe/Berlin", "from": start, "to": end, "desiredReplicas": 1}
    )
    assert open_intervals(w, utc(2026, 1, 1), utc(2027, 1, 1)) == [(first, last)]


def test_the_plan_timeline_shows_the_event_like_a_window(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(policy(BLACK_FRIDAY))
    code = main(["plan", "-c", str(path), "--at", "2026-11-26T00:00:00Z", "--horizon", "3d"])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line.split() for line in out.splitlines() if "schedule:black-friday" in line]
    assert rows == [
        ["2026-11-27T04:55:00Z", "40", "schedule:black-friday", "min=0", "max=50", "schedule=40"]
    ]
    assert "2026-11-27T22:00:00Z  0" in out


def test_the_schedule_series_of_the_backtest_and_report_counts_the_event():
    [w] = parse_policy(policy(BLACK_FRIDAY)).pools[0].schedules
    times = utc(2026, 11, 26) + 60.0 * np.arange(3 * 24 * 60)
    floor, which, _ = schedule_series([w], times, 0.0)
    inside = (times >= utc(2026, 11, 27, 5)) & (times < utc(2026, 11, 27, 22))
    assert (floor[inside] == 40).all() and (floor[~inside] == 0).all()
    assert (which[inside] == 0).all()


def business_hours(calendar: str) -> ScheduleWindow:
    return ScheduleWindow.model_validate(
        {
            "name": "office",
            "timezone": "Europe/Berlin",
            "start": "0 8 * * 1-5",
            "end": "0 18 * * 1-5",
            "skipHolidays": calendar,
            "desiredReplicas": 3,
        }
    )


def test_skip_holidays_keeps_the_window_shut_on_the_calendars_holidays():
    # 2026-01-06 (a Tuesday) is Epiphany: a holiday in Bavaria, not in Berlin nor Germany-wide.
    noon = utc(2026, 1, 6, 11)
    assert not is_open(business_hours("DE-BY"), noon)
    assert is_open(business_hours("DE"), noon)
    assert is_open(business_hours("DE-BY"), utc(2026, 1, 7, 11))  # the day after opens
    # Christmas and Boxing Day (Friday, then Saturday) in 2025: the whole week's openings.
    opens = [
        a for a, _ in open_intervals(business_hours("DE"), utc(2025, 12, 22), utc(2025, 12, 27))
    ]
    assert [datetime.fromtimestamp(a, UTC).day for a in opens] == [22, 23, 24]


def test_the_report_lists_the_event_among_its_windows():
    from tests.test_report import report_of

    p = parse_policy(policy(BLACK_FRIDAY))
    [r] = report_of(p, {}, {}, {}, utc(2026, 11, 26, 12)).pools
    assert [(name, a, b) for name, a, b in r.windows] == [
        ("black-friday", utc(2026, 11, 27, 4, 55), utc(2026, 11, 27, 22))
    ]


@pytest.mark.parametrize(
    "window, field, words",
    [
        (
            '{name: e, from: "2026-11-27", to: "2026-11-28", start: "0 8 * * *", end: "0 9 * * *", desiredReplicas: 1}',
            "from",
            "not both",
        ),
        ("{name: e, desiredReplicas: 1}", "start", "from and to"),
        ('{name: e, from: "2026-11-27", desiredReplicas: 1}', "to", "required with from"),
        ('{name: e, start: "0 8 * * *", desiredReplicas: 1}', "end", "required with start"),
        (
            '{name: e, from: "27.11.2026", to: "2026-11-28", desiredReplicas: 1}',
            "from",
            "2026-11-27 06:00",
        ),
        (
            '{name: e, from: "2026-11-28 10:00", to: "2026-11-28 09:00", desiredReplicas: 1}',
            "to",
            "not after from",
        ),
        (
            '{name: e, from: "2026-11-27", to: "2026-11-28", skipHolidays: DE, desiredReplicas: 1}',
            "skipHolidays",
            "recurring windows",
        ),
        (
            '{name: e, start: "0 8 * * *", end: "0 9 * * *", skipHolidays: XX, desiredReplicas: 1}',
            "skipHolidays",
            "ISO 3166",
        ),
        (
            '{name: e, start: "0 8 * * *", end: "0 9 * * *", skipHolidays: DE-XX, desiredReplicas: 1}',
            "skipHolidays",
            "DE-BY",
        ),
    ],
)
def test_a_window_of_neither_shape_says_which_field_and_why(window, field, words):
    with pytest.raises(ConfigError) as err:
        parse_policy(policy(f"      - {window}"))
    [problem] = err.value.problems
    assert problem.path == f"pools[0].schedules[0].{field}" and words in problem.message
    assert problem.line == 9


def test_helm_values_take_an_unquoted_date(tmp_path, capsys):
    path = tmp_path / "values.yaml"
    path.write_text(
        "dryRun: true\npools:\n  - name: web\n    maxReplicas: 50\n    schedules:\n"
        "      - {name: launch, timezone: Europe/Berlin, from: 2026-11-27, to: 2026-11-27, desiredReplicas: 5}\n"
    )
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_the_chart_carries_an_event_to_the_daemons_policy_unchanged():
    import yaml
    from deploy_render import render_chart

    values = yaml.safe_load(
        "pools:\n  - name: web\n    maxReplicas: 50\n    schedules:\n"
        "      - {name: sale, timezone: Europe/Berlin, from: 2026-11-27, to: 2026-11-27 23:00, "
        "desiredReplicas: 5}\n"
    )
    # What `helm install -f` reads: Go's YAML keeps an unquoted date as the string it is.
    values["pools"][0]["schedules"][0]["from"] = "2026-11-27"
    (cm,) = [o for o in render_chart(values) if o["kind"] == "ConfigMap"]
    policy = parse_policy(cm["data"]["config.yaml"])
    [w] = policy.pools[0].schedules
    assert w.event_span() == (utc(2026, 11, 26, 23), utc(2026, 11, 27, 22))


def test_validate_counts_the_events_among_the_windows(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(policy(BLACK_FRIDAY))
    assert main(["validate", "--policy", str(path)]) == 0
    assert "1 schedule window(s) (1 dated event(s))" in capsys.readouterr().out


@pytest.mark.parametrize(
    "windows",
    [BLACK_FRIDAY, '      - {name: w, start: "0 8 * * *", end: "0 9 * * *", desiredReplicas: 1}'],
)
def test_a_window_read_back_from_its_own_dump_is_the_same(windows):
    from predictive_headroom.policy.config import Policy
    from predictive_headroom.policy.load import validate_policy

    p = parse_policy(policy(windows))
    assert validate_policy(p.model_dump(by_alias=True, mode="json")) == p
    assert Policy.model_validate(p.model_dump(by_alias=True)) == p


SPRING_GAP = """
      - name: night-sale
        timezone: Europe/Berlin
        from: 2026-03-29 02:30
        to: 2026-03-29 03:30
        desiredReplicas: 10
"""


def test_an_event_starting_in_the_spring_gap_opens_where_a_recurring_window_would(tmp_path, capsys):
    """Issue 55: `from: 2026-03-29 02:30` (a time Berlin's clocks skip) with `to: 03:30` was
    refused with "to (03:30) is not after from (02:30)". It opens at 03:00 CEST, the first real
    instant after the gap, where a cron start of 02:30 fires that day; `validate` and `plan` say
    so."""
    [w] = parse_policy(policy(SPRING_GAP)).pools[0].schedules
    recurring = ScheduleWindow.model_validate(
        {"name": "r", "timezone": "Europe/Berlin", "start": "30 2 29 3 *", "end": "30 3 29 3 *"}
        | {"desiredReplicas": 1}
    )
    day = (utc(2026, 3, 28), utc(2026, 3, 30))
    assert open_intervals(w, *day) == [(utc(2026, 3, 29, 1), utc(2026, 3, 29, 1, 30))]
    assert open_intervals(w, *day) == open_intervals(recurring, *day)
    path = tmp_path / "p.yaml"
    path.write_text(policy(SPRING_GAP))
    assert main(["validate", "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "note: pools[0].schedules[0].from: 2026-03-29 02:30 does not exist in Europe/Berlin: the "
        "clocks go from 02:00 straight to 03:00 that day" in out
    )
    assert "read as 2026-03-29 03:00 CEST" in out and "03:30 does not exist" not in out
    code = main(["plan", "-c", str(path), "--at", "2026-03-29T00:00:00Z", "--horizon", "3h"])
    captured = capsys.readouterr()
    assert code == 0
    assert "window 'night-sale', from: 2026-03-29 02:30 does not exist" in captured.err
    rows = [line.split()[:3] for line in captured.out.splitlines() if "schedule:night" in line]
    assert rows == [["2026-03-29T00:55:00Z", "10", "schedule:night-sale"]]  # 03:00 less the lead


def test_an_event_inside_the_gap_says_both_ends_move_to_the_same_instant():
    with pytest.raises(ConfigError) as err:
        parse_policy(
            policy(
                '      - {name: e, timezone: Europe/Berlin, from: "2026-03-29 02:10", '
                'to: "2026-03-29 02:50", desiredReplicas: 1}'
            )
        )
    [problem] = err.value.problems
    assert problem.path == "pools[0].schedules[0].to"
    assert "not after from" in problem.message
    assert "2026-03-29 02:50 does not exist in Europe/Berlin" in problem.message
    assert "read as 2026-03-29 03:00 CEST" in problem.message
