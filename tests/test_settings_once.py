"""Settings are resolved once and passed down (issue 56, item 3).

- The spot reserve follows the protection the pool plans with (`PlanSettings.protection`), so
  `tune --protection 99%` reaches it in a replay, not the `protection:` written in the file.
- No module below the shells (`core/`, `replay/`, `app/`) reads a raw pool field that
  `PlanSettings` resolves: an AST walk flags the reads, outside the resolver itself.
"""

from __future__ import annotations

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
