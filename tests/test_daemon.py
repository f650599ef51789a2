"""The daemon: `run --once` end to end (real kubernetes client against the fake apiserver, real
Prometheus), the loop logic with a fake clock, leader election between two daemons, config
reload, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml
from daemons import new_daemon
from fake_apiserver import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families

from predictive_headroom import cli
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.scheduling import Runner
from predictive_headroom.kube.cluster import (
    PAUSED_ANNOTATION,
    CallOptions,
    KubeClusterReader,
)
from predictive_headroom.kube.leader import LeaderElector, LeaseTiming
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.prometheus import PrometheusSource

NS = "apps"
FAST = CallOptions(timeout=2.0, attempts=3, backoff_initial=0.01, backoff_max=0.05, instance="test")
REPO = Path(__file__).resolve().parents[1]
T0 = 1_790_000_000.0  # a fixed instant for the fake clock


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RampForecaster:
    """Forecasts demand rising by `rise` over each lead time, so the forecast asks for rise/demandPerReplica."""

    def __init__(self, rise: float = 5.0) -> None:
        self.rise, self.fits = rise, 0

    def fit(
        self, history: History, spec: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast | NoForecast:
        self.fits += 1
        times = now + np.arange(0.0, spec.horizon.total_seconds() + 1, spec.step.total_seconds())
        yhat = 10.0 + self.rise * (times - now) / settings.lead
        return Forecast(
            times, yhat, yhat - 1, yhat + 1, "ramp", history.end if len(history) else now
        )


class FakeSource:
    """Demand history at `level`, or SourceError while `down`; counts the reads of the latest observations."""

    def __init__(self) -> None:
        self.down = False
        self.level = 10.0
        self.recent_reads: list[tuple[float, float]] = []

    def history(self, spec: ForecastSpec, end: float) -> History:
        if self.down:
            raise SourceError(
                "Prometheus at http://prometheus:9090 is unreachable: connection refused"
            )
        times = end - np.arange(288)[::-1] * 300.0
        return History(times, np.full(times.size, self.level), "fake")

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        self.recent_reads.append((end, span_seconds))
        if self.down:
            raise SourceError(
                "Prometheus at http://prometheus:9090 is unreachable: connection refused"
            )
        times = end - np.arange(int(span_seconds // 300) + 1)[::-1] * 300.0
        return History(times, np.full(times.size, self.level), "fake")


class HalfLevelBurst:
    """A burst model asking for half the latest observed level (a stand-in for the learned model)."""

    quantile, lead_seconds, delay_seconds, lookback_seconds, max_age_seconds = (
        0.95,
        600.0,
        60.0,
        7200.0,
        900.0,
    )

    def allowance(self, observed: History, at: np.ndarray, forecast: Forecast) -> np.ndarray:
        return np.full(np.shape(at), 0.5 * float(observed.values[-1]))


class BurstForecaster(RampForecaster):
    """A flat forecast carrying `HalfLevelBurst` and a refit-time table of 2 demand units."""

    def fit(
        self, history: History, spec: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast | NoForecast:
        from predictive_headroom.core.series import BurstProfile

        times = now + np.arange(0.0, spec.horizon.total_seconds() + 1, spec.step.total_seconds())
        flat = np.full(times.size, 10.0)
        table = BurstProfile(0.95, settings.lead, 1800.0, np.full((1, 48), 2.0), False)
        return Forecast(
            times, flat, flat - 1, flat + 1, "flat", now, burst=table, burst_model=HalfLevelBurst()
        )


def pool_yaml(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "target": {"namespace": NS, "name": f"{name}-placeholder"},
        "maxReplicas": 40,
        **extra,
    }


FORECAST = {
    "query": 'ph_demand{job="web"}',
    "demandPerReplica": 10,
    "history": "7d",
    "horizon": "6h",
    "minHistory": "2d",
}


def write_config(path: Path, *pools: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump({"pools": list(pools)}, sort_keys=False))
    return path


def write_kubeconfig(path: Path, server: FakeApiServer) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "ph", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "ph"}}],
            }
        )
    )
    return path


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeApiServer]:
    """The fake apiserver with 4 nodes; parametrize indirectly with the CapacityBuffer versions it serves."""
    versions = getattr(request, "param", ("v1alpha1",))
    with FakeApiServer(capacity_buffer_versions=versions) as fake:
        for i in range(4):
            fake.add_node(f"node-{i}", cpu="8", labels={"pool": "web"})
        yield fake


@pytest.fixture
def env(tmp_path: Path, server: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Environment for the `run` command: KUBECONFIG at the fake apiserver, JSON logs."""
    for key in [k for k in os.environ if k.startswith("PH_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", server)))
    monkeypatch.setenv("PH_LOG_FORMAT", "json")
    monkeypatch.setenv("PH_REPORT_DIR", str(tmp_path / "reports"))
    yield tmp_path
    root = logging.getLogger()  # the run command installed its handler on pytest's stderr capture
    for handler in [h for h in root.handlers if h.get_name() == "predictive-headroom"]:
        root.removeHandler(handler)


