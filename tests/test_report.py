"""The report's facts (peaks, cost, accuracy, past forecasts, warnings), its files, and the CLI's errors."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from fitting import fit_args
from testdata import series_path

from predictive_headroom.app.inputs import with_plan_inputs
from predictive_headroom.cli import main
from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.series import (
    DAY_SECONDS,
    WEEK_SECONDS,
    Forecast,
    History,
    NoForecast,
    Unobserved,
)
from predictive_headroom.core.settings import PlanSettings, resolve_settings
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.report.build import Report, ReportInputs, build_report, report_to_json
from predictive_headroom.report.store import (
    latest_report_dir,
    load_past_reports,
    write_report,
)
from predictive_headroom.sources.csvsource import read_csv_history

TAXI = series_path("nab_nyc_taxi_30min")
HOUR = 3600.0
# A Monday, 00:00 UTC, in the middle of the taxi series.
MONDAY = datetime(2014, 12, 8, tzinfo=UTC).timestamp()


def configured(policy: Policy) -> dict[str, PlanSettings]:
    """Every pool's settings from its configuration alone: a report without a fit or a daemon."""
    return {pool.name: resolve_settings(pool) for pool in policy.pools}


def report_of(
    policy: Policy,
    histories: Mapping[str, History],
    forecasts: Mapping[str, Forecast | NoForecast],
    accuracies: Mapping[str, Any],
    at: float,
    cluster: ClusterState | None = None,
    past: Sequence[Mapping[str, Any]] = (),
    **inputs: Any,
) -> Report:
    """`build_report` with every pool's configured settings (unless `settings=` says otherwise);
    the other keywords are `ReportInputs` fields (`observed`, `loop`, `promises`, `parts`)."""
    given = ReportInputs(
        **{"settings": configured(policy), **inputs},
        histories=histories,
        forecasts=forecasts,
        accuracies=accuracies,
    )
    return build_report(policy, with_plan_inputs(policy, given, at, cluster), at, past)


def policy(
    extra: str = "",
    forecast: str = "{query: taxi, demandPerReplica: 1000, step: 30m}",
    cost: bool = False,
):
    text = f"""
pools:
  - name: taxi
    target: {{namespace: ns, name: taxi-placeholder}}
    maxReplicas: 40
    leadTime: 1h
    forecast: {forecast}
{extra}
"""
    if cost:
        text += "cost: {costPerCpuHour: 0.04, costPerGiBHour: 0.005, currency: EUR}\n"
    return parse_policy(text)


@pytest.fixture(scope="module")
def taxi() -> History:
    full = read_csv_history(TAXI)
    return full.since(MONDAY - 21 * DAY_SECONDS).until(MONDAY + 2 * DAY_SECONDS)


def seasonal_forecast(
    history: History, at: float, horizon: float = 2 * DAY_SECONDS, width: float = 0.8
) -> Forecast:
    """Same time last week, with a band from last week's errors of that rule: a simple real forecast."""
    known = history.until(at)
    step = known.step_seconds
    times = at + step * np.arange(int(horizon / step) + 1)
    yhat = np.interp(times - WEEK_SECONDS, known.times, known.values)
    recent = known.since(at - WEEK_SECONDS)
    errors = recent.values - np.interp(recent.times - WEEK_SECONDS, known.times, known.values)
    lo, hi = np.quantile(errors, [(1 - width) / 2, (1 + width) / 2])
    return Forecast(
        times, yhat, np.maximum(yhat + lo, 0), yhat + hi, "seasonal-naive-test", known.end
    )


def test_peaks_are_the_forecast_highs_with_the_pods_warm_during_the_lead_time(taxi):
    p = policy()
    forecast = seasonal_forecast(taxi, MONDAY)
    report = report_of(p, {"taxi": taxi}, {"taxi": forecast}, {}, MONDAY)
    [r] = report.pools
    assert 1 <= len(r.peaks) <= 3
    for peak in r.peaks:
        assert MONDAY < peak.at <= forecast.expires_at
        around = (forecast.times >= peak.at - 6 * HOUR) & (forecast.times <= peak.at + 6 * HOUR)
        assert peak.demand == pytest.approx(forecast.yhat[around].max())
        lead = (r.plan_times >= peak.at - HOUR) & (r.plan_times <= peak.at)
        assert peak.warm_replicas == r.plan_desired[lead].max()
        assert (
            peak.warm_from <= peak.at - HOUR
            or r.plan_desired[r.plan_times == peak.warm_from][0] == peak.warm_replicas
        )
        # From warm_from until the peak the count never drops below the warm count.
        between = (r.plan_times >= peak.warm_from) & (r.plan_times <= peak.at - HOUR)
        assert (r.plan_desired[between] >= peak.warm_replicas).all()
    # Peaks stand at least 6 h apart (the taxi series has a midday and an evening high).
    assert np.diff([pk.at for pk in r.peaks]).min() > 6 * HOUR


