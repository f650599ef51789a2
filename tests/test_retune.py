"""The daemon's re-tune (`app/tune.py`): the setting and reserve the promise rule holds for
`protection:` on the recent history, chosen only from what was known at the refit, the protection
it kept, and its fallbacks."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from fake_apiserver import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families
from test_backtest import DAY, START, SeasonalNaiveForecaster, series
from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config
from test_report import report_of

from predictive_headroom.app.inputs import with_plan_inputs
from predictive_headroom.app.tune import RETUNE_QUANTILES, RETUNE_WINDOWS, retune
from predictive_headroom.app.tuning import Tuning
from predictive_headroom.core.engine import PlanInputs, plan_over_time
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.series import History, NoForecast
from predictive_headroom.core.settings import Setting as Source
from predictive_headroom.core.settings import SettingSource, model_spec, resolve_settings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.forecast.naive import seasonal_naive
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.policy.load import load_policy
from predictive_headroom.replay.tuning import Setting
from predictive_headroom.report.build import ReportInputs, build_report
from predictive_headroom.report.html import render_html

WINDOW = 2 * DAY


def tune(p: Pool, history: History, at: float, forecaster: object, **kw: object):
    """`retune` with the pool's configured settings (no measured lead time), as the tests ask."""
    return retune(p, history, at, forecaster, resolve_settings(p), **kw)  # type: ignore[arg-type]


def pool(protection: float = 0.7, **extra: object) -> Pool:
    return Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": "ns", "name": "ph"},
            "maxReplicas": 200,
            "leadTime": "4m",
            "scaleDownStabilization": "20m",
            "protection": protection,
            "forecast": {"query": "q", "demandPerReplica": 5, "history": "28d"},
            **extra,
        }
    )


class RecordingForecaster(SeasonalNaiveForecaster):
    """Seasonal naive, remembering the last sample and the instant of every fit."""

    def __init__(self) -> None:
        self.fits: list[tuple[float, float]] = []

    def fit(self, history, spec, settings, now):
        self.fits.append((float(history.end), now))
        return super().fit(history, spec, settings, now)


def same_choice(a, b) -> bool:
    """The same re-tune, apart from its seconds and what the daemon's refit adds to it (`tune`'s
    choice it held and the history it read: `app.hold`)."""
    bare = {"seconds": 0.0, "choice": None, "read": None}
    return replace(a, **bare) == replace(b, **bare)


@pytest.mark.slow
def test_it_picks_the_cheapest_setting_reaching_the_target_from_one_fit_before_the_window():
    history = series(8)
    at = history.end
    forecaster = RecordingForecaster()
    tuning = tune(pool(0.7), history, at, forecaster, window_seconds=WINDOW)

    assert tuning.status == "tuned", tuning.reason
    assert tuning.burst_quantile in RETUNE_QUANTILES
    assert tuning.stabilization_seconds in RETUNE_WINDOWS
    assert tuning.protection is not None and tuning.protection >= 0.7
    assert tuning.overhead_node_hours is not None and tuning.overhead_node_hours > 0
    assert tuning.days == pytest.approx(2.0, abs=0.01)
    assert tuning.reason.startswith(f"{tuning.says()} (the last 1 day, each chosen on the 2 days")
    # Issue 63: every cost in the reason is a day's, as the promise beside it ("... a day").
    per_day = f"for {tuning.overhead_node_hours / tuning.days:.1f} overhead node-hours a day"
    assert tuning.reason.endswith(per_day), tuning.reason
    assert tuning.realized_protection is not None
    # One extra fit, on samples before the replayed window only.
    [(last_sample, fitted_at)] = forecaster.fits
    assert fitted_at == pytest.approx(at - WINDOW)
    assert last_sample <= at - WINDOW - 60
    assert tuning.fitted_until == last_sample

    # A higher target costs more: the cheaper choice did not reach it.
    strict = tune(pool(0.95), history, at, RecordingForecaster(), window_seconds=WINDOW)
    assert strict.status == "tuned" and strict.protection >= 0.95
    assert strict.overhead_node_hours > tuning.overhead_node_hours
    assert strict.protection >= tuning.protection