def run_once(
    config: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, list[dict[str, object]]]:
    """`predictive-headroom run --config F --once`; returns the exit code and the JSON log lines."""
    code = cli.main(["run", "--config", str(config), "--once", *extra])
    lines = [
        json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")
    ]
    return code, lines


def summary(lines: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """The pools of the (single) reconcile summary line, by name."""
    found = [line for line in lines if str(line["message"]).startswith("reconcile")]
    assert len(found) == 1, [line["message"] for line in lines]
    return {p["name"]: p for p in found[0]["pools"]}  # type: ignore[index,union-attr]


def scale_writes(server: FakeApiServer, name: str) -> list[object]:
    return [r for r in server.writes(f"/deployments/{name}/scale")]


# -- run --once, end to end ---------------------------------------------------------------------


@pytest.mark.prometheus
def test_run_once_scales_up_then_down_to_the_plan_with_real_prometheus(
    env: Path, server: FakeApiServer, prometheus_server, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("PH_PROMETHEUS_URL", prometheus_server.url)
    config = write_config(
        env / "policy.yaml",
        pool_yaml("web", leadTime="30m", forecast=FORECAST),
        pool_yaml("batch", minReplicas=2),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    server.add_deployment(NS, "batch-placeholder", 30)

    code, lines = run_once(config, capsys)

    assert code == 0
    pools = summary(lines)
    web = pools["web"]
    assert web["details"]["forecast_status"] == "ok"  # type: ignore[index]
    assert web["components"]["forecast"] >= 1  # type: ignore[index,operator]
    assert web["reason"] == "forecast" and web["action"] == "scaled"
    assert server.replicas(NS, "web-placeholder") == web["desired_replicas"] > 0
    assert server.replicas(NS, "batch-placeholder") == 2  # scaled down to minReplicas
    messages = [e["message"] for e in server.events(NS)]
    assert any("replicas 0 -> " in m and "(forecast)" in m for m in messages)
    assert any("replicas 30 -> 2 (min)" in m for m in messages)
    assert (env / "reports" / "latest" / "index.html").is_file()  # the report after the refit

    # Someone scales web far up; the next run (no stabilisation history) brings it back down.
    server.edit_deployment(NS, "web-placeholder", {"spec": {"replicas": 39}})
    code, lines = run_once(config, capsys)
    assert code == 0
    assert server.replicas(NS, "web-placeholder") == summary(lines)["web"]["desired_replicas"] < 39


def test_the_daemon_logs_validates_warnings_once_at_start(env, server, capsys) -> None:
    window = {"name": "sale", "timezone": "UTC", "start": "0 8 * * *", "end": "0 18 * * *"}
    config = write_config(
        env / "policy.yaml",
        pool_yaml("web", maxReplicas=5, schedules=[{**window, "desiredReplicas": 20}]),
    )
    server.add_deployment(NS, "web-placeholder", 0)

    code, lines = run_once(config, capsys)

    assert code == 0
    said = [line for line in lines if "as validate says" in str(line["message"])]
    assert len(said) == 1, [line["message"] for line in lines]
    assert said[0]["level"] == "WARNING"
    assert "pools[0].schedules[0].desiredReplicas" in str(said[0]["message"])
    assert "maxReplicas is 5" in str(said[0]["message"])


def test_run_once_does_not_write_when_the_target_already_has_the_plan(env, server, capsys) -> None:
    config = write_config(
        env / "policy.yaml",
        pool_yaml("web", minReplicas=3),
        pool_yaml(
            "nodes",
            proportional={"linear": {"nodesPerReplica": 2}, "nodeSelector": {"pool": "web"}},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 3)
    server.add_deployment(NS, "nodes-placeholder", 2)  # 4 nodes / 2

    code, lines = run_once(config, capsys)

    assert code == 0
    assert server.writes("/scale") == [] and server.events() == []
    assert {n: p["action"] for n, p in summary(lines).items()} == {
        "web": "unchanged",
        "nodes": "unchanged",
    }


def test_dry_run_writes_nothing_and_says_what_it_would_do(env, server, capsys) -> None:
    config = write_config(env / "policy.yaml", pool_yaml("web", minReplicas=5))
    server.add_deployment(NS, "web-placeholder", 1)

    code, lines = run_once(config, capsys, "--dry-run")

    assert code == 0
    assert server.replicas(NS, "web-placeholder") == 1 and server.events() == []
    assert all(r.query.get("dryRun") == "All" for r in server.writes())
    assert any(
        "DRY-RUN would scale pool web: apps/web-placeholder replicas 1 -> 5" in str(line["message"])
        for line in lines
    )


def test_kill_switch_leaves_the_target_alone_and_says_so(env, server, capsys) -> None:
    config = write_config(env / "policy.yaml", pool_yaml("web", minReplicas=5))
    server.add_deployment(NS, "web-placeholder", 1, annotations={PAUSED_ANNOTATION: "true"})

    code, lines = run_once(config, capsys)

    assert code == 0
    assert server.writes() == [] and server.replicas(NS, "web-placeholder") == 1
    assert summary(lines)["web"]["action"] == "paused"
    assert any("is paused" in str(line["message"]) for line in lines)


def test_a_409_conflict_is_retried(env, server, capsys) -> None:
    config = write_config(env / "policy.yaml", pool_yaml("web", minReplicas=4))
    server.add_deployment(NS, "web-placeholder", 1)
    server.fail("PATCH", r"/deployments/web-placeholder/scale$", 409, times=1)

    code, _ = run_once(config, capsys)

    assert code == 0 and server.replicas(NS, "web-placeholder") == 4
    assert len(scale_writes(server, "web-placeholder")) == 2


def test_403_on_one_pool_is_reported_and_the_others_are_served(env, server, capsys) -> None:
    config = write_config(
        env / "policy.yaml", pool_yaml("web", minReplicas=4), pool_yaml("batch", minReplicas=2)
    )
    server.add_deployment(NS, "web-placeholder", 1)
    server.add_deployment(NS, "batch-placeholder", 0)
    server.fail("*", r"/deployments/web-placeholder", 403, times=None)

    code, lines = run_once(config, capsys)

    assert code == 1  # a pool failed
    assert (
        server.replicas(NS, "batch-placeholder") == 2
        and server.replicas(NS, "web-placeholder") == 1
    )
    pools = summary(lines)
    assert pools["batch"]["action"] == "scaled"
    assert pools["web"]["action"] == "error" and "forbidden" in str(pools["web"]["error"])
    assert "deployments" in str(pools["web"]["error"]) and "web-placeholder" in str(
        pools["web"]["error"]
    )


@pytest.mark.parametrize(
    "server", [("v1beta1",), ("v1alpha1",)], ids=["only-v1beta1", "only-v1alpha1"], indirect=True
)
def test_run_once_scales_a_capacity_buffer_in_the_version_the_cluster_serves(
    env, server, capsys
) -> None:
    version = server.capacity_buffer_versions[0]
    buffer = pool_yaml(
        "gpu",
        minReplicas=3,
        target={"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"},
    )
    config = write_config(env / "policy.yaml", pool_yaml("web", minReplicas=2), buffer)
    server.add_deployment(NS, "web-placeholder", 0)
    server.add_capacity_buffer(NS, "gpu-buffer", 1)

    code, lines = run_once(config, capsys)

    assert code == 0
    assert (
        server.replicas(NS, "web-placeholder") == 2
        and server.capacity_buffer(NS, "gpu-buffer")["spec"]["replicas"] == 3
    )
    assert [w.path for w in server.writes("/capacitybuffers/")] == [
        f"/apis/autoscaling.x-k8s.io/{version}/namespaces/{NS}/capacitybuffers/gpu-buffer"
    ]
    started = [
        str(line["message"]) for line in lines if "CapacityBuffer API" in str(line["message"])
    ]
    assert started == [
        f"pool gpu: CapacityBuffer API autoscaling.x-k8s.io/{version} (namespaced, the server's preferred version)"
    ]
    assert summary(lines)["gpu"]["action"] == "scaled"


@pytest.mark.parametrize("server", [()], ids=["no-capacity-buffers"], indirect=True)
def test_run_once_without_capacity_buffers_fails_that_pool_only_and_says_to_install_them(
    env, server, capsys
) -> None:
    buffer = pool_yaml(
        "gpu",
        minReplicas=3,
        target={"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"},
    )
    config = write_config(env / "policy.yaml", pool_yaml("web", minReplicas=2), buffer)
    server.add_deployment(NS, "web-placeholder", 0)

    code, lines = run_once(config, capsys)

    assert code == 1  # a pool failed
    pools = summary(lines)
    assert pools["web"]["action"] == "scaled" and server.replicas(NS, "web-placeholder") == 2
    assert pools["gpu"]["action"] == "error"
    assert pools["gpu"]["error"] == (
        "pool gpu: CapacityBuffer is not installed: no autoscaling.x-k8s.io/capacitybuffers on "
        "this cluster; install an autoscaler that serves it (Karpenter ≥ 1.14 with "
        "--feature-gates CapacityBuffer=true, or Cluster Autoscaler ≥ 1.34 with the CapacityBuffer "
        "feature), or use kind: Deployment"
    )
    assert server.requests(path_contains="/capacitybuffers") == []


@pytest.mark.parametrize("server", [()], ids=["installed-later"], indirect=True)
def test_last_run_names_the_version_and_a_buffer_crd_installed_later_is_found(
    tmp_path, server
) -> None:
    from predictive_headroom.kube.discovery import CapacityBufferDiscovery

    buffer = pool_yaml(
        "gpu",
        minReplicas=3,
        target={"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"},
    )
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2), buffer)
    server.add_deployment(NS, "web-placeholder", 0)
    api, clock = server.api_client(), Clock()
    discovery = CapacityBufferDiscovery(api, FAST)
    daemon = make_daemon(
        config,
        server,
        clock,
        actuator=TargetActuator(api, FAST, discovery=discovery),
        target_apis=discovery,
    )

    first = daemon.reconcile()
    assert [o.action for o in first.pools] == ["scaled", "error"]
    assert "CapacityBuffer is not installed" in daemon.status()["target_apis"]["gpu"]["error"]

    server.capacity_buffer_versions, server.preferred_version = (
        ("v1beta1",),
        "v1beta1",
    )  # the CRD is installed
    server.add_capacity_buffer(NS, "gpu-buffer", 0)
    clock.now += 60
    second = daemon.reconcile()

    assert [o.action for o in second.pools] == ["unchanged", "scaled"]
    assert server.capacity_buffer(NS, "gpu-buffer")["spec"]["replicas"] == 3
    assert daemon.status()["target_apis"] == {
        "gpu": {
            "kind": "CapacityBuffer",
            "api_version": "autoscaling.x-k8s.io/v1beta1",
            "scope": "Namespaced",
            "chosen_by": "server-preferred",
            "error": None,
        }
    }
    json.dumps(daemon.status())  # /last-run stays JSON


@pytest.mark.parametrize("server", [("v1beta1", "v1alpha1")], ids=["beta-and-alpha"], indirect=True)
def test_a_config_reload_resolves_the_version_again(tmp_path, server, caplog) -> None:
    from predictive_headroom.kube.discovery import CapacityBufferDiscovery

    caplog.set_level(logging.INFO, logger="predictive_headroom.daemon.targetapis")

    target = {"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"}
    config = write_config(tmp_path / "p.yaml", pool_yaml("gpu", minReplicas=2, target=target))
    server.add_capacity_buffer(NS, "gpu-buffer", 0)
    api, clock = server.api_client(), Clock()
    discovery = CapacityBufferDiscovery(api, FAST)
    daemon = make_daemon(
        config,
        server,
        clock,
        actuator=TargetActuator(api, FAST, discovery=discovery),
        target_apis=discovery,
    )
    daemon.reconcile()
    assert daemon.status()["target_apis"]["gpu"]["chosen_by"] == "server-preferred"

    write_config(
        config,
        pool_yaml(
            "gpu", minReplicas=4, target={**target, "apiVersion": "autoscaling.x-k8s.io/v1alpha1"}
        ),
    )
    clock.now += 60
    daemon.reconcile()

    assert [w.path.split("/")[3] for w in server.writes("/capacitybuffers/")] == [
        "v1beta1",
        "v1alpha1",
    ]
    assert daemon.status()["target_apis"]["gpu"]["api_version"] == "autoscaling.x-k8s.io/v1alpha1"
    assert (
        "pool gpu: CapacityBuffer API autoscaling.x-k8s.io/v1alpha1 (namespaced, pinned by target.apiVersion)"
        in caplog.messages
    )


# -- the loop, with a fake clock ----------------------------------------------------------------


def make_daemon(config: Path, server: FakeApiServer, clock: Clock, **kwargs: object) -> Daemon:
    api = server.api_client()
    defaults: dict[str, object] = {
        "source": FakeSource(),
        "forecaster": RampForecaster(),
        "clock": clock,
        "actuator": TargetActuator(api, FAST),
        "cluster": KubeClusterReader(api, FAST),
    }
    defaults.update(kwargs)
    return new_daemon(config, **defaults)


def test_a_person_scaling_the_target_is_left_alone_until_the_plan_changes(
    tmp_path, server, caplog
) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=3))
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock()
    daemon = make_daemon(config, server, clock)
    assert daemon.reconcile().pools[0].action == "scaled"
    assert server.replicas(NS, "web-placeholder") == 3

    server.edit_deployment(
        NS, "web-placeholder", {"spec": {"replicas": 7}}
    )  # kubectl scale --replicas=7
    for _ in range(2):
        clock.now += 60
        assert daemon.reconcile().pools[0].action == "manual-override"
    assert server.replicas(NS, "web-placeholder") == 7
    assert sum("by someone else" in r.getMessage() for r in caplog.records) == 1

    write_config(config, pool_yaml("web", minReplicas=4))  # the plan changes
    clock.now += 60
    assert daemon.reconcile().pools[0].action == "scaled"
    assert server.replicas(NS, "web-placeholder") == 4


