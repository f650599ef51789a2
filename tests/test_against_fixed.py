"""Against the fixed pause pods users run: `--current N` replayed beside the promise, tune's
recommendation (a protection level or a fixed N judged on the days it did not see), the real
cause of a shortfall, and the bad input of `--current` / `--current-from`."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml
from fake_apiserver import FakeApiServer
from test_backtest import DAY, SeasonalNaiveForecaster, series, write_csv
from test_daemon import write_kubeconfig

from predictive_headroom.backtest.against_fixed import (
    CurrentReplay,
    Judged,
    Recommended,
    current,
    protection_at,
    replays,
)
from predictive_headroom.backtest.choice import recommend_choice
from predictive_headroom.backtest.frontier import Point, protection
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.cli import main
from predictive_headroom.commands import CommandError
from predictive_headroom.commands.current import read_current
from predictive_headroom.core.shortfall import Cause, shortfall_cause
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.load import parse_policy
from predictive_headroom.replay.promise import PROMISE_QUANTILES
from predictive_headroom.replay.setup import WhatIf

POLICY = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: MAX
    leadTime: 4m
    protection: 90%
    forecast: {query: demand, demandPerReplica: 5, history: 28d}
"""


def _pool(max_replicas: int = 200) -> Pool:
    return parse_policy(POLICY.replace("MAX", str(max_replicas)), "t").pools[0]


@pytest.fixture(scope="module")
def replayed():
    """Tune's replay of 12 days (6 scored) of bursty daily demand, with a fast forecaster."""
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=6 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0, 1800.0),
        protections=(0.8, 0.9, 0.95, 0.99),
        burst_view=False,
    )
    result = run_backtest(
        series(12, seed=3), _pool(), settings, forecaster=SeasonalNaiveForecaster()
    )
    return replays(result, (0.9,))


def test_a_fixed_n_is_its_point_of_the_static_curve(replayed):
    result = replayed.result
    reactive = result.strategies["reactive"].metrics
    days = (result.pods.size - result.scored_from) / 1440
    for n, metrics in result.static_curve[:6]:
        c = current(replayed, n)
        assert c.theirs.kept == pytest.approx(
            protection(metrics.unserved_pod_minutes, reactive.unserved_pod_minutes)
        )
        assert c.theirs.per_day == pytest.approx((metrics.node_hours - reactive.node_hours) / days)
    assert current(replayed, 0).theirs.kept == pytest.approx(0.0, abs=1e-9)


def test_the_answer_reads_the_promise_curve_at_the_n_cost_and_protection(replayed):
    for n in (1, 4, 40):
        c = current(replayed, n)
        said = c.sentence()
        assert f"kept {100 * c.theirs.kept:.1f}%" in said
        assert "predictive headroom at the same cost kept" in said
        assert said.startswith("your fixed") == c.theirs_better
        if c.theirs_better:
            assert said.startswith(f"your fixed {n} did better on this history")
        else:  # ours kept the same for less, so at the same cost it kept at least as much
            assert c.ours_cost_same_kept is not None
            assert c.ours_cost_same_kept <= c.theirs.per_day
            assert c.ours_kept_same_cost >= c.theirs.kept - 1e-6
    assert current(replayed, 40).to_dict()["replicas"] == 40


@pytest.mark.parametrize(
    ("theirs", "ours_cost", "better"),
    [
        (Judged(0.9, 10.0, 10.0), 6.0, False),  # ours cheaper at the same protection
        (Judged(0.9, 10.0, 10.0), 12.0, True),  # theirs cheaper
        (Judged(0.99, 30.0, 30.0), None, True),  # ours never kept 99%
    ],
)
def test_who_did_better(theirs, ours_cost, better):
    c = CurrentReplay(20, theirs, 0.8, ours_cost)
    assert c.theirs_better is better
    assert ("did better on this history" in c.sentence()) is better
    assert ("never kept that protection" in c.sentence()) is (ours_cost is None)


@pytest.mark.parametrize(
    ("cost", "expected"),
    [(0.0, 0.0), (5.0, 0.4), (10.0, 0.8), (15.0, 0.875), (40.0, 0.95)],
)
def test_protection_at_a_cost_reads_the_frontier(cost, expected):
    # reactive leaves 100 pod-minutes waiting; no headroom is the free point of every family
    points = [Point(10.0, 20.0, "a"), Point(20.0, 5.0, "b"), Point(30.0, 8.0, "dominated")]
    assert protection_at(points, 100.0, cost) == pytest.approx(expected)