@pytest.mark.slow
def test_the_choice_depends_only_on_data_before_the_refit():
    history = series(9)
    at = START + 8 * DAY + 3600.0
    tuning = tune(pool(), history, at, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    later = history.times > at
    changed = History(
        history.times, np.where(later, 10 * history.values + 400, history.values), "changed"
    )
    again = tune(pool(), changed, at, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    cut = tune(pool(), history.until(at), at, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    assert same_choice(tuning, again) and same_choice(tuning, cut)
    # ... while data before the refit does move it (the replay reads the window).
    earlier = (history.times > at - WINDOW) & (history.times <= at)
    burst = History(history.times, np.where(earlier, 3 * history.values, history.values), "x")
    moved = tune(pool(), burst, at, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    assert moved.overhead_node_hours != tuning.overhead_node_hours


def test_too_short_a_history_keeps_the_defaults_and_says_why():
    tuning = tune(pool(), series(2.5), START + 2.5 * DAY, SeasonalNaiveForecaster())
    assert tuning.status == "default"
    assert (tuning.burst_quantile, tuning.stabilization_seconds) == (0.95, 1200.0)
    assert tuning.protection is None and tuning.overhead_node_hours is None
    assert "history too short to tune: 2.5 days, needs 15.0" in tuning.reason
    assert "using burstQuantile 0.95 and scaleDownStabilization 20m" in tuning.reason
    # The pool plans with its own settings then, and says they were not tuned.
    settings = resolve_settings(pool(), tuned=tuning.tuned)
    assert settings == resolve_settings(pool())
    assert (settings.quantile, settings.window) == (0.95, 1200.0)
    assert settings.burst_quantile.source == SettingSource.DEFAULT
    assert settings.stabilization_seconds.source == SettingSource.CONFIGURED


def jump(days: float) -> History:
    """Demand that leaps tenfold for half an hour at a random time each day: unforeseeable, faster
    than a node boots and larger than any reserve tried."""
    base = series(days)
    rng = np.random.default_rng(7)
    starts = (np.arange(days + 1) * DAY + rng.uniform(0, DAY - 1800, int(days) + 1))[:, None]
    offset = base.times - base.times[0]
    on = ((offset >= starts) & (offset < starts + 1800)).any(axis=0)
    return History(base.times, np.where(on, 10, 1) * base.values, "jump")


@pytest.mark.slow
def test_a_target_nothing_keeps_holds_the_most_protective_with_its_reserve_and_says_so(caplog):
    history = jump(6)
    with caplog.at_level("WARNING"):
        tuning = tune(
            pool(0.99),
            history,
            history.end,
            SeasonalNaiveForecaster(),
            window_seconds=WINDOW,
            quantiles=(0.5, 0.99),
            windows=(300.0,),
            reserves=(0, 2, 40),
        )
    assert tuning.status == "short", tuning.reason
    assert tuning.reserve == 40  # the most protective: the largest reserve
    assert tuning.realized_protection is not None and tuning.realized_protection < 0.99
    assert tuning.shortfall
    assert "none of the 6 candidates (settings and reserves) kept it at any price" in tuning.reason
    assert tuning.says() in tuning.reason
    assert any("short of its protection" in r.getMessage() for r in caplog.records)
    # The report shows the shortfall as a warning.
    policy = Policy(pools=[pool(0.99)])
    report = report_of(
        policy, {"web": history}, {}, {}, history.end, promises={"web": tuning.report()}
    )
    page = render_html(report)
    shown = page[page.index('<div class="promise warn" id="promise-web">') :]
    assert shown.index("<b>Warning, short of the protection asked:</b>") < shown.index("</div>")
    assert f'<p class="note">{tuning.reason}</p>' in shown


@pytest.mark.slow
def test_a_reserve_above_max_replicas_is_shown_as_the_cap_holds_it():
    history = jump(6)
    tuning = tune(
        pool(0.99, maxReplicas=30),
        history,
        history.end,
        SeasonalNaiveForecaster(),
        window_seconds=WINDOW,
        quantiles=(0.5, 0.99),
        windows=(300.0,),
        reserves=(0, 2, 40),
    )
    assert tuning.reserve == 40, tuning.reason
    capped = "a reserve capped at 30 placeholders (the promise would need 40; maxReplicas 30 held it at 30)"
    assert capped in tuning.reason and capped in tuning.holding()
    assert "a reserve of 40" not in tuning.reason + tuning.holding()


def bursts(days: float, seed: int = 3) -> History:
    """A daily cycle plus unforeseeable bursts (a seasonal forecast cannot see them coming)."""
    base = series(days)
    rng = np.random.default_rng(seed)
    spikes = np.where(rng.random(base.times.size) < 0.004, rng.uniform(60, 120, base.times.size), 0)
    return History(base.times, base.values + spikes, "bursts")


@pytest.mark.slow
def test_a_pool_whose_forecast_falls_short_holds_a_reserve_that_closes_the_gap(tmp_path, server):
    history = bursts(8)
    at = history.end
    forecast = {"query": "q", "demandPerReplica": 5, "history": "28d"}
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            protection="90%",
            leadTime="4m",
            scaleDownStabilization="20m",
            maxReplicas=200,
            forecast=forecast,
        ),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock(at)
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
    web = load_policy(config).pool("web")
    # The forecast alone, at its most protective setting, keeps less than asked ...
    alone = tune(web, history, at, SeasonalNaiveForecaster(), window_seconds=WINDOW, reserves=(0,))
    assert alone.status == "short" and alone.realized_protection < 0.9
    # ... the daemon holds a reserve on top of it that kept the promise on the days after each
    # choice, and says so.
    tuning = daemon.tunings["web"]
    assert tuning.status == "tuned" and tuning.reserve > 0
    assert tuning.realized_protection >= 0.9 and not tuning.shortfall
    says = f"asked 90%, last week {100 * tuning.realized_protection:.1f}%"
    shown = daemon.status()["tuning"]["web"]
    assert shown["says"] == says and shown["reason"].startswith(says)
    assert shown["reserve"] == tuning.reserve
    assert gauges(daemon, "realized_protection_ratio")["web"] == pytest.approx(
        tuning.realized_protection
    )
    # The report after the refit says it too, next to the closed loop.
    [(policy, forecasts, histories, when, loop, settings, promises, disruption, targets)] = reported
    assert disruption == {}  # written at the refit, before a reconcile looked at the nodes
    assert targets == {}  # nor read the targets' conditions
    assert promises == {"web": tuning.report(pool_price(web, None))}
    shown = promises["web"]
    assert (shown["says"], shown["short"], shown["reason"]) == (says, False, tuning.reason)
    assert (shown["asked"], shown["reserve"], shown["status"]) == (0.9, tuning.reserve, "tuned")
    assert shown["kept"] == pytest.approx(tuning.realized_protection, abs=1e-4)
    assert settings["web"].reserve == Source(tuning.reserve, SettingSource.TUNED)
    given = ReportInputs(settings, histories, forecasts, loop=loop, promises=promises)
    report = build_report(policy, with_plan_inputs(policy, given, when), when)
    page = render_html(report)
    shown = page[page.index('<div class="promise" id="promise-web">') :]
    assert "Warning" not in shown[: shown.index("</div>")]
    assert f'<p class="note">{tuning.reason}</p>' in shown
    # The plan holds the reserve on top of what the forecast asks.
    plan = daemon.reconcile().pools[0].plan
    assert plan.details["reserve"] == tuning.reserve
    assert plan.raw == plan.components["forecast"] + tuning.reserve
    assert server.replicas(NS, "web-placeholder") == plan.desired >= tuning.reserve


class NoFit:
    def fit(self, history, spec, settings, now):
        return NoForecast("insufficient-history", "needs 2 days")


class Broken:
    def fit(self, history, spec, settings, now):
        raise RuntimeError("stan crashed")


@pytest.mark.parametrize(
    ("forecaster", "why"),
    [
        (NoFit(), "gave no forecast (insufficient-history: needs 2 days)"),
        (Broken(), "re-tune failed: RuntimeError: stan crashed"),
    ],
)
def test_a_failed_fit_keeps_the_defaults_and_says_why(forecaster, why):
    history = series(6)
    tuning = tune(pool(), history, history.end, forecaster, window_seconds=WINDOW)
    assert tuning.status == "default"
    assert why in tuning.reason
    assert (tuning.burst_quantile, tuning.stabilization_seconds) == (0.95, 1200.0)


@pytest.mark.slow
def test_a_tuning_sets_only_the_quantile_the_window_and_the_reserve():
    history = series(6)
    floors = {
        "minReplicas": 2,
        "schedules": [
            {"name": "day", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 3}
        ],
        "proportional": {"linear": {"nodesPerReplica": 4}},
    }
    p = pool(**floors)
    tuning = tune(p, history, history.end, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    assert tuning.status in ("tuned", "short")
    tuned = resolve_settings(p, tuned=tuning.tuned)
    own = resolve_settings(p)
    assert tuned.burst_quantile == Source(tuning.burst_quantile, SettingSource.TUNED)
    assert tuned.stabilization_seconds == Source(tuning.stabilization_seconds, SettingSource.TUNED)
    assert tuned.reserve == Source(tuning.reserve, SettingSource.TUNED)
    keep = ("lead_seconds", "demand_per_replica", "observation_delay_seconds", "strategy")
    assert all(getattr(tuned, k) == getattr(own, k) for k in keep)
    # A pool without protection is never changed by a tuning.
    plain = Pool.model_validate({**p.model_dump(by_alias=True), "protection": None})
    assert resolve_settings(plain, tuned=tuning.tuned) == resolve_settings(plain)
    assert Setting(tuning.burst_quantile, tuning.stabilization_seconds) in {
        Setting(q, w) for q in RETUNE_QUANTILES for w in RETUNE_WINDOWS
    }


# -- the daemon: protection: re-tunes at each refit, plans with it, reports it --------------------


class SeriesSource:
    """A demand source serving `history` as known at each instant."""

    def __init__(self, history: History) -> None:
        self.full = history

    def history(self, spec, end):
        return self.full.until(end)

    def recent(self, spec, end, span_seconds):
        return self.full.until(end).since(end - span_seconds)


@pytest.fixture
def server():
    with FakeApiServer() as fake:
        for i in range(4):
            fake.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        yield fake


def gauges(daemon: Daemon, name: str) -> dict[str, float]:
    text = daemon.metrics.exposition().decode()
    return {
        s.labels["pool"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == f"predictive_headroom_{name}"
    }


@pytest.mark.slow
def test_the_daemon_retunes_a_protection_pool_at_refit_plans_with_it_and_reports_it(
    tmp_path, server
):
    history = series(8)
    forecast = {"query": "q", "demandPerReplica": 5, "history": "28d"}
    common = {"leadTime": "4m", "scaleDownStabilization": "20m", "forecast": forecast}
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml("web", protection="70%", **common),
        pool_yaml("plain", minReplicas=1, **common),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    server.add_deployment(NS, "plain-placeholder", 0)
    clock = Clock(history.end)
    reported: list = []
    daemon = make_daemon(
        config,
        server,
        clock,
        source=SeriesSource(history),
        forecaster=SeasonalNaiveForecaster(),
        report_writer=lambda *args: reported.append(args[5]),  # the settings
    )
    daemon.retune_window = WINDOW
    assert daemon.refit()

    web = load_policy(config).pool("web")
    expected = tune(web, history, clock.now, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    tuning = daemon.tunings["web"]
    assert expected.status == "tuned" and same_choice(tuning, expected)
    assert "plain" not in daemon.tunings  # no protection: no tuning
    assert (tuning.burst_quantile, tuning.stabilization_seconds) != (0.95, 1200.0)

    # The forecast in force is fitted at the chosen quantile; the other pool keeps 0.95.
    assert daemon.forecasts()["web"].burst.quantile == tuning.burst_quantile
    assert daemon.forecasts()["plain"].burst.quantile == 0.95

    # The reconcile plans with the chosen quantile and window, through the one engine.
    result = daemon.reconcile()
    assert result.ok
    plan = next(o.plan for o in result.pools if o.pool == "web")
    tuned = resolve_settings(web, tuned=tuning.tuned)
    assert tuned.window == tuning.stabilization_seconds
    assert tuned.stabilization_seconds.source == SettingSource.TUNED
    own = seasonal_naive(history, model_spec(web.forecast), clock.now, tuned)
    # The daemon's plan also carries the closed loop's lead time in use (configured here).
    loop = {k: plan.details[k] for k in ("lead_time_seconds", "lead_time_source")}
    assert loop == {"lead_time_seconds": tuned.lead, "lead_time_source": "configured"}
    bare = replace(plan, details={k: v for k, v in plan.details.items() if k not in loop})
    # ... and the disruption component it read from the nodes (none leaving here)
    part = daemon.components["disruption"].parts()["web"]
    assert part.replicas == 0
    inputs = PlanInputs(own, None, None, tuned, {"disruption": part})
    assert bare == plan_over_time(web, [clock.now], inputs).plans[0]
    assert plan.components["forecast"] is not None  # the forecast (and its reserve) plan
    assert plan.raw == max(plan.components["forecast"], 0) + tuning.reserve
    assert server.replicas(NS, "web-placeholder") == plan.desired
    assert daemon.settings_for(web) == tuned
    # The forecast in force says what it was fitted for.
    assert daemon.forecasts()["web"].fitted_for == tuned
    # The report after the refit plans the pools as the reconcile does.
    [settings] = reported
    plain = load_policy(config).pool("plain")
    assert settings == {"web": tuned, "plain": resolve_settings(plain)}

    # /last-run and the metrics say what was chosen and why.
    status = json.loads(json.dumps(daemon.status()))
    shown = status["tuning"]["web"]
    assert shown["status"] == "tuned"
    assert shown["burst_quantile"] == tuning.burst_quantile
    assert shown["scale_down_stabilization_seconds"] == tuning.stabilization_seconds
    assert shown["protection_target"] == 0.7 and shown["protection_reached"] >= 0.7
    assert shown["overhead_node_hours"] > 0 and shown["days"] == pytest.approx(2.0, abs=0.01)
    assert shown["reason"].startswith(shown["says"]) and shown["says"].startswith("asked 70%")
    assert shown["realized_protection"] == pytest.approx(tuning.realized_protection, abs=1e-4)
    assert shown["reserve"] == tuning.reserve
    assert status["refit"]["tuning"]["web"] == shown
    assert gauges(daemon, "tuned_burst_quantile") == {"web": tuning.burst_quantile}
    assert gauges(daemon, "tuned_stabilization_seconds") == {"web": tuning.stabilization_seconds}
    assert gauges(daemon, "tuned_protection_ratio")["web"] == pytest.approx(tuning.protection)
    assert gauges(daemon, "realized_protection_ratio")["web"] == pytest.approx(
        tuning.realized_protection
    )
    assert gauges(daemon, "tuned_reserve_replicas") == {"web": tuning.reserve}
    check_against_fixed(daemon, shown, tuning)


def check_against_fixed(daemon: Daemon, shown: dict, tuning: Tuning) -> None:
    """Whether the forecast beat a fixed N over the days judged: /last-run and the metric agree."""
    against = tuning.against_fixed()
    assert shown["against_fixed"] == against
    beats = gauges(daemon, "forecast_beats_fixed")["web"]
    if against is None:
        assert beats != beats  # NaN: no figure
    else:
        assert beats == float(against["forecast_beats_fixed"])


def test_the_daemon_keeps_the_defaults_and_says_why_on_a_short_history(tmp_path, server):
    history = series(3)
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            protection="95%",
            minReplicas=2,
            forecast={"query": "q", "demandPerReplica": 5, "minHistory": "1d"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock(history.end)
    daemon = make_daemon(
        config, server, clock, source=SeriesSource(history), forecaster=SeasonalNaiveForecaster()
    )
    assert daemon.refit()
    shown = daemon.status()["tuning"]["web"]
    assert shown["status"] == "default"
    assert (shown["burst_quantile"], shown["scale_down_stabilization_seconds"]) == (0.95, 1800.0)
    assert shown["reason"].startswith("history too short to tune: 3.0 days, needs 15.0")
    assert np.isnan(gauges(daemon, "tuned_protection_ratio")["web"])
    # The forecast and the floors still plan.
    plan = daemon.reconcile().pools[0].plan
    assert daemon.forecasts()["web"].burst.quantile == 0.95
    assert plan.desired >= 2 and plan.components["min"] == 2


@pytest.mark.slow
def test_a_changed_protection_refits_and_retunes_and_a_removed_one_plans_at_the_defaults(
    tmp_path, server
):
    history = series(8)
    forecast = {"query": "q", "demandPerReplica": 5, "history": "28d"}
    common = {"leadTime": "4m", "scaleDownStabilization": "20m", "forecast": forecast}
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", protection="70%", **common))
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock(history.end)
    daemon = make_daemon(
        config, server, clock, source=SeriesSource(history), forecaster=SeasonalNaiveForecaster()
    )
    daemon.retune_window = WINDOW
    refits: list[set[str]] = []
    daemon.on_reload = refits.append
    daemon.refit()
    assert daemon.tunings["web"].target == 0.7

    write_config(config, pool_yaml("web", protection="80%", **common))
    assert daemon.reload_if_changed()
    assert refits == [{"web"}] and "web" not in daemon.tunings  # the old choice is dropped
    assert gauges(daemon, "tuned_burst_quantile") == {}
    daemon.refit()
    assert daemon.tunings["web"].target == 0.8 and daemon.tunings["web"].status == "tuned"

    write_config(config, pool_yaml("web", **common))  # no protection: defaults, no tuning
    assert daemon.reload_if_changed()
    daemon.refit()
    assert "web" not in daemon.tunings and daemon.status()["tuning"] == {}
    assert gauges(daemon, "tuned_stabilization_seconds") == {}
    assert daemon.forecasts()["web"].burst.quantile == 0.95
    web = daemon.policy.pool("web")
    assert daemon.settings_for(web) == resolve_settings(web)
