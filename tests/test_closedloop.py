"""The closed loop against the test API server (real kubernetes client): node boot times, placeholder
starts and preemptions move the metrics, `leadTime: auto` switches from configured to measured
after enough boots and the plan follows, and every read is a list done once per reconcile."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import yaml
from browser_cdp import chromium_available, visit
from daemons import new_daemon
from deploy_render import render_chart
from fake_apiserver import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families
from test_report import report_of

from predictive_headroom.core.series import Forecast, History
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.daemon.closedloop import LoopSettings, PoolLoop, is_auto
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.kube.cluster import CallOptions, KubeClusterReader
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.load import ConfigError, load_policy
from predictive_headroom.protocols import NodeSeen, PodSeen
from predictive_headroom.report.build import report_to_json
from predictive_headroom.report.html import render_html
from predictive_headroom.report.loop import lead_sentence, loop_sentence

NS = "headroom"
FAST = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.01, backoff_max=0.05, instance="t")
# 08:52 UTC: the "business" window opens at 09:00, so with a 5 min lead it is still closed.
NOW = datetime(2026, 11, 23, 8, 52, tzinfo=UTC).timestamp()


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class NoForecaster:
    def fit(self, *args: object) -> None:  # pragma: no cover - no pool forecasts here
        raise AssertionError("no pool forecasts in these tests")


def write_policy(path: Path, lead: str = "auto") -> Path:
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 10,
        "leadTime": lead,
        "placeholder": {"nodeSelector": {"pool": "web"}},
        "schedules": [
            {"name": "business", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": 4}
        ],
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}, sort_keys=False))
    return path


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_deployment(NS, "web-placeholder", 0)
        fake.add_node("old-node", labels={"pool": "web"}, created=iso(NOW - 30 * 86400))
        fake.add_node("other-pool", labels={"pool": "batch"}, created=iso(NOW - 120))
        yield fake


def make_daemon(
    config: Path, server: FakeApiServer, clock: Clock, settings: LoopSettings | None = None
) -> Daemon:
    api = server.api_client()
    return new_daemon(
        config,
        source=None,
        forecaster=NoForecaster(),  # type: ignore[arg-type]
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        pods=KubePodReader(api, FAST),
        loop=settings,
    )


def samples(daemon: Daemon, name: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = daemon.metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(name)
    }


def boot_node(server: FakeApiServer, name: str, created: float, boot: float) -> None:
    """A node of the pool that appeared at `created` and became Ready `boot` seconds later."""
    server.add_node(
        name, labels={"pool": "web"}, created=iso(created), ready_since=iso(created + boot)
    )


def placeholder(server: FakeApiServer, name: str, scheduled: float, start: float) -> None:
    server.add_scheduling_pod(
        NS,
        name,
        labels={"predictive-headroom.io/pool": "web"},
        created=iso(scheduled - 1),
        scheduled_at=iso(scheduled),
        ready_at=iso(scheduled + start),
        node="n-0",
        priority=-1,
    )


@pytest.mark.slow
def test_lead_time_auto_switches_to_measured_after_five_boots_and_the_plan_follows(
    tmp_path, server
) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock)

    first = daemon.reconcile().pools[0]
    assert first.plan is not None and first.plan.desired == 0  # window opens 09:00, lead 5 min
    lead = daemon.status()["closed_loop"]["web"]["lead_time"]
    assert (lead["source"], lead["seconds"], lead["samples"]) == ("configured", 300.0, 0)

    # Four boots of 9 min: not enough yet. The old node and the other pool's node never count.
    for i in range(4):
        boot_node(server, f"n-{i}", NOW - 700 + i, 540)
    placeholder(server, "web-placeholder-7c9d8b6f5-abcde", NOW - 200, 30)
    clock.now += 60
    plan = daemon.reconcile().pools[0].plan
    assert plan is not None and plan.desired == 0
    assert plan.details["lead_time_source"] == "configured"
    assert daemon.status()["closed_loop"]["web"]["lead_time"]["samples"] == 4

    # The fifth boot: lead = p90 boot (540 s) + p90 placeholder start (30 s) = 570 s, so at 08:53
    # the 09:00 window is within the lead time and the schedule asks for 4.
    boot_node(server, "n-4", NOW - 600, 540)
    clock.now += 60
    outcome = daemon.reconcile().pools[0]
    assert outcome.plan is not None
    assert (outcome.plan.desired, outcome.plan.reason) == (4, "schedule:business")
    assert outcome.plan.details["lead_time_source"] == "measured"
    assert server.replicas(NS, "web-placeholder") == 4
    lead = daemon.status()["closed_loop"]["web"]["lead_time"]
    assert (lead["source"], lead["seconds"], lead["samples"]) == ("measured", 570.0, 5)
    got = samples(daemon, "predictive_headroom_")
    assert got[("predictive_headroom_node_ready_seconds_count", (("pool", "web"),))] == 5
    assert got[("predictive_headroom_node_ready_seconds_sum", (("pool", "web"),))] == 5 * 540
    assert got[("predictive_headroom_lead_time_seconds", (("pool", "web"), ("source", "measured")))]
    assert (
        "predictive_headroom_lead_time_seconds",
        (("pool", "web"), ("source", "configured")),
    ) not in got


@pytest.mark.slow
def test_a_fixed_lead_time_is_measured_but_not_replaced(tmp_path, server) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml", lead="5m"), server, clock)
    for i in range(6):
        boot_node(server, f"n-{i}", NOW - 700 + i, 540)
    plan = daemon.reconcile().pools[0].plan
    assert plan is not None and plan.desired == 0
    lead = daemon.status()["closed_loop"]["web"]["lead_time"]
    assert (lead["source"], lead["seconds"], lead["samples"]) == ("configured", 300.0, 6)
    assert lead["node_boot_p90_seconds"] == 540.0


def test_a_node_that_flaps_ready_is_counted_once(tmp_path, server) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock)
    server.add_node("flappy", labels={"pool": "web"}, created=iso(NOW - 300), ready=False)
    daemon.reconcile()  # not Ready yet: nothing to count
    server.set_node_ready("flappy", True, iso(NOW - 300 + 150))
    clock.now += 60
    daemon.reconcile()
    server.set_node_ready("flappy", False, iso(NOW + 70))
    clock.now += 60
    daemon.reconcile()
    server.set_node_ready("flappy", True, iso(NOW + 130))  # Ready again: not a second boot
    clock.now += 60
    daemon.reconcile()
    got = samples(daemon, "predictive_headroom_node_ready_seconds")
    assert got[("predictive_headroom_node_ready_seconds_count", (("pool", "web"),))] == 1
    assert got[("predictive_headroom_node_ready_seconds_sum", (("pool", "web"),))] == 150


def test_preempted_placeholders_count_as_headroom_used_once_by_condition_or_event(
    tmp_path, server
) -> None:
    clock = Clock(NOW)
    daemon = make_daemon(write_policy(tmp_path / "p.yaml"), server, clock)
    for i, name in enumerate(
        ("web-placeholder-7c9d8b6f5-aaaaa", "web-placeholder-7c9d8b6f5-bbbbb")
    ):
        placeholder(server, name, NOW - 400 + i, 4)
    # Someone else's pod in the namespace, preempted too: not this pool's headroom.
    server.add_scheduling_pod(
        NS, "web-placeholder-api-1", created=iso(NOW - 100), scheduled_at=iso(NOW - 90)
    )
    daemon.reconcile()
    assert ("predictive_headroom_headroom_used_total", (("pool", "web"),)) not in samples(
        daemon, "predictive_headroom_headroom_used"
    )

    server.preempt_pod(NS, "web-placeholder-7c9d8b6f5-aaaaa", iso(NOW + 10))  # condition + Event
    server.preempt_pod(NS, "web-placeholder-api-1", iso(NOW + 12))
    clock.now += 60
    daemon.reconcile()
    # The victim is gone by the next reconcile; its Event alone must not count it again.
    server.delete_pod(NS, "web-placeholder-7c9d8b6f5-aaaaa")
    clock.now += 60
    daemon.reconcile()
    got = samples(daemon, "predictive_headroom_headroom_")
    assert got[("predictive_headroom_headroom_used_total", (("pool", "web"),))] == 1
    assert got[
        ("predictive_headroom_headroom_last_used_timestamp_seconds", (("pool", "web"),))
    ] == (NOW + 10)

    # Preempted and deleted between two reconciles: only the Event says so; it still counts.
    server.preempt_pod(NS, "web-placeholder-7c9d8b6f5-bbbbb", iso(NOW + 150))
    server.delete_pod(NS, "web-placeholder-7c9d8b6f5-bbbbb")
    clock.now += 60
    daemon.reconcile()
    got = samples(daemon, "predictive_headroom_headroom_")
    assert got[("predictive_headroom_headroom_used_total", (("pool", "web"),))] == 2
    summary = daemon.status()["closed_loop"]["web"]
    assert (summary["headroom_used"], summary["placeholder_starts"]) == (2, 2)
    assert summary["placeholder_start_p90_seconds"] == 4.0


def test_each_kind_is_listed_once_per_reconcile_and_nothing_is_written_but_the_scale(
    tmp_path, server
) -> None:
    config = tmp_path / "p.yaml"
    pools = [
        {
            "name": name,
            "target": {"namespace": NS, "name": f"{name}-placeholder"},
            "maxReplicas": 5,
            "leadTime": "auto",
            "placeholder": {"nodeSelector": {"pool": "web"}},
        }
        for name in ("web", "web2")
    ]
    config.write_text(yaml.safe_dump({"pools": pools}))
    server.add_deployment(NS, "web2-placeholder", 0)
    daemon = make_daemon(config, server, Clock(NOW))
    before = len(server.requests())
    daemon.reconcile()
    asked = server.requests()[before:]
    lists = [r.path for r in asked if r.method == "GET" and r.path.endswith(("nodes", "events"))]
    assert sorted(lists) == ["/api/v1/namespaces/headroom/events", "/api/v1/nodes"]
    assert sum(r.path.endswith("/pods") for r in asked) == 2  # one selector per pool
    assert {r.method for r in asked} <= {"GET"}  # nothing to scale: no writes at all


def test_memory_stays_within_the_window_and_the_sample_cap() -> None:
    pool = Pool.model_validate(
        {"name": "web", "target": {"namespace": NS, "name": "w"}, "maxReplicas": 1}
    )
    loop = PoolLoop(pool, LoopSettings(window_seconds=3600, recent_seconds=600, max_samples=50))
    now = NOW
    for step in range(300):  # one new node a minute for five hours
        now += 60
        created = now - 120
        loop.observe_nodes([NodeSeen(f"n{step}", f"u{step}", created, created + 90)], now)
    assert len(loop.boots.items) == 50
    assert len(loop._nodes) <= 2 * 600 / 60 + 1
    assert loop.summary(now)["node_boots"] == 50


def test_pods_that_waited_for_a_node_of_the_pool_are_measured_only_when_opted_in(
    tmp_path, server
) -> None:
    boot_node(server, "n-0", NOW - 400, 120)
    shop = "shop"
    # Waited 150 s for n-0 (a new node of the pool), placed at once, never placed, other pool.
    server.add_scheduling_pod(
        shop, "waited", created=iso(NOW - 200), scheduled_at=iso(NOW - 50), node="n-0"
    )
    server.add_scheduling_pod(
        shop, "at-once", created=iso(NOW - 100), scheduled_at=iso(NOW - 99), node="n-0"
    )
    server.add_scheduling_pod(shop, "stuck", created=iso(NOW - 300))
    server.add_scheduling_pod(
        shop, "batch", created=iso(NOW - 300), scheduled_at=iso(NOW - 30), node="other-pool"
    )
    config = write_policy(tmp_path / "p.yaml", lead="5m")

    plain = make_daemon(config, server, Clock(NOW))
    before = len(server.requests())
    plain.reconcile()
    assert not any("/namespaces/shop/" in r.path for r in server.requests()[before:])
    assert plain.status()["closed_loop"]["web"]["pods_waited"] == 0

    clock = Clock(NOW)
    daemon = make_daemon(config, server, clock, LoopSettings(wait_namespaces=(shop,)))
    daemon.reconcile()
    summary = daemon.status()["closed_loop"]["web"]
    assert (summary["pods_waited"], summary["pod_wait_total_seconds"]) == (1, 150.0)

    # The stuck pod gets a node 10 minutes after it was created; the others are not counted again.
    server.add_scheduling_pod(
        shop, "stuck", created=iso(NOW - 300), scheduled_at=iso(NOW + 300), node="n-0"
    )
    clock.now += 360
    daemon.reconcile()
    summary = daemon.status()["closed_loop"]["web"]
    assert summary["pods_waited"] == 2
    assert (summary["pod_wait_total_seconds"], summary["pod_wait_worst_seconds"]) == (750.0, 600.0)
    got = samples(daemon, "predictive_headroom_pod_wait_seconds")
    assert got[("predictive_headroom_pod_wait_seconds_count", (("pool", "web"),))] == 2


# -- the report section -------------------------------------------------------------------------


def week_of_loop(wait_namespaces: tuple[str, ...] = ("shop",)) -> tuple[dict[str, object], float]:
    """A pool's closed loop after a week: 41 placeholders preempted, 3 pods waited 6 min in all,
    12 node boots of 2-3 min, placeholders starting in 5 s."""
    pool = Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": NS, "name": "w"},
            "maxReplicas": 9,
            "leadTime": "auto",
        }
    )
    loop = PoolLoop(pool, LoopSettings(wait_namespaces=wait_namespaces))
    start = NOW - 7 * 86400
    loop.observe_nodes([], start)
    for k in range(41):
        at = start + 3600 + k * 14000
        loop.observe_pods([PodSeen(f"p{k}", f"u{k}", at - 500, at - 499, at - 494, at)], at + 30)
    for k, boot in enumerate([120, 130, 125, 140, 150, 135, 128, 122, 170, 180, 145, 131]):
        at = start + 7200 + k * 40000
        loop.observe_nodes([NodeSeen(f"n{k}", f"b{k}", at, at + boot)], at + boot + 30)
    for k, wait in enumerate([60, 120, 180]):
        at = start + 9000 + k * 150000
        waiting = PodSeen(f"w{k}", f"w{k}", at - wait, at, at + 3, node="n0")
        loop.observe_waits([waiting], {"n0"}, at + 20)
    status = {"lead_time": loop.lead_time(pool.lead_time, NOW).to_dict(), **loop.summary(NOW)}
    return status, NOW


@pytest.mark.parametrize(
    ("watched", "expected"),
    [
        (
            ("shop",),
            "Last week 41 pods landed on warm capacity; 3 waited for a node, 6 min in all.",
        ),
        (
            (),
            "Last week 41 pods landed on warm capacity (pods waiting for a node are not watched: "
            "set closedLoop.podWaitNamespaces).",
        ),
    ],
)
def test_the_report_says_it_in_plain_words_first(watched, expected) -> None:
    status, at = week_of_loop(watched)
    assert loop_sentence(status, at) == expected
    # p90 of the 12 boots (numpy's linear interpolation) is 168 s; plus the 5 s start.
    assert lead_sentence(status) == (
        "The lead time in use, 2 min 53 s, is measured: node boot p90 2 min 48 s plus "
        "placeholder start p90 5 s, over 12 boots."
    )


def test_a_loop_younger_than_a_week_does_not_claim_one() -> None:
    pool = Pool.model_validate(
        {"name": "web", "target": {"namespace": NS, "name": "w"}, "maxReplicas": 1}
    )
    loop = PoolLoop(pool)
    loop.observe_nodes([], NOW - 7200)  # first looked 2 h ago, at what was up to 1 h old then
    text = loop_sentence(loop.summary(NOW), NOW)
    assert text.startswith("In the last 3 h, 0 pods landed on warm capacity")


@pytest.mark.browser
@pytest.mark.skipif(not chromium_available(), reason="needs Debian chromium at /usr/bin/chromium")
def test_the_closed_loop_section_renders_in_headless_chromium(tmp_path) -> None:
    status, at = week_of_loop()
    policy = load_policy(write_policy(tmp_path / "p.yaml"))
    report = report_of(policy, {}, {}, {}, at, loop={"web": status})
    page = tmp_path / "index.html"
    page.write_text(render_html(report))
    seen = visit(page.as_uri(), tmp_path / "profile")
    assert seen.console_errors == []
    assert "In your cluster: did headroom work?" in seen.text
    assert (
        "Last week 41 pods landed on warm capacity; 3 waited for a node, 6 min in all." in seen.text
    )
    for label, value in (
        ("headroom used (placeholders preempted)", "41"),
        ("pods that waited for a node", "3"),
        ("worst wait", "3 min"),
        ("node boots measured", "12"),
    ):
        assert f"{label}\t{value}" in seen.text, label
    assert report_of(policy, {}, {}, {}, at).pools[0].loop is None  # outside the daemon
    assert report_to_json(report)["pools"][0]["closed_loop"]["headroom_used"] == 41


class LeadRecordingForecaster:
    """A flat forecast; remembers the lead time of every fit."""

    def __init__(self) -> None:
        self.leads: list[float] = []

    def fit(
        self, history: History, spec: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast:
        self.leads.append(settings.lead)
        times = now + np.arange(0.0, spec.horizon.total_seconds() + 1, spec.step.total_seconds())
        flat = np.full(times.size, 10.0)
        return Forecast(times, flat, flat - 1, flat + 1, "flat", now)


class FlatSource:
    def history(self, spec: ForecastSpec, end: float) -> History:
        times = end - np.arange(288)[::-1] * 300.0
        return History(times, np.full(times.size, 10.0), "flat")

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        return self.history(spec, end)


def test_a_measured_lead_time_refits_the_forecast_for_it_once(tmp_path, server) -> None:
    config = tmp_path / "p.yaml"
    pool = {
        "name": "web",
        "target": {"namespace": NS, "name": "web-placeholder"},
        "maxReplicas": 10,
        "leadTime": "auto",
        "placeholder": {"nodeSelector": {"pool": "web"}},
        "forecast": {
            "query": "demand",
            "demandPerReplica": 10,
            "history": "1d",
            "minHistory": "1h",
        },
    }
    config.write_text(yaml.safe_dump({"pools": [pool]}))
    api = server.api_client()
    forecaster = LeadRecordingForecaster()
    clock = Clock(NOW)
    daemon = new_daemon(
        config,
        source=FlatSource(),
        forecaster=forecaster,
        actuator=TargetActuator(api, FAST),
        cluster=KubeClusterReader(api, FAST),
        clock=clock,
        pods=KubePodReader(api, FAST),
    )
    asked: list[list[str]] = []
    daemon.refit_soon = asked.append
    daemon.refit()
    daemon.reconcile()
    assert forecaster.leads == [300.0] and asked == []

    for i in range(5):
        boot_node(server, f"n-{i}", NOW - 700 + i, 540)
    for _ in range(2):
        clock.now += 60
        daemon.reconcile()
    assert asked == [["web"]]  # once, not at every reconcile
    daemon.refit(asked[0])
    assert forecaster.leads == [300.0, 540.0]
    clock.now += 60
    daemon.reconcile()
    assert asked == [["web"]]


def test_lead_time_auto_in_the_policy_file_and_the_chart(tmp_path) -> None:
    policy = load_policy(write_policy(tmp_path / "p.yaml"))
    (pool,) = policy.pools
    assert is_auto(pool) and pool.lead_time.total_seconds() == 300
    assert pool.model_dump(mode="json", by_alias=True)["leadTime"] == "auto"
    assert not is_auto(load_policy(write_policy(tmp_path / "q.yaml", lead="4m")).pools[0])
    with pytest.raises(ConfigError, match=r"leadTime.*or auto"):
        load_policy(write_policy(tmp_path / "r.yaml", lead="soon"))

    objects = render_chart(
        {
            "pools": [
                {"name": "web", "maxReplicas": 3, "leadTime": "auto", "placeholder": {"cpu": "1"}}
            ]
        }
    )
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})
    ]
    assert yaml.safe_load(config_map["data"]["config.yaml"])["pools"][0]["leadTime"] == "auto"
