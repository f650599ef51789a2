"""Settings are resolved once and passed down (issue 56, item 3).

- The spot reserve follows the protection the pool plans with (`PlanSettings.protection`), so
  `tune --protection 99%` reaches it in a replay, not the `protection:` written in the file.
- No module below the shells (`core/`, `replay/`, `app/`) reads a raw pool field that
  `PlanSettings` resolves: an AST walk flags the reads, outside the resolver itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from test_backtest import DAY, SeasonalNaiveForecaster, series
from test_retune import SeriesSource

from predictive_headroom.app.review import daemon_now
from predictive_headroom.core.disruption import poisson_quantile, reserve_quantile
from predictive_headroom.core.price import pool_price
from predictive_headroom.core.settings import Given, resolve_settings
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.planner import replay_parts

PACKAGE = Path(__file__).resolve().parents[1] / "predictive_headroom"

RATE = 0.05
"""Interruptions per node-hour: over 20 nodes and a 10-minute lead, a Poisson mean of 1/6,
whose 90% quantile is 1 node and 99% quantile 2 nodes."""


def spot_pool(protection: str | None) -> Pool:
    extra = {} if protection is None else {"protection": protection}
    return Pool.model_validate(
        {
            "name": "web",
            "target": {"namespace": "apps", "name": "web-placeholder"},
            "maxReplicas": 200,
            "leadTime": "10m",
            "forecast": {"query": "q", "demandPerReplica": 8, "history": "7d"},
            "disruption": {"spot": True, "interruptionRate": RATE},
            **extra,
        }
    )


@pytest.mark.parametrize("configured", ["90%", None])
def test_the_spot_reserve_in_a_replay_follows_the_protection_tune_passes(configured) -> None:
    """`tune --protection 99%` ends with what the daemon would hold (`app.review.daemon_now`),
    reading every component as the replay saw it (`replay.planner.replay_parts`): its spot
    reserve covers 99% of the interruptions, whatever the file's `protection:` says."""
    pool = spot_pool(configured)
    history = series(3)
    at = float(history.end)
    slots, nodes = 7, 20
    pods = np.full(60, 30, dtype=np.int64)

    def parts(settings):
        return replay_parts(pool, pods, pods.size - 1, settings, slots, nodes)

    now = daemon_now(
        pool,
        SeriesSource(history),
        at,
        SeasonalNaiveForecaster(),
        pool_price(pool, None),
        retune_window=14 * DAY,  # longer than the history: the re-tune keeps the defaults
        given=Given(protection=0.99),  # what `tune --protection 99%` passes
        parts=parts,
    )
    mean = RATE * nodes * 600 / 3600
    asked = poisson_quantile(mean, 0.99) * slots
    assert asked != poisson_quantile(mean, 0.9) * slots  # the case tells the two apart
    assert asked != poisson_quantile(mean, 0.95) * slots  # and from the burst quantile
    assert now.plan.components["disruption"] == asked
    assert now.plan.details["spot_reserve"] == asked


def test_the_reserve_quantile_is_the_protection_in_force_else_the_burst_quantile() -> None:
    configured = spot_pool("90%")
    assert reserve_quantile(resolve_settings(configured)) == pytest.approx(0.9)
    what_if = resolve_settings(configured, given=Given(protection=0.99))
    assert reserve_quantile(what_if) == pytest.approx(0.99)
    bare = spot_pool(None)
    assert reserve_quantile(resolve_settings(bare)) == resolve_settings(bare).quantile


RESOLVED_ON_POOL = frozenset({"lead_time", "scale_down_stabilization", "protection"})
"""`policy.config.Pool` fields `core.settings.resolve_settings` turns into `PlanSettings`."""
RESOLVED_ON_FORECAST = frozenset(
    {"reserve", "burst_quantile", "observation_delay", "demand_per_replica"}
)
"""`policy.config.ForecastSpec` fields it resolves (the forecast's model knobs travel apart, in
`core.settings.ModelSpec`)."""
BELOW_THE_SHELLS = ("core", "replay", "app")
RESOLVER = "core/settings.py"


def _annotated(node: ast.expr | None, name: str) -> bool:
    """True when the annotation `node` names the type `name` (`Pool`, `Pool | None`, ...)."""
    return node is not None and any(
        isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)
    )


