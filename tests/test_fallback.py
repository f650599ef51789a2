"""Fixed headroom when the forecast does not pay (`replay/fallback.py`, `protectionFallback:
fixed`): the ledger's verdict, the plan holding a fixed N with a reason word of its own, the
walk-forward replay `backtest --protection` makes of it, and the daemon acting on it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from fake_apiserver import FakeApiServer
from test_backtest import DAY, SeasonalNaiveForecaster
from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config
from test_report import report_of
from test_retune import WINDOW, SeriesSource, jump, pool, tune

from predictive_headroom.backtest.against_fixed import replays
from predictive_headroom.backtest.promise_measure import fixed_book, measure, promise_walk
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.engine import PlanInputs, PoolTimeline, plan_over_time
from predictive_headroom.core.settings import Tuned, resolve_settings
from predictive_headroom.policy.load import ConfigError, parse_policy
from predictive_headroom.replay.fallback import Why, hold_fixed
from predictive_headroom.replay.promise import (
    LOOKBACK,
    PROMISE_QUANTILES,
    Candidate,
    Choice,
    Ledger,
    Status,
)
from predictive_headroom.replay.promise import (
    WINDOW as RULE_WINDOW,
)
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.report.html import render_html


def static(periods: int = 3) -> Ledger:
    """Static headroom of 0, 5 and 10 placeholders: each day reactive leaves 100 pod-minutes
    waiting for 10 node-hours; N=5 leaves 20 for 15, N=10 leaves 4 for 20."""
    return Ledger(
        (Candidate(None, 0), Candidate(None, 5), Candidate(None, 10)),
        np.array([[100.0] * periods, [20.0] * periods, [4.0] * periods]),
        np.array([[10.0] * periods, [15.0] * periods, [20.0] * periods]),
        np.full(periods, 100.0),
        np.full(periods, 10.0),
    )


def choice(kept: float | None, per_day: float, periods: int = 2) -> Choice:
    """The forecast's choice that kept `kept` over the last `periods` days for `per_day` a day."""
    return Choice(
        Candidate(None, 0), Status.KEPT, 1.0, kept, 0.9, 0.0, 3, 100.0, per_day * periods, periods
    )


def test_a_forecast_that_did_not_keep_the_target_gives_way_to_the_fewest_fixed_n_that_did():
    hold = hold_fixed(choice(0.85, 1.0), static(), 0.9)
    assert hold is not None and hold.why == Why.SHORT
    assert (hold.replicas, hold.kept) == (10, pytest.approx(0.96))  # N=5 kept 80% only
    assert hold.says(0.9).startswith(
        "the forecast kept 85.0% over the days judged, short of 90%; holding 10 fixed "
        "placeholders, which kept 96.0% over the days read"
    )


@pytest.mark.parametrize(
    ("per_day", "margin", "holds"),
    [
        (12.0, 1.10, True),  # 12 > 1.10 x 10: static headroom kept 95% for 10 a day
        (10.5, 1.10, False),  # within tune's margin: the forecast pays
        (10.5, 1.0, True),
        (9.5, 1.0, False),  # under the 9.69 static headroom needed at 95%
    ],
)
def test_a_forecast_dearer_than_static_headroom_gives_way(per_day, margin, holds):
    hold = hold_fixed(choice(0.95, per_day), static(), 0.9, margin)
    assert (hold is not None) == holds
    if hold is not None:
        # static headroom at 95%, read along its curve between N=5 (80%, 5 a day) and N=10
        # (96%, 10 a day), as every command reads it (`core.curve`)
        assert (hold.why, hold.replicas) == (Why.DEARER, 10)
        assert hold.static_per_day == pytest.approx(5 + 5 * 0.15 / 0.16)


def test_no_fallback_without_waiting_or_without_a_fixed_n_that_kept_it():
    assert hold_fixed(choice(None, 50.0), static(), 0.9) is None  # nothing waited
    assert hold_fixed(choice(0.85, 1.0), static(), 0.99) is None  # no N kept 99% either