def test_no_scale_down_before_the_first_refit_or_without_node_counts(tmp_path, server) -> None:
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml("web", forecast=FORECAST),
        pool_yaml("nodes", proportional={"linear": {"nodesPerReplica": 1}}),
    )
    server.add_deployment(NS, "web-placeholder", 6)
    server.add_deployment(NS, "nodes-placeholder", 9)
    server.fail("GET", r"/api/v1/nodes$", 500, times=None)
    daemon = make_daemon(config, server, Clock())

    result = daemon.reconcile()

    assert [(o.action, o.plan.reason) for o in result.pools] == [  # type: ignore[union-attr]
        ("unchanged", "hold:not-fitted-yet"),
        ("unchanged", "hold:no-cluster-state"),
    ]
    assert not result.ok  # the node count failed, so `--once` would say so
    assert server.writes() == []


def forecast_bounds(daemon: Daemon) -> dict[str, float]:
    """The predictive_headroom_forecast_demand samples of pool web, by bound."""
    text = daemon.metrics.exposition().decode()
    return {
        s.labels["bound"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "predictive_headroom_forecast_demand" and s.labels["pool"] == "web"
    }


def test_prometheus_down_keeps_floors_and_the_last_forecast_until_it_expires(
    tmp_path, server
) -> None:
    source = FakeSource()
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web",
            minReplicas=2,
            leadTime="10m",
            forecast={**FORECAST, "demandPerReplica": 1, "horizon": "1h"},
        ),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock()
    daemon = make_daemon(config, server, clock, source=source)
    daemon.refit()
    assert daemon.reconcile().pools[0].plan.reason == "forecast"  # type: ignore[union-attr]
    assert server.replicas(NS, "web-placeholder") == 5
    bounds = forecast_bounds(daemon)
    assert bounds["lower"] < bounds["yhat"] < bounds["upper"] and bounds["yhat"] == pytest.approx(
        15.0
    )  # at now+lead

    source.down = True
    clock.now += 600
    daemon.refit()  # fails: the forecast fitted at T0 stays in use
    plan = daemon.reconcile().pools[0].plan
    assert plan.reason == "forecast" and plan.desired == 5  # type: ignore[union-attr]
    assert daemon.metrics.errors.labels(kind="source")._value.get() == 1

    clock.now += 3600  # past the forecast's horizon
    daemon.refit()
    plan = daemon.reconcile().pools[0].plan
    assert plan.components["forecast"] is None and plan.desired == 2  # type: ignore[union-attr]
    assert plan.reason == "min:forecast-expired"  # type: ignore[union-attr]
    assert forecast_bounds(daemon) == {}  # no forecast, no forecast series
    assert "expired" in daemon.status()["forecasts"]["web"]