@pytest.mark.slow
def test_cost_is_pods_times_hours_priced_by_the_placeholder_requests():
    p = parse_policy("""
pools:
  - name: batch
    target: {namespace: ns, name: batch-placeholder}
    minReplicas: 2
    maxReplicas: 10
    leadTime: 0s
    scaleDownStabilization: 0s
    schedules:
      - {name: office, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: 5}
    placeholder: {cpu: 500m, memory: 2Gi}
cost: {costPerCpuHour: 0.04, costPerGiBHour: 0.005, currency: EUR}
""")
    [r] = report_of(p, {}, {}, {}, MONDAY).pools
    # 48 h with 2 pods, plus 3 more during two 10-hour office windows.
    assert r.cost.hours == 48
    assert r.cost.replica_hours == pytest.approx(2 * 48 + 3 * 10 * 2)
    assert r.cost.cpu_hours == pytest.approx(78)
    assert r.cost.gib_hours == pytest.approx(312)
    assert r.cost.money == pytest.approx(78 * 0.04 + 312 * 0.005)
    assert (
        r.cost.currency == "EUR"
        and r.cost.peak_replicas == 5
        and r.cost.static_replica_hours == 240
    )
    assert [name for name, _, _ in r.windows] == ["office", "office"]
    assert {reason for reason in r.plan_reasons} == {"min", "schedule:office"}


GOOD_ACCURACY = {
    "model": "test",
    "mape": 9.0,
    "smape": 9.0,
    "mase": 0.8,
    "coverage": 0.78,
    "interval_width": 0.8,
}


@pytest.mark.parametrize(
    ("name", "forecast_yaml", "extra", "history_days", "forecast_kind", "accuracy", "expected"),
    [
        ("healthy", None, "", 21, "fit", GOOD_ACCURACY, set()),
        ("two weeks are preferred", None, "", 9, "fit", GOOD_ACCURACY, {"short-history"}),
        (
            "too little history",
            None,
            "",
            0.5,
            NoForecast("insufficient-history", "12 h of history"),
            None,
            {"too-little-history", "forecast-unavailable"},
        ),
        (
            "low coverage",
            None,
            "",
            21,
            "fit",
            {**GOOD_ACCURACY, "coverage": 0.62},
            {"low-coverage"},
        ),
        (
            "coverage just inside the margin",
            None,
            "",
            21,
            "fit",
            {**GOOD_ACCURACY, "coverage": 0.71},
            set(),
        ),
        (
            "disabled",
            "{enabled: false, query: taxi, demandPerReplica: 1000}",
            "",
            21,
            NoForecast("disabled"),
            None,
            {"forecast-disabled"},
        ),
        (
            "prometheus down",
            None,
            "",
            None,
            NoForecast("source-error", "connection refused"),
            None,
            {"forecast-unavailable"},
        ),
        (
            "hits maxReplicas",
            "{query: taxi, demandPerReplica: 10}",
            "",
            21,
            "fit",
            GOOD_ACCURACY,
            {"max-replicas"},
        ),
        (
            "proportional without cluster state",
            None,
            "    proportional: {linear: {nodesPerReplica: 4}}",
            21,
            "fit",
            GOOD_ACCURACY,
            {"no-cluster-state"},
        ),
    ],
)
def test_warnings_a_reviewer_must_see(
    taxi, name, forecast_yaml, extra, history_days, forecast_kind, accuracy, expected
):
    p = policy(extra, forecast_yaml) if forecast_yaml else policy(extra)
    histories = (
        {}
        if history_days is None
        else {"taxi": taxi.until(MONDAY).since(MONDAY - history_days * DAY_SECONDS)}
    )
    forecast = seasonal_forecast(taxi, MONDAY) if forecast_kind == "fit" else forecast_kind
    [r] = report_of(p, histories, {"taxi": forecast}, {"taxi": accuracy}, MONDAY).pools
    codes = {n.code for n in r.notices}
    assert codes == expected, [n.message for n in r.notices]
    if "max-replicas" in expected:
        assert "maxReplicas 40" in next(n.message for n in r.notices if n.code == "max-replicas")