def test_a_fixed_n_plans_instead_of_the_forecast_with_its_own_reason():
    p = pool(0.9, minReplicas=3)
    settings = resolve_settings(p, tuned=Tuned(0.5, 300.0, 0, 12))
    assert settings.fixed is not None and settings.fixed.value == 12
    assert settings.reserve.value == 0
    times = np.arange(0.0, 3600.0, 60.0)
    plans = plan_over_time(p, times, PlanInputs(None, None, None, settings)).plans
    assert {(x.desired, x.reason, x.components["forecast"]) for x in plans} == {
        (12, "fixed-headroom", 12)
    }
    assert plans[0].details["forecast_status"] == "fixed-headroom"
    # The array form the replays read gives the same counts.
    timeline = PoolTimeline(p, times, None, None, (), settings)
    assert timeline.desired_at_once().tolist() == [x.desired for x in plans]
    # A floor above the N wins with its own name.
    high = pool(0.9, minReplicas=20)
    plan = plan_over_time(high, [0.0], PlanInputs(None, None, None, settings)).plans[0]
    assert (plan.desired, plan.reason) == (20, "min")


def test_protection_fallback_needs_protection():
    text = """\
pools:
  - name: web
    target: {namespace: ns, name: web-placeholder}
    maxReplicas: 10
    protectionFallback: fixed
    forecast: {query: demand, demandPerReplica: 5}
"""
    with pytest.raises(ConfigError, match="protectionFallback needs protection"):
        parse_policy(text, "t")
    ok = parse_policy(
        text.replace("    protectionFallback", "    protection: 95%\n    protectionFallback"), "t"
    )
    assert ok.pools[0].protection_fallback == "fixed"
    assert (
        parse_policy(text.replace("    protectionFallback: fixed\n", ""), "t")
        .pools[0]
        .protection_fallback
        == "none"
    )


@pytest.fixture(scope="module")
def replayed():
    """Tune's replay of 14 days (8 scored) of demand leaping tenfold once a day."""
    settings = BacktestSettings(
        replay=WhatIf(warmup_seconds=6 * DAY),
        grid_quantiles=PROMISE_QUANTILES,
        stabilization_dial=(300.0,),
        protections=(0.9,),
        burst_view=False,
    )
    result = run_backtest(jump(14), pool(0.9), settings, forecaster=SeasonalNaiveForecaster())
    return replays(result, (0.9,))


@pytest.mark.slow
def test_the_walk_forward_holds_a_fixed_n_where_the_days_before_said_so(replayed):
    result, r = replayed.result, replayed.replayed
    plain = promise_walk(result, r, 0.9)
    walk = promise_walk(result, r, 0.9, fallback=True)
    assert all(c is None or c.status != Status.FIXED for c in plain.choices)
    fixed_days = [
        k for k, c in enumerate(walk.choices) if c is not None and c.status == Status.FIXED
    ]
    assert fixed_days, "the fixture's leaps make the forecast give way on some day"
    book, tried = fixed_book(result, r)
    edges = [*r.starts, result.pods.size]
    for k, (c, before) in enumerate(zip(walk.choices, plain.choices, strict=True)):
        if c is None:
            continue
        # Each day's verdict reads only the ledgers of the days before it.
        lo = max(0, k - RULE_WINDOW - LOOKBACK)
        # (the rule's own choice is the plain walk's: the ledger replays every candidate
        # whatever was held)
        hold = hold_fixed(before, book.cut(lo, k).among(tried(k)), 0.9)
        if k in fixed_days:
            assert hold is not None and c.candidate == Candidate(None, hold.replicas)
            held = walk.run.placeholders[edges[k] : edges[k + 1]]
            assert set(held.tolist()) == {hold.replicas}
        else:
            assert hold is None and c == before


@pytest.fixture
def server():
    with FakeApiServer() as fake:
        for i in range(4):
            fake.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        yield fake