def burst_samples(daemon: Daemon) -> dict[tuple[str, str], float]:
    text = daemon.metrics.exposition().decode()
    return {
        (s.name, s.labels.get("source", "")): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.labels.get("pool") == "web"
        and s.name.startswith(("predictive_headroom_burst", "predictive_headroom_fresh"))
    }


def test_reconcile_reads_the_latest_observations_and_falls_back_to_the_table_when_it_cannot(
    tmp_path, server
) -> None:
    source = FakeSource()
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml(
            "web", minReplicas=1, leadTime="10m", forecast={**FORECAST, "demandPerReplica": 1}
        ),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock()
    daemon = make_daemon(config, server, clock, source=source, forecaster=BurstForecaster())
    daemon.refit()

    plan = daemon.reconcile().pools[0].plan
    assert (
        source.recent_reads and source.recent_reads[-1][0] == clock.now
    )  # read at the reconcile's instant
    assert (
        plan.details["burst_source"] == "model" and plan.components["forecast"] == 5
    )  # half of level 10
    assert burst_samples(daemon)[("predictive_headroom_burst_allowance", "model")] == 5.0

    source.level = 30.0  # demand rose since the refit: the next reconcile sees it without a refit
    clock.now += 60
    plan = daemon.reconcile().pools[0].plan
    assert plan.components["forecast"] == 15 and server.replicas(NS, "web-placeholder") == 15

    source.down = (
        True  # the fresh read fails: the refit-time table (2) stands in, the floor (min 1) holds
    )
    clock.now += 60
    result = daemon.reconcile()
    plan = result.pools[0].plan
    assert plan.details["burst_source"] == "profile"
    assert plan.details["burst_fallback"].startswith(
        "fresh-read-failed: Prometheus at http://prometheus:9090 is unreachable"
    )
    assert plan.components["forecast"] == 2 and plan.components["min"] == 1
    assert (
        plan.desired == 15 and plan.reason == "hold:scale-down-stabilization"
    )  # no sudden drop either
    assert result.ok  # the pool was served
    last_run = daemon.status()["reconcile"]["pools"][0]
    assert (
        last_run["details"]["burst_source"] == "profile"
        and "fresh-read-failed" in last_run["details"]["burst_fallback"]
    )
    samples = burst_samples(daemon)
    assert samples[("predictive_headroom_burst_allowance", "profile")] == 2.0
    assert ("predictive_headroom_burst_allowance", "model") not in samples
    assert samples[("predictive_headroom_fresh_read_failures_total", "")] == 1.0

    source.down = False  # back: the model again
    clock.now += 60
    assert daemon.reconcile().pools[0].plan.details["burst_source"] == "model"


