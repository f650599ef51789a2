"""A pool's effective settings (`core.settings`): what each comes from, and when a refit is due."""

from __future__ import annotations

import pytest

from predictive_headroom.core.settings import (
    PlanSettings,
    Setting,
    SettingSource,
    Strategy,
    Tuned,
    resolve_settings,
    with_values,
)
from predictive_headroom.policy.config import Pool

CONFIGURED, MEASURED, TUNED, DEFAULT = (
    SettingSource.CONFIGURED,
    SettingSource.MEASURED,
    SettingSource.TUNED,
    SettingSource.DEFAULT,
)


def pool(**extra: object) -> Pool:
    return Pool.model_validate(
        {"name": "web", "target": {"namespace": "ns", "name": "ph"}, "maxReplicas": 50, **extra}
    )


FORECAST = {"query": "q", "demandPerReplica": 5}


@pytest.mark.parametrize(
    ("config", "measured", "tuned", "lead", "window", "quantile"),
    [
        ({}, None, None, (300.0, DEFAULT), (1800.0, DEFAULT), (0.95, DEFAULT)),
        ({"leadTime": "4m"}, 500.0, None, (240.0, CONFIGURED), (1800.0, DEFAULT), (0.95, DEFAULT)),
        ({"leadTime": "auto"}, None, None, (300.0, DEFAULT), (1800.0, DEFAULT), (0.95, DEFAULT)),
        ({"leadTime": "auto"}, 500.0, None, (500.0, MEASURED), (1800.0, DEFAULT), (0.95, DEFAULT)),
        (
            {"forecast": {**FORECAST, "burstQuantile": 0.9}, "scaleDownStabilization": "10m"},
            None,
            Tuned(0.5, 300.0),  # no protection: a tuning is ignored
            (300.0, DEFAULT),
            (600.0, CONFIGURED),
            (0.9, CONFIGURED),
        ),
        (
            {"forecast": FORECAST, "protection": "90%"},
            None,
            Tuned(0.8, 900.0),
            (300.0, DEFAULT),
            (900.0, TUNED),
            (0.8, TUNED),
        ),
        (
            {"forecast": FORECAST, "protection": "90%"},
            None,
            Tuned(),  # the re-tune could not tune: the pool's own settings stand
            (300.0, DEFAULT),
            (1800.0, DEFAULT),
            (0.95, DEFAULT),
        ),
    ],
)
def test_each_setting_says_where_it_came_from(config, measured, tuned, lead, window, quantile):
    settings = resolve_settings(pool(**config), measured_lead=measured, tuned=tuned)
    assert settings.lead_seconds == Setting(*lead)
    assert settings.stabilization_seconds == Setting(*window)
    assert settings.burst_quantile == Setting(*quantile)
    assert settings.strategy == Setting(Strategy.FORECAST, DEFAULT)


def test_demand_per_replica_and_observation_delay_come_from_the_forecast_section():
    plain = resolve_settings(pool())
    assert plain.demand_per_replica is None
    spec = resolve_settings(pool(forecast={**FORECAST, "observationDelay": "2m"}))
    assert spec.demand_per_replica == Setting(5.0, CONFIGURED)
    assert spec.observation_delay_seconds == Setting(120.0, CONFIGURED)
    assert spec.to_dict()["observation_delay_seconds"] == {"value": 120.0, "source": "configured"}


def fitted(lead: float, quantile: float = 0.95) -> PlanSettings:
    base = resolve_settings(pool(leadTime="auto", forecast=FORECAST), measured_lead=lead)
    return with_values(base, TUNED, burst_quantile=quantile)


@pytest.mark.parametrize(
    ("now", "then", "refit"),
    [
        (fitted(300.0), None, False),  # nothing fitted yet
        (fitted(300.0), fitted(300.0), False),
        (fitted(355.0), fitted(300.0), False),  # within a fifth of the fitted lead time
        (fitted(365.0), fitted(300.0), True),
        (fitted(235.0), fitted(300.0), True),
        (fitted(300.0, 0.9), fitted(300.0), True),  # another quantile needs another model
        (with_values(fitted(300.0), CONFIGURED, stabilization_seconds=60.0), fitted(300.0), False),
    ],
)
def test_a_refit_is_due_when_the_settings_left_those_the_forecast_was_fitted_for(now, then, refit):
    assert now.needs_refit(then) is refit