class _Reads(ast.NodeVisitor):
    """The raw reads of resolved fields in one module: `pool.protection`, `self.pool.lead_time`,
    `pool.forecast.reserve`, `spec.burst_quantile` where `spec = pool.forecast`, ... A pool is a
    name or attribute called `pool` or `*_pool`, a name annotated `Pool`, a loop variable over
    `*.pools`, `policy.pool(name)`, `next(p for p in policy.pools ...)`, or a name assigned one
    of these; a forecast section is `<pool>.forecast`, a name
    annotated `ForecastSpec` or assigned one (`spec = pool.forecast or ForecastSpec(...)`)."""

    def __init__(self) -> None:
        self.pools: set[str] = set()
        self.specs: set[str] = set()
        self.found: list[tuple[int, str]] = []

    def is_pool(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.pools or node.id == "pool" or node.id.endswith("_pool")
        if isinstance(node, ast.Attribute):
            return node.attr == "pool" or node.attr.endswith("_pool")
        if isinstance(node, ast.Call):  # policy.pool(name), next(p for p in policy.pools ...)
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr == "pool":
                return True
            if isinstance(func, ast.Name) and func.id == "next" and args:
                return isinstance(args[0], ast.GeneratorExp) and self.is_pool(args[0].elt)
        return False

    def is_spec(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.specs
        if isinstance(node, ast.Attribute):
            return node.attr == "forecast" and self.is_pool(node.value)
        if isinstance(node, ast.BoolOp):
            return any(self.is_spec(v) for v in node.values)
        return False

    def visit_arg(self, node: ast.arg) -> None:
        if _annotated(node.annotation, "Pool"):
            self.pools.add(node.arg)
        if _annotated(node.annotation, "ForecastSpec"):
            self.specs.add(node.arg)

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if not isinstance(target, ast.Name) or value is None:
            return
        if self.is_pool(value):
            self.pools.add(target.id)
        elif self.is_spec(value):
            self.specs.add(target.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._bind(node.target, node.value)
        if isinstance(node.target, ast.Name) and _annotated(node.annotation, "Pool"):
            self.pools.add(node.target.id)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    def _over_pools(self, target: ast.expr, over: ast.expr) -> None:
        over_pools = isinstance(over, ast.Attribute) and over.attr == "pools"
        if isinstance(target, ast.Name) and over_pools:
            self.pools.add(target.id)

    def visit_For(self, node: ast.For) -> None:
        self._over_pools(node.target, node.iter)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._over_pools(node.target, node.iter)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            if node.attr in RESOLVED_ON_POOL and self.is_pool(node.value):
                self.found.append((node.lineno, ast.unparse(node)))
            if node.attr in RESOLVED_ON_FORECAST and self.is_spec(node.value):
                self.found.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def raw_reads(source: str) -> list[tuple[int, str]]:
    """Each raw read of a resolved pool field in `source`: (line, expression). Two passes, so a
    name bound after its first use in the text (a loop's body) still counts."""
    tree = ast.parse(source)
    first = _Reads()
    first.visit(tree)
    second = _Reads()
    second.pools, second.specs = first.pools, first.specs
    second.visit(tree)
    return sorted(set(second.found))


def test_the_walk_finds_every_kind_of_raw_read() -> None:
    """The walk below has teeth: each way code reaches a resolved field is found."""
    source = """
def f(pool, r, x: Pool, y: ForecastSpec | None, policy):
    a = pool.protection
    b = r.pool.lead_time
    c = x.scale_down_stabilization
    d = pool.forecast.reserve
    spec = pool.forecast or ForecastSpec(query="q")
    e = spec.burst_quantile
    g = y.observation_delay
    h = [p.protection for p in policy.pools]
    replayed = r.given_pool
    i = replayed.forecast.demand_per_replica
    pa = next((p for p in policy.pools if p.name == "web"), None)
    j = pa.lead_time
    k = policy.pool("web").protection
    fine = (settings.protection, entry.protection, pool.max_replicas, pool.forecast.step)
"""
    found = [expr for _, expr in raw_reads(source)]
    assert found == [
        "pool.protection",
        "r.pool.lead_time",
        "x.scale_down_stabilization",
        "pool.forecast.reserve",
        "spec.burst_quantile",
        "y.observation_delay",
        "p.protection",
        "replayed.forecast.demand_per_replica",
        "pa.lead_time",
        "policy.pool('web').protection",
    ]


def test_no_module_below_the_shells_reads_a_field_the_settings_resolve() -> None:
    """`core/`, `replay/` and `app/` read the lead time, the stabilisation window, the protection,
    the reserve, the burst quantile, the observation delay and the demand per replica from the
    `PlanSettings` resolved once and passed down, never from the pool's configuration (only the
    resolver, `core/settings.py`, does)."""
    reads = []
    for layer in BELOW_THE_SHELLS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            name = path.relative_to(PACKAGE).as_posix()
            if name == RESOLVER:
                continue
            reads += [f"{name}:{line}: {expr}" for line, expr in raw_reads(path.read_text())]
    assert reads == []


def test_a_refit_and_a_reconcile_resolve_each_pools_settings_once(tmp_path, monkeypatch) -> None:
    """One refit resolves each pool's settings once (the re-tuned pool's in its fit, its re-tune's
    replay and the report after the refit taking that value), and one reconcile once per pool."""
    from fake_apiserver import FakeApiServer
    from test_daemon import NS, Clock, make_daemon, pool_yaml, write_config
    from test_retune import WINDOW

    from predictive_headroom.app import fit as app_fit
    from predictive_headroom.core import settings as core_settings
    from predictive_headroom.daemon import loop as daemon_loop
    from predictive_headroom.replay import setup as replay_setup

    calls: list[str] = []
    real = core_settings.resolve_settings

    def counted(pool, **kwargs):
        calls.append(pool.name)
        return real(pool, **kwargs)

    for module in (core_settings, app_fit, daemon_loop, replay_setup):
        monkeypatch.setattr(module, "resolve_settings", counted)
    history = series(5)
    forecast = {"query": "q", "demandPerReplica": 5, "history": "28d", "minHistory": "1d"}
    config = write_config(
        tmp_path / "p.yaml",
        pool_yaml("web", protection="90%", leadTime="4m", forecast=forecast),
        pool_yaml("floor", minReplicas=2),
    )
    reported: list = []
    with FakeApiServer() as server:
        for name in ("web", "floor"):
            server.add_deployment(NS, f"{name}-placeholder", 0)
        daemon = make_daemon(
            config,
            server,
            Clock(float(history.end)),
            source=SeriesSource(history),
            forecaster=SeasonalNaiveForecaster(),
            report_writer=lambda *args: reported.append(args[5]),  # the settings
        )
        daemon.retune_window = WINDOW
        assert daemon.refit()
        assert daemon.tunings["web"].status != "default"  # the re-tune replayed its window
        assert sorted(calls) == ["floor", "web"]
        [settings] = reported
        assert settings["web"].burst_quantile.source == "tuned"

        calls.clear()
        assert daemon.reconcile().ok
        assert sorted(calls) == ["floor", "web"]
        assert daemon.pool_reconciler.in_force["web"] == settings["web"]