class SlowPerQuerySource(FakeSource):
    """Each fresh read waits (up to `WAIT` s) until another is under way too, and the query of
    pool `bad` fails; records the reading threads and the most reads under way at once. Reads
    one after another would each wait the whole `WAIT` and be seen one at a time."""

    WAIT = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()
        self.most_at_once = 0
        self._under_way = 0
        self._lock = threading.Lock()
        self._together = threading.Event()

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self._under_way += 1
            self.most_at_once = max(self.most_at_once, self._under_way)
            if self._under_way > 1:
                self._together.set()
        try:
            self._together.wait(self.WAIT)
        finally:
            with self._lock:
                self._under_way -= 1
        if spec.query == "bad":
            raise SourceError("query 'bad' returned no data")
        return super().recent(spec, end, span_seconds)


def test_fresh_reads_of_many_pools_run_at_once_and_one_failure_stays_with_its_pool(
    tmp_path, server
) -> None:
    source = SlowPerQuerySource()
    pools = [
        pool_yaml(
            f"p{i}",
            leadTime="10m",
            forecast={**FORECAST, "demandPerReplica": 1, **({"query": "bad"} if i == 0 else {})},
        )
        for i in range(4)
    ]
    config = write_config(tmp_path / "p.yaml", *pools)
    for i in range(4):
        server.add_deployment(NS, f"p{i}-placeholder", 0)
    daemon = make_daemon(config, server, Clock(), source=source, forecaster=BurstForecaster())
    daemon.refit()
    result = daemon.reconcile()
    assert source.most_at_once > 1  # at once, however slowly the machine starts the threads
    assert all(t.startswith("fresh-read") for t in source.threads) and len(source.threads) > 1
    sources = {
        o.pool: (o.plan.details["burst_source"], o.plan.details.get("burst_fallback", ""))
        for o in result.pools
    }
    assert sources["p0"] == ("profile", "fresh-read-failed: query 'bad' returned no data")
    assert all(sources[f"p{i}"] == ("model", "") for i in (1, 2, 3)) and result.ok