def test_the_max_replicas_notice_counts_what_the_plan_asked_before_the_cap(taxi):
    p = policy(forecast="{query: taxi, demandPerReplica: 1000, step: 30m, reserve: 60}")
    history = {"taxi": taxi.until(MONDAY).since(MONDAY - 21 * DAY_SECONDS)}
    forecast = {"taxi": seasonal_forecast(taxi, MONDAY)}
    [r] = report_of(p, history, forecast, {"taxi": GOOD_ACCURACY}, MONDAY).pools
    [notice] = [n for n in r.notices if n.code == "max-replicas"]
    # the floors alone ask for fewer than 40 (no notice without the reserve); with it, more
    asked = int(re.search(r"up to ([0-9,]+) were asked for \(before the cap\)", notice.message)[1])
    floors_now = max(v for k, v in r.now.components.items() if k != "max" and v is not None)
    assert asked >= floors_now + 60 > 40 and "maxReplicas 40" in notice.message, notice.message
    assert asked < 100  # the floors plus the reserve, not a sum over the horizon


def test_past_forecasts_are_judged_against_what_happened(taxi):
    p = policy()
    day_before = MONDAY - DAY_SECONDS
    earlier = report_of(
        p,
        {"taxi": taxi.until(day_before)},
        {"taxi": seasonal_forecast(taxi, day_before)},
        {},
        day_before,
    )
    saved = json.loads(json.dumps(report_to_json(earlier), allow_nan=False))
    now = report_of(
        p, {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, MONDAY)}, {}, MONDAY, past=[saved]
    )
    [past] = now.pools[0].past
    actual = taxi.since(day_before + 1).until(MONDAY)
    assert past.made_at == day_before and past.times.size == len(actual) == 48
    predicted = np.interp(
        actual.times, earlier.pools[0].forecast.times, earlier.pools[0].forecast.yhat
    )
    assert past.mape == pytest.approx(
        100 * np.mean(np.abs(actual.values - predicted) / actual.values), rel=1e-4
    )
    assert 0 <= past.coverage <= 1
    out = report_to_json(now)["pools"][0]["past_forecasts"]
    assert out == [
        {
            "made_at": "2014-12-07T00:00:00Z",
            "points": 48,
            "mape": past.mape,
            "coverage": past.coverage,
        }
    ]


def test_report_json_holds_the_facts(taxi):
    report = report_of(
        policy(cost=True),
        {"taxi": taxi},
        {"taxi": seasonal_forecast(taxi, MONDAY)},
        {"taxi": GOOD_ACCURACY},
        MONDAY,
    )
    data = json.loads(json.dumps(report_to_json(report), allow_nan=False))
    [pool] = data["pools"]
    assert data["generated_at"] == "2014-12-08T00:00:00Z"
    assert pool["plan"]["changes"][0]["at"] == "2014-12-08T00:00:00Z"
    assert len(pool["forecast"]["series"]["times"]) == 97  # 48 h at 30 min, both ends
    assert pool["cost"]["currency"] == "EUR" and pool["cost"]["money"] > 0
    assert pool["accuracy"] == GOOD_ACCURACY and pool["warnings"] == []


@pytest.mark.slow
def test_write_report_keeps_the_last_n_and_points_latest_at_the_newest(tmp_path, taxi):
    p = policy()
    days = [
        MONDAY - 3 * DAY_SECONDS,
        MONDAY - 2 * DAY_SECONDS,
        MONDAY - DAY_SECONDS,
        MONDAY,
        MONDAY,
    ]
    written = [
        write_report(
            tmp_path,
            report_of(p, {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, at)}, {}, at),
            keep=3,
        )
        for at in days
    ]
    kept = sorted(
        d.name for d in tmp_path.iterdir() if not d.name.startswith(".") and d.name != "latest"
    )
    assert kept == ["20141207T000000Z", "20141208T000000Z", "20141208T000000Z-1"]
    assert latest_report_dir(tmp_path) == written[-1] == tmp_path / "20141208T000000Z-1"
    assert (tmp_path / "latest" / "index.html").read_text().startswith("<!DOCTYPE html>")
    assert [json.loads((d / "report.json").read_text())["at"] for d in written[-1:]] == [MONDAY]
    assert [r["generated_at"] for r in load_past_reports(tmp_path)] == [
        "2014-12-07T00:00:00Z",
        "2014-12-08T00:00:00Z",
        "2014-12-08T00:00:00Z",
    ]
    assert latest_report_dir(tmp_path / "nothing-here") is None