def test_the_recommendation_is_judged_on_days_it_did_not_see(replayed):
    rec = recommend_choice(replayed, 0.9)
    assert rec.kind in (Recommended.PROTECTION, Recommended.FIXED)
    assert rec.seen_days == pytest.approx(3.0, abs=0.1)
    assert rec.unseen is not None and rec.unseen_days > 0
    if rec.kind == Recommended.PROTECTION:
        assert rec.level is not None and rec.level <= 0.9
    else:  # a fixed N is on the static curve: it costs what static headroom costs there
        assert rec.unseen.over_static == pytest.approx(1.0, abs=0.02)
    said = rec.says()
    assert said.startswith(f"recommended: {rec.label()}")
    assert f"kept {100 * rec.unseen.kept:.1f}%" in said


def test_fixed_headroom_is_pasted_as_a_valid_pool(replayed):
    rec = recommend_choice(replayed, 0.9)
    fixed = type(rec)(**{**rec.__dict__, "kind": Recommended.FIXED, "level": None})
    pool = _pool(max_replicas=2)
    lines = fixed.yaml(pool)
    assert lines[0] == f"minReplicas: {rec.replicas}"
    pasted = copy.deepcopy(yaml.safe_load(POLICY.replace("MAX", "2")))["pools"][0]
    for key in fixed.remove:
        pasted.pop(key)
    pasted.update(yaml.safe_load("\n".join(lines)))  # each line replaces the key it names
    valid = Pool.model_validate(pasted)
    assert valid.forecast is not None and valid.forecast.query == "demand"
    assert valid.min_replicas == rec.replicas and valid.max_replicas >= rec.replicas
    assert valid.forecast is not None and not valid.forecast.enabled


@pytest.mark.parametrize(
    ("kwargs", "cause", "words"),
    [
        ({"retunes_from": 1.7e9}, Cause.WARMUP, "holds the untuned defaults until 2023-11-14"),
        (
            {
                "short_days": 2,
                "of_days": 8,
                "capped_days": 6,
                "max_replicas": 12,
                "fixed": (56, 0.955),
            },
            Cause.CAP,
            "maxReplicas 12 held the plan on 6 of 8 days: raise it to 56 (56 fixed placeholders "
            "kept 95.5% in this replay)",
        ),
        (  # at the cap, but a fixed N under it kept the target: the cap is not the cause
            {
                "short_days": 2,
                "of_days": 8,
                "capped_days": 6,
                "max_replicas": 60,
                "fixed": (56, 0.955),
            },
            Cause.NO_SETTING,
            "on 2 of 8 days nothing the history showed had kept 95%",
        ),
        ({"short_days": 3, "of_days": 8}, Cause.NO_SETTING, "on 3 of 8 days nothing"),
    ],
)
def test_the_real_cause_of_a_shortfall(kwargs, cause, words):
    found = shortfall_cause(0.95, **kwargs)
    assert found.cause == cause
    assert words in found.says()
    assert found.to_dict()["cause"] == str(cause)