@pytest.mark.prometheus
def test_prometheus_unreachable_keeps_the_forecast_fitted_on_real_prometheus(
    tmp_path, server, prometheus_server
) -> None:
    config = write_config(
        tmp_path / "p.yaml", pool_yaml("web", minReplicas=1, leadTime="30m", forecast=FORECAST)
    )
    server.add_deployment(NS, "web-placeholder", 0)
    clock = Clock(prometheus_server.end)
    daemon = make_daemon(
        config, server, clock, source=PrometheusSource(prometheus_server.url, Settings())
    )
    daemon.refit()
    first = daemon.reconcile().pools[0].plan
    fitted = daemon.forecasts()["web"]
    assert isinstance(fitted, Forecast) and first.components["forecast"] is not None  # type: ignore[union-attr]

    daemon.source = PrometheusSource(
        "http://127.0.0.1:9", Settings(prometheus_retries=0, prometheus_timeout=2)
    )
    clock.now += 300
    daemon.refit()
    assert daemon.forecasts()["web"] is fitted
    assert daemon.reconcile().pools[0].plan.components["forecast"] is not None  # type: ignore[union-attr]
    assert server.replicas(NS, "web-placeholder") >= 1


def test_a_bad_config_change_is_rejected_and_the_old_config_stays(tmp_path, server, caplog) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=3))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, Clock())
    daemon.reconcile()

    bad = {"pools": [{**pool_yaml("web", minReplicas=50), "maxReplicas": 10}]}
    config.write_text(yaml.safe_dump(bad))
    result = daemon.reconcile()

    assert result.pools[0].plan.desired == 3 and server.replicas(NS, "web-placeholder") == 3  # type: ignore[union-attr]
    rejected = daemon.status()["config"]["rejected_change"]
    assert (
        "minReplicas 50 is greater than maxReplicas 10" in rejected
        and "pools[0].minReplicas" in rejected
    )
    assert sum("previous config stays in force" in r.getMessage() for r in caplog.records) == 1
    daemon.reconcile()  # the same bad content is not reported again
    assert sum("previous config stays in force" in r.getMessage() for r in caplog.records) == 1

    write_config(config, pool_yaml("web", minReplicas=6))
    daemon.reconcile()
    assert (
        server.replicas(NS, "web-placeholder") == 6
        and daemon.status()["config"]["rejected_change"] is None
    )


def test_one_summary_line_per_reconcile(tmp_path, server, caplog) -> None:
    config = write_config(
        tmp_path / "p.yaml", pool_yaml("web", minReplicas=3), pool_yaml("batch", minReplicas=1)
    )
    server.add_deployment(NS, "web-placeholder", 0)
    server.add_deployment(NS, "batch-placeholder", 1)
    caplog.set_level(logging.INFO, logger="predictive_headroom.daemon.loop")
    make_daemon(config, server, Clock()).reconcile()
    lines = [r.getMessage() for r in caplog.records if r.name == "predictive_headroom.daemon.loop"]
    assert len(lines) == 1
    assert "web=3 (min, 0->3)" in lines[0] and "batch=1 (min, unchanged)" in lines[0]


# -- leader election ----------------------------------------------------------------------------