@pytest.mark.slow
def test_cli_report_from_a_csv_alone_uses_the_default_pool_and_replaces_a_previous_report(
    tmp_path, capsys
):
    csv = tmp_path / "taxi.csv"
    lines = TAXI.read_text().splitlines()
    csv.write_text("\n".join(lines[:1] + lines[3000:4100]) + "\n")  # about 23 days
    out = tmp_path / "report"
    for _ in range(2):
        assert main(["report", "--data", str(csv), "--out", str(out)]) == 0
        assert capsys.readouterr().out.strip() == str(out / "index.html")
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "report.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "report",
        "taxi.csv",
    ]  # nothing left aside
    data = json.loads((out / "report.json").read_text())
    [pool] = data["pools"]
    assert pool["name"] == "default" and pool["forecast"]["status"] == "ok"
    assert data["generated_at"] == lines[4099].split(",")[0]  # --at defaults to the end of the data
    assert pool["accuracy"]["points"] > 0 and pool["peaks"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty file", "the file is empty"),
        ("header only", "no data rows"),
        ("unreachable prometheus", "cannot read demand history"),
        ("prometheus without config", "--prometheus-url needs --config"),
        ("out is a file", "exists and is not a directory"),
        ("out under a file", "cannot write there"),
        ("out holds other files", "holds other files"),
    ],
)
def test_cli_bad_input_is_a_clear_error_and_leaves_no_half_report(
    tmp_path, capsys, monkeypatch, case, message
):
    monkeypatch.setenv("PH_PROMETHEUS_RETRIES", "0")
    monkeypatch.setenv("PH_PROMETHEUS_TIMEOUT", "5")
    config = tmp_path / "policy.yaml"
    config.write_text(
        "pools:\n  - {name: web, target: {namespace: ns, name: web}, maxReplicas: 3, forecast: {query: up, demandPerReplica: 1}}\n"
    )
    data = tmp_path / "data.csv"
    data.write_text(
        {"empty file": "", "header only": "timestamp,value\n"}.get(case, TAXI.read_text())
    )
    out = tmp_path / "out" / "report"
    args = ["report", "--data", str(data)]
    if case == "unreachable prometheus":
        args = [
            "report",
            "--prometheus-url",
            f"http://127.0.0.1:{_closed_port()}",
            "--config",
            str(config),
        ]
    elif case == "prometheus without config":
        args = ["report", "--prometheus-url", f"http://127.0.0.1:{_closed_port()}"]
    elif case == "out is a file":
        out.parent.mkdir()
        out.write_text("keep me")
    elif case == "out under a file":
        (tmp_path / "out").write_text("keep me")
    elif case == "out holds other files":
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("keep me")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("predictive-headroom: error:") and message in err, err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written, nothing removed


@pytest.mark.slow
def test_the_page_shows_past_forecasts_next_to_what_happened(taxi):
    from predictive_headroom.report.html import (
        fmt_percent,
        fmt_share,
        fmt_time,
        render_html,
    )

    p = policy()
    past = []
    for days in (2, 1):
        at = MONDAY - days * DAY_SECONDS
        made = report_of(p, {"taxi": taxi.until(at)}, {"taxi": seasonal_forecast(taxi, at)}, {}, at)
        past.append(report_to_json(made))
    report = report_of(
        p, {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, MONDAY)}, {}, MONDAY, past=past
    )
    page = render_html(report)
    assert "Past forecasts against what happened" in page and page.count("<svg") == 3
    for judged in report.pools[0].past:
        assert (
            f"<td>{fmt_time(judged.made_at)}</td><td>{judged.times.size}</td><td>{fmt_percent(judged.mape)}</td><td>{fmt_share(judged.coverage)}</td>"
            in page
        )
    assert [j.times.size for j in report.pools[0].past] == [96, 48]


@pytest.fixture(scope="module")
def with_model():
    """A policy, its history and a forecast carrying a burst model (no Prophet: fast)."""
    from test_burst_model import BurstNaiveForecaster, level_scaled

    history = level_scaled(6, seed=2)
    at = history.end - DAY_SECONDS
    p = policy(forecast="{query: q, demandPerReplica: 5, observationDelay: 1m}")
    forecast = BurstNaiveForecaster().fit(
        history.until(at), *fit_args(p.pools[0].forecast, 3600.0), at
    )
    assert forecast.burst_model is not None
    return p, history, forecast, at


