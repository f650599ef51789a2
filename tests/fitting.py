"""Fitting in tests: a bare forecast section and a lead time as a forecaster takes them."""

from __future__ import annotations

from predictive_headroom.core.settings import ModelSpec, PlanSettings, model_spec, resolve_settings
from predictive_headroom.policy.config import ForecastSpec, Pool


def fit_args(spec: ForecastSpec, lead_seconds: float) -> tuple[ModelSpec, PlanSettings]:
    """The model's knobs and the settings of a pool with this forecast section and lead time."""
    pool = {"name": "p", "target": {"namespace": "n", "name": "t"}, "maxReplicas": 1000}
    pool = Pool.model_validate({**pool, "leadTime": f"{lead_seconds:g}s", "forecast": spec})
    return model_spec(spec), resolve_settings(pool)