@pytest.mark.slow
def test_the_daemon_holds_the_fixed_n_its_ledger_asks_for_and_says_why(tmp_path, server):
    history = jump(6)
    spec = {
        "protection": "90%",
        "leadTime": "4m",
        "scaleDownStabilization": "20m",
        "maxReplicas": 200,
        "forecast": {"query": "q", "demandPerReplica": 5, "history": "28d"},
    }
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", protectionFallback="fixed", **spec))
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock(history.end)
    reported: list = []
    daemon = make_daemon(
        config,
        server,
        clock,
        source=SeriesSource(history),
        forecaster=SeasonalNaiveForecaster(),
        report_writer=lambda *args: reported.append(args),
    )
    daemon.retune_window = WINDOW
    assert daemon.refit()
    tuning = daemon.tunings["web"]
    # The same re-tune without the fallback holds the forecast and only says it did not pay.
    alone = tune(pool(0.9), history, history.end, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    assert alone.status != "fixed" and alone.against_fixed()["forecast_beats_fixed"] is False
    hold = tuning.fixed_hold
    assert tuning.status == "fixed" and hold is not None
    assert (hold.replicas, hold.kept) == alone.fixed  # the fewest fixed N that kept 90%
    assert tuning.reserve == 0 and tuning.tuned.fixed == hold.replicas
    assert tuning.reason == f"asked 90%, {hold.says(0.9)}"
    # /last-run and the report say so, with the reason word.
    shown = json.loads(json.dumps(daemon.status()))["tuning"]["web"]
    assert (shown["status"], shown["fixed_headroom"]["replicas"]) == ("fixed", hold.replicas)
    assert shown["fixed_headroom"]["says"] == hold.says(0.9)
    [(policy, _, histories, when, _, settings, promises, *_)] = reported
    assert settings["web"].fixed.value == hold.replicas
    assert (
        promises["web"]["holding"]
        == f"{hold.replicas} fixed placeholders (fixed-headroom: the forecast set aside)"
    )
    page = render_html(
        report_of(policy, histories, {}, {}, when, promises=promises, settings=settings)
    )
    assert f"Holding {promises['web']['holding']}." in page
    # The plan holds that N, with its own reason, and the target is brought to it.
    plan = daemon.reconcile().pools[0].plan
    assert (plan.desired, plan.reason) == (hold.replicas, "fixed-headroom")
    assert plan.components["forecast"] == hold.replicas and "reserve" not in plan.details
    assert server.replicas(NS, "web-placeholder") == hold.replicas
    # Opted out, the same daemon returns to the forecast at its next refit.
    write_config(config, pool_yaml("web", **spec))
    daemon.reload_if_changed()
    assert daemon.refit()
    again = daemon.tunings["web"]
    assert again.status != "fixed" and again.fixed_hold is None
    plan = daemon.reconcile().pools[0].plan
    assert plan.reason != "fixed-headroom"


@pytest.mark.slow
def test_the_shadow_compares_the_users_n_with_the_fixed_n_held():
    history = jump(6)
    begin = history.end - WINDOW
    held = tune(
        pool(0.9, protectionFallback="fixed"),
        history,
        history.end,
        SeasonalNaiveForecaster(),
        window_seconds=WINDOW,
        live=[(begin - DAY, 5)],
    )
    assert held.status == "fixed" and held.fixed_hold is not None
    n = held.fixed_hold.replicas
    assert "fixed-headroom" in held.shadow.says()
    # A user already running that N kept exactly what the plan holds: the same run.
    same = tune(
        pool(0.9, protectionFallback="fixed"),
        history,
        history.end,
        SeasonalNaiveForecaster(),
        window_seconds=WINDOW,
        live=[(begin - DAY, n)],
    ).shadow
    assert same.yours == same.plan


@pytest.mark.slow
def test_backtest_replays_the_fallback_for_a_pool_that_sets_it(replayed):
    result = replayed.result
    assert result.settings.protection_fallback == "none"
    [plain] = measure(result, (0.9,))
    opted = replace(result, settings=replace(result.settings, protection_fallback="fixed"))
    [entry] = measure(opted, (0.9,))
    statuses = [c["status"] for c in entry.to_dict()["choices"]]
    assert "fixed" in statuses and "fixed" not in [c["status"] for c in plain.to_dict()["choices"]]
    walk = promise_walk(result, replayed.replayed, 0.9, fallback=True)
    assert entry.unserved_pod_minutes == walk.unserved_pod_minutes


def test_the_fewest_fixed_n_is_found_between_the_reserve_sizes():
    """The daemon's static ledger holds the reserve sizes only (0, 5, 10 here); the fewest N that
    kept the target is found exactly between two of them, as the backtest finds it."""
    from predictive_headroom.app.tune import with_fewest
    from predictive_headroom.replay.fallback import fewest_fixed

    def one(n: int) -> Ledger:  # N placeholders leave 100 - 12 N pod-minutes a day waiting
        return Ledger(
            (Candidate(None, n),),
            np.array([[max(0.0, 100.0 - 12.0 * n)] * 3]),
            np.array([[10.0 + n] * 3]),
            np.full(3, 100.0),
            np.full(3, 10.0),
        )

    built: list[int] = []

    def counted(n: int) -> Ledger:
        built.append(n)
        return one(n)

    coarse = static()
    assert fewest_fixed(coarse, 0.9)[0] == 10  # N=5 left 20%
    fine = with_fewest(coarse, 0.9, counted)
    assert fewest_fixed(fine, 0.9) == (8, pytest.approx(0.96))  # 7 leaves 16%, 8 leaves 4%
    assert len(built) <= 3  # bisection between 5 and 10
    assert with_fewest(coarse, 0.8, counted) is coarse  # no N under 5 kept 80%: unchanged
