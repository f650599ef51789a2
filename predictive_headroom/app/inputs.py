"""What a pool is planned from (`core.engine.PlanInputs`), built in one place: the daemon's
reconcile, `plan`, the review of `tune` and `backtest` (`app.review`) and the report
(`with_plan_inputs`) all plan from what `plan_inputs` builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from predictive_headroom.core.cluster import ClusterState
from predictive_headroom.core.components import Part, registration
from predictive_headroom.core.engine import AnyForecast, PlanInputs
from predictive_headroom.core.series import History, Unobserved
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.report.build import ReportInputs


def plan_inputs(
    pool: Pool,
    settings: PlanSettings,
    *,
    forecast: AnyForecast = None,
    observed: History | Unobserved | None = None,
    cluster: ClusterState | None = None,
    parts: Mapping[str, Part] | None = None,
) -> PlanInputs:
    """What `pool` is planned from: its `forecast` (None: it forecasts nothing), its latest
    observations for the burst model, the `cluster` for the proportional rule (None leaves that
    rule out), the `settings` it plans with (resolved by the shell, which knows the measured
    lead time and the re-tune: no default here, so no shell plans with other settings than it
    shows) and the registered
    components a shell read (`parts`, by name; those the pool turns off are dropped)."""
    given = parts or {}
    read = {
        name: part
        for name, part in given.items()
        if registration(name).at_each_instant and registration(name).enabled(pool)
    }
    return PlanInputs(forecast, observed, cluster, settings, read)


def with_plan_inputs(
    policy: Policy, given: ReportInputs, at: float, cluster: ClusterState | None = None
) -> ReportInputs:
    """`given` with what each pool of `policy` is planned from at `at` (`ReportInputs.plans`):
    its forecast, settings and components as given, on `cluster`, observed as the daemon reads
    them at `at` (default: the pool's history up to `at`, which holds the same samples)."""
    plans = {}
    for pool in policy.pools:
        name = pool.name
        observed: History | Unobserved | None
        if given.observed is not None and name in given.observed:
            observed = given.observed[name]
        else:
            history = given.histories.get(name)
            observed = history.until(at) if history is not None else None
        plans[name] = plan_inputs(
            pool,
            given.settings[name],
            forecast=given.forecasts.get(name),
            observed=observed,
            cluster=cluster,
            parts=given.parts.get(name),
        )
    return dataclasses.replace(given, plans=plans)
