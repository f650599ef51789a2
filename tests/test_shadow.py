"""The shadow of the live N in dry-run (`replay/shadow.py`, `daemon/shadow.py`, `app/tune.py`):
the target's replicas as the dry-run daemon read them over time, replayed on the re-tune's
simulated cluster beside what the daemon would have held, over the same judged days."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fake_apiserver import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families
from test_backtest import DAY, SeasonalNaiveForecaster
from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config
from test_report import report_of
from test_retune import WINDOW, SeriesSource, bursts, gauges, pool, tune

from predictive_headroom.core.series import iso_utc
from predictive_headroom.daemon.shadow import LiveReplicas
from predictive_headroom.policy.load import load_policy
from predictive_headroom.replay.shadow import live_placeholders
from predictive_headroom.report.html import render_html


def test_the_live_n_is_the_last_count_read_and_the_first_before_any_read():
    times = np.arange(0.0, 600.0, 60.0)
    counts = live_placeholders(times, [(120.0, 20), (300.0, 25), (420.0, 0)])
    assert counts.tolist() == [20, 20, 20, 20, 20, 25, 25, 0, 0, 0]
    with pytest.raises(ValueError, match="no live replica count was read"):
        live_placeholders(times, [])


def test_the_daemon_keeps_each_change_as_far_back_as_the_retune_replays():
    live = LiveReplicas(keep_seconds=1000.0)
    for at, n in [(0.0, 20), (60.0, 20), (120.0, 25), (900.0, 25), (1100.0, 30), (1200.0, 30)]:
        live.record("web", at, n)
    # unchanged counts are not repeated; the first read was in force at 1100 - 1000 and stays
    assert live.reads("web") == ((0.0, 20), (120.0, 25), (1100.0, 30))
    live.record("web", 3000.0, 40)
    assert live.reads("web") == ((1100.0, 30), (3000.0, 40))
    live.forget(["web"])
    assert live.reads("web") == ()


@pytest.fixture(scope="module")
def history():
    return bursts(8)


def shadow_of(history, live):
    return tune(
        pool(0.9), history, history.end, SeasonalNaiveForecaster(), window_seconds=WINDOW, live=live
    ).shadow


@pytest.mark.slow
def test_your_n_is_replayed_beside_the_plan_on_the_days_judged(history):
    begin = history.end - WINDOW
    tuning = tune(pool(0.9), history, history.end, SeasonalNaiveForecaster(), window_seconds=WINDOW)
    assert tuning.shadow is None  # nothing read: no shadow
    none, few, many = (shadow_of(history, [(begin - DAY, n)]) for n in (0, 4, 60))
    # The plan's side is what the re-tune kept walk-forward on the same days, for the same.
    for s in (none, few, many):
        assert s.days == tuning.kept_days
        assert s.plan.kept == pytest.approx(tuning.realized_protection)
        assert s.plan.per_day == pytest.approx(tuning.overhead_per_day)
    # No placeholders is no headroom: nothing absorbed, nothing spent over it.
    assert none.yours.kept == pytest.approx(0.0) and none.yours.per_day == pytest.approx(0.0)
    # More placeholders absorb more and cost more, on the same simulated cluster.
    assert few.yours.kept < many.yours.kept and few.yours.per_day < many.yours.per_day
    # An N changed during the judged days is replayed as it was over time: between the two.
    judged_from = history.end - tuning.kept_days * DAY
    changed = shadow_of(history, [(begin - DAY, 4), (judged_from + DAY / 2, 60)])
    assert changed.replicas == (4, 60)
    assert few.yours.kept <= changed.yours.kept <= many.yours.kept
    assert few.yours.per_day < changed.yours.per_day < many.yours.per_day
    says = changed.says()
    assert says.startswith(
        f"your N (4, then 60) kept {100 * changed.yours.kept:.1f}% for "
        f"{changed.yours.per_day:,.1f} overhead node-hours a day over the last 1 day judged; "
        f"the plan would have kept {100 * tuning.realized_protection:.1f}% for "
        f"{tuning.overhead_per_day:,.1f} (holding {tuning.holding()})"
    )
    assert "as read since" not in says  # read since before the replayed days
    # Read only since the middle of the replayed days: the first count stands in before, and
    # the sentence says so.
    late = shadow_of(history, [(begin + DAY / 2, 4)])
    assert late.yours == few.yours  # the same N throughout
    assert late.says().endswith(
        f"; your N as read since {iso_utc(begin + DAY / 2)}, taken as 4 before"
    )


@pytest.fixture
def server():
    with FakeApiServer() as fake:
        for i in range(4):
            fake.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        yield fake


@pytest.mark.slow
def test_the_dry_run_daemon_shadows_the_live_n_at_each_refit(tmp_path, server, history):
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            protection="90%",
            leadTime="4m",
            scaleDownStabilization="20m",
            maxReplicas=200,
            forecast={"query": "q", "demandPerReplica": 5, "history": "28d"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 20)  # the user's fixed 20 pause pods
    clock = Clock(history.end - 1.5 * DAY)
    reported: list = []
    daemon = make_daemon(
        config,
        server,
        clock,
        source=SeriesSource(history),
        forecaster=SeasonalNaiveForecaster(),
        report_writer=lambda *args: reported.append(args),
        dry_run=True,
    )
    daemon.retune_window = WINDOW
    for _ in range(3):  # reconciles read the user's 20 ...
        assert daemon.reconcile().pools[0].action in ("dry-run", "unchanged")
        clock.now += 60
    server.edit_deployment(NS, "web-placeholder", {"spec": {"replicas": 30}})  # ... then 30
    clock.now = history.end - DAY / 2
    daemon.reconcile()
    clock.now = history.end
    assert daemon.refit()
    assert server.replicas(NS, "web-placeholder") == 30  # dry-run: never written

    tuning = daemon.tunings["web"]
    shadow = tuning.shadow
    assert shadow is not None and shadow.replicas == (20, 30)
    first_read = history.end - 1.5 * DAY
    expected = tune(
        load_pool(config),
        history,
        history.end,
        SeasonalNaiveForecaster(),
        window_seconds=WINDOW,
        live=[(first_read, 20), (history.end - DAY / 2, 30)],
    ).shadow
    assert shadow == expected
    assert shadow.says().endswith(f"your N as read since {iso_utc(first_read)}, taken as 20 before")
    # /last-run, the metric pair and the report's headline say the same.
    shown = json.loads(json.dumps(daemon.status()))["tuning"]["web"]["shadow"]
    assert shown == json.loads(json.dumps(shadow.to_dict()))
    assert shown["says"] == shadow.says()
    assert labelled(daemon, "shadow_kept") == {
        ("web", "yours"): pytest.approx(shadow.yours.kept),
        ("web", "plan"): pytest.approx(shadow.plan.kept),
    }
    assert labelled(daemon, "shadow_node_hours_per_day") == {
        ("web", "yours"): pytest.approx(shadow.yours.per_day),
        ("web", "plan"): pytest.approx(shadow.plan.per_day),
    }
    [(policy, _, histories, when, _, _, promises, *_)] = reported
    assert promises["web"]["shadow"]["says"] == shadow.says()
    page = render_html(report_of(policy, histories, {}, {}, when, promises=promises))
    assert f"In dry-run, against your N: {shadow.says()}." in page


@pytest.mark.slow
def test_a_daemon_that_writes_keeps_no_shadow(tmp_path, server, history):
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            protection="90%",
            maxReplicas=200,
            forecast={"query": "q", "demandPerReplica": 5, "history": "28d"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 20)
    clock = Clock(history.end)
    daemon = make_daemon(
        config, server, clock, source=SeriesSource(history), forecaster=SeasonalNaiveForecaster()
    )
    daemon.retune_window = WINDOW
    daemon.reconcile()
    assert daemon.refit()
    assert daemon.tunings["web"].shadow is None
    assert daemon.status()["tuning"]["web"]["shadow"] is None
    assert labelled(daemon, "shadow_kept") == {}
    assert gauges(daemon, "realized_protection_ratio")  # the re-tune itself still reported


def load_pool(config):
    return load_policy(config).pool("web")


def labelled(daemon, name: str) -> dict[tuple[str, str], float]:
    """{(pool, who): value} of the metric `predictive_headroom_<name>`."""
    text = daemon.metrics.exposition().decode()
    return {
        (s.labels["pool"], s.labels["who"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == f"predictive_headroom_{name}"
    }


@pytest.mark.slow
def test_the_shadow_is_there_from_the_first_refit(tmp_path, server, history):
    """The start-up refit runs before the first reconcile: the daemon reads the live N first."""
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            protection="90%",
            leadTime="4m",
            scaleDownStabilization="20m",
            maxReplicas=200,
            forecast={"query": "q", "demandPerReplica": 5, "history": "28d"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 20)
    daemon = make_daemon(
        config,
        server,
        Clock(history.end),
        source=SeriesSource(history),
        forecaster=SeasonalNaiveForecaster(),
        dry_run=True,
    )
    daemon.retune_window = WINDOW
    assert daemon.refit()  # no reconcile before it
    shadow = daemon.tunings["web"].shadow
    assert shadow is not None and shadow.replicas == (20,)
    assert daemon.live.reads("web") == ((history.end, 20),)
    assert daemon.status()["tuning"]["web"]["shadow"]["says"].startswith("your 20 kept")


@pytest.mark.slow
def test_a_pool_without_protection_is_shadowed_too(tmp_path, server):
    """Without `protection:` the plan is the pool's own settings, replayed walk-forward (on
    enough history for the replay's 7-day warm-up and a day)."""
    history = bursts(10)
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            leadTime="4m",
            maxReplicas=200,
            forecast={"query": "q", "demandPerReplica": 5, "history": "28d"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 20)
    daemon = make_daemon(
        config,
        server,
        Clock(history.end),
        source=SeriesSource(history),
        forecaster=SeasonalNaiveForecaster(),
        dry_run=True,
    )
    assert daemon.refit()
    assert "web" not in daemon.tunings
    shadow = daemon.last_refit["shadow"]["web"]
    assert shadow["replicas"] == [20] and shadow["says"].startswith("your 20 kept")
    assert "the pool's own settings" in shadow["says"]
    assert set(labelled(daemon, "shadow_kept")) == {("web", "yours"), ("web", "plan")}