def test_the_cap_is_named_in_the_promise_sentence():
    """maxReplicas 3 holds the plan: the backtest's promise names the cap and the N to raise it to."""
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=6 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0,),
        protections=(0.95,),
        burst_view=False,
    )
    result = run_backtest(
        series(10, seed=3), _pool(max_replicas=3), settings, forecaster=SeasonalNaiveForecaster()
    )
    entry = result.promise[0]
    assert entry.realized_protection < 0.95
    cause = entry.to_dict()["cause"]
    assert cause["cause"] == "cap" and cause["raise_to"] > 3 and cause["capped_days"] >= 1
    from predictive_headroom.backtest.promise_measure import sentence

    assert f"maxReplicas 3 held the plan on {cause['capped_days']} of" in sentence(entry)


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["tune", "backtest"])
@pytest.mark.parametrize("value", ["-1", "100001", "twenty", "20,x"])
def test_a_bad_current_exits_2_naming_the_flag(tmp_path, capsys, command, value):
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.replace("MAX", "200"))
    csv = write_csv(tmp_path / "d.csv", series(2))
    with pytest.raises(SystemExit) as exc:
        main([command, "-c", str(policy), "--data", str(csv), f"--current={value}", "-q"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--current" in err and ("whole number" in err or "outside 0 to 100,000" in err)


@pytest.fixture
def apiserver(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with FakeApiServer() as fake:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", fake)))
        yield fake


def test_current_from_reads_the_deployment_replicas(apiserver):
    apiserver.add_deployment("headroom", "overprovisioning", replicas=20)
    assert read_current("headroom/overprovisioning") == 20


@pytest.mark.parametrize(
    ("status", "words"),
    [(404, "not found (404)"), (403, "forbidden (403)")],
)
def test_current_from_refused_exits_2_with_object_and_verb_and_reads_nothing_else(
    apiserver, tmp_path, capsys, status, words
):
    apiserver.add_deployment("headroom", "overprovisioning", replicas=20)
    apiserver.fail("GET", r"/deployments/overprovisioning$", status, times=None)
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.replace("MAX", "200"))
    missing = tmp_path / "never-read.csv"  # read after the Deployment: an error would name it
    for command in ("tune", "backtest"):
        code = main(
            [command, "-c", str(policy), "--data", str(missing), "--current-from",
             "headroom/overprovisioning", "-q"]
        )  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        assert "cannot get deployments.apps overprovisioning in namespace headroom" in err
        assert words in err and "never-read" not in err


def test_current_from_without_a_kubeconfig_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(CommandError, match=r"cannot get deployments.apps web in namespace ns: no "):
        read_current("ns/web")
    with pytest.raises(CommandError, match="NAMESPACE/NAME"):
        read_current("web")


def test_replicas_per_minute_of_a_current_n_are_constant(replayed):
    """The N is replayed as the user runs it: N placeholders every minute, nothing on top."""
    run = replayed.replayed.static_runs.get(4)
    assert run is not None and np.all(run.placeholders == 4)


@pytest.mark.parametrize(
    ("pool_protection", "given", "expected"),
    [
        ("90%", None, (0.9, "configured")),
        ("90%", 0.99, (0.99, "flag")),
        (None, 0.95, (0.95, "flag")),
        (None, None, None),
    ],
)
def test_protection_is_a_resolved_setting_with_its_source(pool_protection, given, expected):
    from predictive_headroom.core.settings import Given, resolve_settings

    text = POLICY.replace("MAX", "200")
    if pool_protection is None:
        text = text.replace("    protection: 90%\n", "")
    pool = parse_policy(text, "t").pools[0]
    settings = resolve_settings(pool, given=Given(protection=given))
    got = settings.protection
    assert (None if got is None else (got.value, str(got.source))) == expected


def test_the_backtest_page_leads_with_the_answer(replayed):
    from dataclasses import replace

    from predictive_headroom.backtest.page import page_html

    said = current(replayed, 4).to_dict()
    html = page_html(replace(replayed.result, current=[said]), svg="")
    assert 'id="current-headline"' in html
    assert said["says"][1:40] in html


@pytest.mark.parametrize(
    ("level", "beats"),
    [((0.95, 0.96, 10.0, 12.0), True), ((0.95, 0.96, 10.0, 8.0), False)],
)
def test_the_daemon_says_whether_its_forecast_beat_a_fixed_n(level, beats):
    from predictive_headroom.app.tuning import Tuning
    from predictive_headroom.core.vocabulary import TuningStatus
    from predictive_headroom.replay.promise_price import Level

    tuning = Tuning(
        "web", TuningStatus.TUNED, 0.9, 300.0, 0.95, "why", 0.0, levels=(Level(*level),),
        fixed=(14, 0.96),
    )  # fmt: skip
    said = tuning.report()["against_fixed"]
    assert said["forecast_beats_fixed"] is beats
    assert ("did not beat a fixed N" in said["says"]) is not beats
    if not beats:
        assert "minReplicas: 14" in said["says"]
    assert tuning.to_dict()["against_fixed"] == said  # /last-run shows the same


def test_the_daemon_names_the_warm_up():
    from predictive_headroom.app.tuning import Tuning
    from predictive_headroom.core.vocabulary import TuningStatus

    tuning = Tuning(
        "web", TuningStatus.DEFAULT, 0.95, 1800.0, 0.95, "too short", 0.0, retunes_from=1.7e9
    )
    cause = tuning.report()["cause"]
    assert cause["cause"] == "warm-up" and "until 2023-11-14" in cause["says"]
    assert tuning.to_dict()["cause"] == cause


@pytest.mark.slow
def test_tune_and_backtest_give_the_same_answer_for_the_same_n(tmp_path, capsys):
    import json

    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.replace("MAX", "200").replace("history: 28d", "history: 9d"))
    csv = write_csv(tmp_path / "d.csv", series(9, seed=5))
    common = ["-c", str(policy), "--data", str(csv), "--current", "3,30", "-q", "-o", "json"]
    grid = ["--windows", "5m,15m,30m"]
    main(["tune", *common, *grid])
    tuned = json.loads(capsys.readouterr().out)
    assert main(["backtest", *common, "--protection", "90%"]) == 0
    backtested = json.loads(capsys.readouterr().out)
    assert [c["replicas"] for c in tuned["current"]] == [3, 30]
    for key in ("kept", "overhead_node_hours_per_day", "ours_kept_same_cost", "says"):
        assert [c[key] for c in tuned["current"]] == [c[key] for c in backtested["current"]], key
    assert tuned["recommendation"]["unseen"] is not None