@pytest.mark.slow
def test_two_daemons_with_one_lease_never_both_write(tmp_path, server) -> None:
    """A wants 3 and B wants 5; the replica history shows one writer at a time, then a takeover."""
    server.add_deployment(NS, "web-placeholder", 0)
    timing = LeaseTiming(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
    daemons, electors = [], []
    for name, wanted in (("a", 3), ("b", 5)):
        config = write_config(tmp_path / f"{name}.yaml", pool_yaml("web", minReplicas=wanted))
        elector = LeaderElector(
            server.api_client(), "predictive-headroom", "ph", identity=name, timing=timing
        )
        electors.append(elector)
        daemons.append(make_daemon(config, server, time.time, elector=elector))
    for elector in electors:
        elector.start()
    stop = threading.Event()

    def loop(daemon: Daemon) -> None:
        while not stop.is_set():
            daemon.reconcile()
            time.sleep(0.05)

    threads = [threading.Thread(target=loop, args=(d,)) for d in daemons]
    for t in threads:
        t.start()
    try:
        deadline = time.time() + 60
        while not any(e.is_leader for e in electors) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        first = next(i for i, e in enumerate(electors) if e.is_leader)
        electors[
            first
        ].stop()  # the leader goes away; the other takes over within the lease duration
        deadline = time.time() + timing.lease_duration + 30  # generous on a busy machine
        while server.replicas(NS, "web-placeholder") != (5, 3)[first] and time.time() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
        for e in electors:
            e.stop()
    values = [r.body["spec"]["replicas"] for r in scale_writes(server, "web-placeholder")]
    leader_value, follower_value = (3, 5)[first], (5, 3)[first]
    assert values == [leader_value, follower_value], values


def _poll(condition: object, seconds: float = 60.0) -> bool:
    """Wait for `condition()` to hold, at most `seconds`; whether it did."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)
    return bool(condition())  # type: ignore[operator]


@pytest.mark.slow
def test_config_swaps_during_a_refit_coalesce_into_one_refit_of_the_newest_config(
    tmp_path, server, caplog
) -> None:
    """Issue 45: 30 ConfigMap swaps in 62 s queued 15 Prophet fits for 4 reloads, the stale ones
    run too. Now ten swaps while a fit runs cost one more fit, of the newest config, and the fit
    of the config swapped out is dropped with a log line."""
    release, leads = threading.Event(), []

    class HeldForecaster(RampForecaster):
        def fit(
            self, history: History, spec: ModelSpec, settings: PlanSettings, now: float
        ) -> Forecast | NoForecast:
            leads.append(settings.lead)  # which config this fit is for
            release.wait(60)
            return super().fit(history, spec, settings, now)

    def policy(minutes: int) -> Path:
        return write_config(
            tmp_path / "p.yaml",
            pool_yaml("web", minReplicas=1, leadTime=f"{minutes}m", forecast=FORECAST),
        )

    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(policy(1), server, time.time, forecaster=HeldForecaster())
    runner = Runner(daemon, interval=0.05)
    runner.start()
    try:
        assert _poll(lambda: leads == [60.0])  # the refit at start, held
        with caplog.at_level(logging.INFO):
            for minutes in range(2, 12):  # ten swaps, each seen by a reconcile
                policy(minutes)
                assert _poll(
                    lambda m=minutes: daemon.policy.pools[0].lead_time == timedelta(minutes=m)
                )
            release.set()

            def fitted_for_the_newest() -> bool:
                forecast = daemon.forecasts()["web"]
                return isinstance(forecast, Forecast) and forecast.fitted_for.lead == 660.0

            assert _poll(fitted_for_the_newest)
        time.sleep(0.5)  # nothing else was waiting
        assert leads == [60.0, 660.0]
        print(f"10 config swaps while a fit was held: {len(leads)} fits, lead times {leads}")
        messages = [r.getMessage() for r in caplog.records]
        # Each later swap merged into the waiting refit, or (a busy machine: the last swap's ask
        # came after the held fit ended and the waiting refit of that config had started) found
        # the refit running already fitting it.
        merged = sum("merged into the refit already waiting" in m for m in messages)
        covered = sum("the refit running now already fits this config" in m for m in messages)
        assert merged + covered == 9, (merged, covered)
        assert any("the fit for the old config is dropped" in m for m in messages)
    finally:
        release.set()
        runner.stop()


# -- SIGTERM ------------------------------------------------------------------------------------


@pytest.mark.prometheus
def test_sigterm_stops_the_daemon_within_seconds_during_a_refit(
    env, server, prometheus_server
) -> None:
    config = write_config(
        env / "policy.yaml",
        pool_yaml("web", minReplicas=2, forecast={**FORECAST, "history": "28d"}),
    )
    server.add_deployment(NS, "web-placeholder", 0)
    child_env = {
        **os.environ,
        "PH_PROMETHEUS_URL": prometheus_server.url,
        "PH_LISTEN_PORT": "0",
        "PH_LEASE_DURATION": "3",
        "PH_NAMESPACE": "predictive-headroom",
        "PH_LOG_FORMAT": "text",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "predictive_headroom", "run", "--config", str(config)],
        cwd=REPO,
        env=child_env,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Generous waits that end on the condition: on a busy machine the start alone (importing
    # Prophet and pandas) can take longer than a quiet machine's whole test.
    try:
        deadline = time.monotonic() + 180
        while server.replicas(NS, "web-placeholder") != 2 and time.monotonic() < deadline:
            assert proc.poll() is None, "the daemon exited before its first reconcile"
            time.sleep(0.1)
        assert server.replicas(NS, "web-placeholder") == 2  # the first reconcile ran (as leader)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = proc.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    log = proc.stderr.read() if proc.stderr else ""
    assert code == 0, log
    # The stop does not wait for the fit (the log says the refit in progress was abandoned): on a
    # quiet machine under a second; on a busy one the interpreter's exit alone has taken 20 s, so
    # the bound is what a user sees, Kubernetes' default grace period of 30 s before a SIGKILL.
    assert took < 30, log
    assert "received SIGTERM" in log and "stopped" in log
    assert "refit in progress is abandoned" in log
    lease = server.lease("predictive-headroom", "predictive-headroom")
    assert lease is not None and not lease["spec"].get(
        "holderIdentity"
    )  # released for a fast handover


@pytest.mark.slow
def test_runner_refits_at_start_and_stops_at_once_while_a_refit_runs(tmp_path, server) -> None:
    began, release, finished = threading.Event(), threading.Event(), threading.Event()

    class HeldForecaster(RampForecaster):
        """A fit that runs until the test releases it (or 60 s pass)."""

        def fit(self, *args: object, **kwargs: object) -> Forecast | NoForecast:
            began.set()
            release.wait(60)
            try:
                return super().fit(*args, **kwargs)  # type: ignore[arg-type]
            finally:
                finished.set()

    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=2, forecast=FORECAST))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, time.time, forecaster=HeldForecaster())
    runner = Runner(daemon, interval=0.2)
    runner.start()
    deadline = time.time() + 60
    while server.replicas(NS, "web-placeholder") != 2 and time.time() < deadline:
        time.sleep(0.05)
    assert began.wait(60)  # the refit at start is under way
    runner.stop()
    assert not finished.is_set()  # stopped while the fit still ran: it did not wait for it
    release.set()
    assert finished.wait(60)
    time.sleep(0.5)  # the abandoned fit has returned; it must not be swapped in
    assert isinstance(daemon.forecasts()["web"], NoForecast)
    assert server.replicas(NS, "web-placeholder") == 2


def test_runner_reschedules_and_refits_after_a_config_change(tmp_path, server) -> None:
    config = write_config(tmp_path / "p.yaml", pool_yaml("web", minReplicas=1))
    server.add_deployment(NS, "web-placeholder", 0)
    daemon = make_daemon(config, server, time.time)
    runner = Runner(daemon, interval=0.2)
    runner.start()

    def wait_for(replicas: int) -> int:
        deadline = time.time() + 60
        while server.replicas(NS, "web-placeholder") != replicas and time.time() < deadline:
            time.sleep(0.05)
        return server.replicas(NS, "web-placeholder")

    try:
        assert wait_for(1) == 1
        assert not [job.id for job in runner.scheduler.get_jobs() if job.id.startswith("refit:")]
        write_config(
            config,
            pool_yaml(
                "web",
                minReplicas=1,
                leadTime="10m",
                forecast={**FORECAST, "demandPerReplica": 1, "refit": "15 */2 * * *"},
            ),
        )
        assert wait_for(5) == 5  # reloaded, refitted at once, forecast rise 5 / demandPerReplica 1
        refits = [job for job in runner.scheduler.get_jobs() if job.id.startswith("refit:")]
        assert [job.id for job in refits] == ["refit:15 */2 * * *"]
        assert refits[0].next_run_time.minute == 15
    finally:
        runner.stop()


@pytest.mark.parametrize("server", [("v1beta1",)], ids=["only-v1beta1"], indirect=True)
def test_last_run_shows_the_buffer_conditions_its_autoscaler_reports(tmp_path, server) -> None:
    from predictive_headroom.kube.discovery import CapacityBufferDiscovery

    target = {"kind": "CapacityBuffer", "namespace": NS, "name": "gpu-buffer"}
    config = write_config(tmp_path / "p.yaml", pool_yaml("gpu", minReplicas=2, target=target))
    status = {
        "conditions": [
            {"type": "Provisioning", "status": "True", "reason": "RequiresNewCapacity",
             "message": "2 buffer pods need new nodes", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved"},
            {"type": "LimitedByQuotas", "status": "False"},
            {"reason": "no type: left out"},
        ]
    }  # fmt: skip
    server.add_capacity_buffer(NS, "gpu-buffer", 0, status=status)
    api, clock = server.api_client(), Clock()
    discovery = CapacityBufferDiscovery(api, FAST)
    daemon = make_daemon(
        config, server, clock, actuator=TargetActuator(api, FAST, discovery=discovery),
        target_apis=discovery,
    )  # fmt: skip

    daemon.reconcile()

    (pool,) = daemon.status()["reconcile"]["pools"]
    assert pool["action"] == "scaled"
    assert pool["target_conditions"] == [
        {"type": "LimitedByQuotas", "status": "False", "reason": "", "message": ""},
        {"type": "Provisioning", "status": "True", "reason": "RequiresNewCapacity",
         "message": "2 buffer pods need new nodes"},
        {"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved", "message": ""},
    ]  # fmt: skip
    json.dumps(daemon.status())