@pytest.mark.slow
@pytest.mark.parametrize(
    "observed, words",
    [
        (None, "comes from the burst model on the latest observations"),
        (
            Unobserved("fresh-read-failed", "timeout"),
            "fell back to the refit-time table: reading the latest observations failed (timeout)",
        ),
        (
            "stale",
            "fell back to the refit-time table: the newest known sample was too old",
        ),
    ],
)
def test_the_page_says_in_words_where_the_burst_allowance_came_from(observed, words, with_model):
    from predictive_headroom.report.html import render_html

    p, history, forecast, at = with_model
    seen = {"taxi": history.until(at - 6 * 3600)} if observed == "stale" else {}
    if isinstance(observed, Unobserved):
        seen = {"taxi": observed}
    report = report_of(p, {"taxi": history}, {"taxi": forecast}, {}, at, observed=seen)
    now = report_to_json(report)["pools"][0]["plan"]["now"]["details"]
    assert (now["burst_source"] == "model") == (observed is None)
    page = " ".join(render_html(report).split())
    assert words in page
    assert "not the peak level" in page and "worth at 5 a placeholder" in page


@pytest.mark.slow
def test_the_reports_plan_is_the_plan_timeline_and_switches_when_its_window_list_says(taxi):
    """One horizon grid: the report's rows are `plan --horizon`'s (every 15 min from `at` and every
    instant the plan changes), and it switches to a window at the window's own `from`."""
    from predictive_headroom.app.fit import settings_of
    from predictive_headroom.commands.plan import Fitted, plan_timeline

    p = parse_policy(
        """
pools:
  - name: taxi
    target: {namespace: ns, name: taxi-placeholder}
    minReplicas: 1
    maxReplicas: 40
    leadTime: 4m
    schedules:
      - {name: rush, timezone: America/New_York, start: "30 9 * * 1-5", end: "0 12 * * 1-5", desiredReplicas: 30}
    forecast: {query: taxi, demandPerReplica: 1000, step: 30m}
"""
    )
    at = MONDAY + 200.0  # 00:03:20, off every grid
    forecast = seasonal_forecast(taxi, at)
    data = report_to_json(report_of(p, {"taxi": taxi}, {"taxi": forecast}, {}, at))
    [pool] = data["pools"]
    changes = [(c["at"], c["desired_replicas"], c["reason"]) for c in pool["plan"]["changes"]]
    window = pool["schedule_windows"][0]
    assert window["from"] == "2014-12-08T14:26:00Z"  # 09:30 EST, 4 minutes early
    assert (window["from"], 30, "schedule:rush") in changes
    for step in (900.0, 1800.0, 300.0):
        fitted = Fitted(settings_of(p, {}), forecasts={"taxi": forecast})
        [timeline] = plan_timeline(p, at, 2 * DAY_SECONDS, step, None, fitted)
        rows, last = [], None
        for s in timeline["steps"]:
            if (s["desired_replicas"], s["reason"]) != last:
                rows.append((s["at"], s["desired_replicas"], s["reason"]))
                last = (s["desired_replicas"], s["reason"])
        assert rows == changes, step
    assert changes[0][0] == "2014-12-08T00:03:20Z" and len(changes) > 3


def test_the_buffer_conditions_its_autoscaler_reports_are_in_the_report(taxi) -> None:
    from predictive_headroom.protocols import TargetCondition
    from predictive_headroom.report.html import render_html

    at = MONDAY
    conditions = (
        TargetCondition("LimitedByQuotas", "True", "NodePoolLimit", "cpu limit 16 reached"),
        TargetCondition("Provisioning", "True", "RequiresNewCapacity"),
        TargetCondition("ReadyForProvisioning", "True", "Resolved"),
    )
    p = policy()
    report = report_of(
        p, {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, at)}, {}, at,
        targets={"taxi": conditions},
    )  # fmt: skip

    (pool,) = report_to_json(report)["pools"]
    assert pool["target_conditions"][0] == {
        "type": "LimitedByQuotas", "status": "True", "reason": "NodePoolLimit",
        "message": "cpu limit 16 reached",
    }  # fmt: skip
    assert [c["type"] for c in pool["target_conditions"]] == [c.type for c in conditions]
    limited = [w for w in pool["warnings"] if w["code"] == "buffer-limited"]
    assert limited == [
        {
            "code": "buffer-limited",
            "message": "the autoscaler caps the CapacityBuffer below its replicas "
            "(LimitedByQuotas=True: NodePoolLimit: cpu limit 16 reached)",
        }
    ]
    page = " ".join(render_html(report).split())
    assert "What the autoscaler says of the CapacityBuffer" in page
    assert "RequiresNewCapacity" in page and "cpu limit 16 reached" in page
    # Without conditions (a Deployment, or outside the daemon) the section is absent.
    plain = report_of(p, {"taxi": taxi}, {"taxi": seasonal_forecast(taxi, at)}, {}, at)
    assert report_to_json(plain)["pools"][0]["target_conditions"] == []
    assert "What the autoscaler says" not in render_html(plain)
