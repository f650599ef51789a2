"""A pool's effective planning settings: one frozen value, each field saying where it came from.

The user's config (`policy.config.Pool`) says what was asked for; `PlanSettings` says what a pool
plans with after the closed loop's measurement (`leadTime: auto`) and the re-tune
(`protection:`) have had their say. `resolve_settings` is the one function that builds it; the
engine, the planner and the forecasters read it, never the config model, for these values.

A forecaster fits for the settings in force (`Forecaster.fit(history, model, settings, now)`,
`model` being the forecast section's model-only knobs, `ModelSpec`). A `Forecast` records the
settings it was fitted for (`Forecast.fitted_for`); `needs_refit` says when the settings in force
have moved far enough from those for the fit to be redone.

The protection asked has one chooser too: `promised_protection` (the flag, else the pool's
`protection:`, else no promise) for what a pool plans with, and `asked_protection` (the same,
else `DEFAULT_PROTECTION`) for the commands that read a history against a protection whatever
the pool says (`tune`, `backtest --current`).

Adding a field: give it a `Setting[...]` type here, fill it in `resolve_settings` (and in
`Tuned` and `retuned`, when a re-tune can choose it), and list it in `FIT_FIELDS` when the fit
depends on it.
Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import timedelta
from enum import StrEnum
from typing import Generic, TypeVar

from predictive_headroom.policy.config import ForecastSpec, Pool
from predictive_headroom.policy.durations import AutoLeadTime

T = TypeVar("T")

LEAD_REFIT_SHARE = 0.2
"""A lead time this far (as a share) from the one a forecast was fitted for asks for a refit: the
burst model is trained for one lead time (`docs/design.md`, section 5). Smaller moves of a
measured lead time change the ramp and the schedule lead at once but keep the fitted model."""


class SettingSource(StrEnum):
    """Where an effective setting came from."""

    CONFIGURED = "configured"
    """Written in the policy file (or given as a flag)."""
    MEASURED = "measured"
    """Measured in the cluster by the closed loop (`leadTime: auto`)."""
    TUNED = "tuned"
    """Chosen by the re-tune of a pool with `protection:`."""
    DEFAULT = "default"
    """Not written anywhere: the product's default."""
    FLAG = "flag"
    """Given on the command line as a what-if (`tune --protection 99%`); so far the protection
    only: the replay flags of `Given` still resolve as `configured`."""


class Strategy(StrEnum):
    """How the forecast component is sized."""

    FORECAST = "forecast"
    """The ramp of the fitted curve plus the burst allowance at the burst quantile."""


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One effective setting and where it came from."""

    value: T
    source: SettingSource

    def __str__(self) -> str:
        return f"{self.value} ({self.source})"


@dataclass(frozen=True)
class Tuned:
    """What a re-tune chose for a pool (None: left as configured)."""

    burst_quantile: float | None = None
    stabilization_seconds: float | None = None
    reserve: int | None = None
    fixed: int | None = None
    """Fixed placeholders held instead of the forecast (`TuningStatus.FIXED`)."""


@dataclass(frozen=True)
class PlanSettings:
    """The settings one pool plans with. Seconds are floats; `demand_per_replica` is None for a
    pool without a forecast section."""

    lead_seconds: Setting[float]
    stabilization_seconds: Setting[float]
    demand_per_replica: Setting[float] | None
    observation_delay_seconds: Setting[float]
    burst_quantile: Setting[float]
    strategy: Setting[Strategy]
    reserve: Setting[int] = Setting(0, SettingSource.DEFAULT)
    """Placeholders held on top of the plan (`forecast.reserve`, or chosen by the re-tune)."""
    protection: Setting[float] | None = None
    """The protection promised (`protection:` of the pool, or a what-if flag); None: no promise,
    the pool plans with its burst quantile as configured."""
    fixed: Setting[int] | None = None
    """Fixed placeholders the forecast component holds instead of the forecast (the re-tune's
    fallback, `TuningStatus.FIXED`); None: the forecast plans."""

    @property
    def lead(self) -> float:
        """The lead time in seconds."""
        return self.lead_seconds.value

    @property
    def measured_lead(self) -> float | None:
        """The lead time in seconds when the closed loop measured it, else None (what
        `resolve_settings(..., measured_lead=)` was given)."""
        return self.lead if self.lead_seconds.source is SettingSource.MEASURED else None

    @property
    def window(self) -> float:
        """The scale-down stabilisation window in seconds."""
        return self.stabilization_seconds.value

    @property
    def delay(self) -> float:
        """The observation delay in seconds."""
        return self.observation_delay_seconds.value

    @property
    def quantile(self) -> float:
        """The burst quantile."""
        return self.burst_quantile.value

    def needs_refit(self, fitted_for: PlanSettings | None) -> bool:
        """True when a forecast fitted for `fitted_for` no longer fits these settings: a fit field
        (`FIT_FIELDS`) differs, the lead time counting only once it moved more than
        `LEAD_REFIT_SHARE`. False when nothing was fitted (`fitted_for` None)."""
        if fitted_for is None:
            return False
        if abs(self.lead - fitted_for.lead) > LEAD_REFIT_SHARE * fitted_for.lead:
            return True
        return any(_value(self, name) != _value(fitted_for, name) for name in FIT_FIELDS)

    def to_dict(self) -> dict[str, dict[str, object]]:
        """`{field: {"value", "source"}}` for logs and status pages."""
        out: dict[str, dict[str, object]] = {}
        for f in fields(self):
            setting = getattr(self, f.name)
            if setting is not None:
                out[f.name] = {"value": setting.value, "source": str(setting.source)}
        return out


FIT_FIELDS = ("observation_delay_seconds", "burst_quantile")
"""The fields besides the lead time that a fitted forecast depends on (compared exactly)."""


def _value(settings: PlanSettings, name: str) -> object:
    setting = getattr(settings, name)
    return None if setting is None else setting.value


DEFAULT_BURST_QUANTILE: float = ForecastSpec.model_fields["burst_quantile"].default
"""The burst quantile of a pool that does not set one: the config model's default, written once
there (the chart's schema is generated from it); every other default reads this name."""
DEFAULT_OBSERVATION_DELAY: float = ForecastSpec.model_fields[
    "observation_delay"
].default.total_seconds()
"""The observation delay in seconds of a pool that does not set one (the config model's default)."""


DEFAULT_PROTECTION = 0.95
"""The protection `tune` and `backtest --current` read a history against when neither a flag
(`--protection`) nor the pool (`protection:`) asks one."""


def promised_protection(pool: Pool | None, flag: float | None = None) -> Setting[float] | None:
    """The protection `pool` promises: `flag` (a what-if, `tune --protection 99%`; source
    `flag`) over the pool's `protection:` (`configured`); None when neither asks one (no
    promise: the pool plans with its burst quantile). The one place the flag-over-pool choice
    is made."""
    if flag is not None:
        return Setting(float(flag), SettingSource.FLAG)
    if pool is not None and pool.protection is not None:
        return Setting(pool.protection, SettingSource.CONFIGURED)
    return None


def asked_protection(pool: Pool | None, flag: float | None = None) -> Setting[float]:
    """The protection a history is read against: `promised_protection(pool, flag)`, else
    `DEFAULT_PROTECTION` (source `default`). `tune` and `backtest` call this, never choose
    themselves."""
    promised = promised_protection(pool, flag)
    return promised or Setting(DEFAULT_PROTECTION, SettingSource.DEFAULT)


def _given(model: object, name: str) -> SettingSource:
    """CONFIGURED when the policy file set `name` on `model`, else DEFAULT."""
    chosen = name in getattr(model, "model_fields_set", ())
    return SettingSource.CONFIGURED if chosen else SettingSource.DEFAULT


@dataclass(frozen=True)
class Given:
    """Settings given over a pool's configuration, each None for the pool's own: the flags of a
    replay (`backtest --lead-time 4m --quantile 0.9`). They resolve as `configured`, over the
    measurement and the tuning."""

    lead: float | None = None
    """Seconds."""
    window: float | None = None
    """The scale-down stabilisation window, seconds."""
    burst_quantile: float | None = None
    observation_delay: float | None = None
    """Seconds."""
    demand_per_replica: float | None = None
    protection: float | None = None
    """A what-if protection (`tune --protection 99%`), resolved as `flag`."""


# Long on purpose: each setting's precedence (config, measured, given) read in one place.
def resolve_settings(
    pool: Pool,
    *,
    measured_lead: float | None = None,
    tuned: Tuned | None = None,
    given: Given = Given(),
) -> PlanSettings:
    """The settings `pool` plans with: its configuration, the lead time measured in the cluster
    when the pool says `leadTime: auto` (`measured_lead` seconds, None until measured), what
    its re-tune chose when it has `protection:` or is given one (`tuned`, applied by `retuned`),
    and what a replay's flags set over all of these (`given`, its protection a what-if of source
    `flag`). A measurement or tuning given for a pool that did not ask for it is ignored."""
    lead = Setting(pool.lead_time.total_seconds(), _given(pool, "lead_time"))
    if isinstance(pool.lead_time, AutoLeadTime):
        lead = Setting(lead.value, SettingSource.DEFAULT)
        if measured_lead is not None:
            lead = Setting(float(measured_lead), SettingSource.MEASURED)
    window = Setting(
        pool.scale_down_stabilization.total_seconds(), _given(pool, "scale_down_stabilization")
    )
    spec = pool.forecast
    quantile = Setting(DEFAULT_BURST_QUANTILE, SettingSource.DEFAULT)
    delay = Setting(DEFAULT_OBSERVATION_DELAY, SettingSource.DEFAULT)
    per_replica = None
    reserve = Setting(0, SettingSource.DEFAULT)
    if spec is not None:
        reserve = Setting(spec.reserve, _given(spec, "reserve"))
        quantile = Setting(spec.burst_quantile, _given(spec, "burst_quantile"))
        delay = Setting(spec.observation_delay.total_seconds(), _given(spec, "observation_delay"))
        per_replica = Setting(spec.demand_per_replica, SettingSource.CONFIGURED)
    protection = promised_protection(pool, given.protection)
    flag = SettingSource.CONFIGURED
    if given.lead is not None:
        lead = Setting(float(given.lead), flag)
    if given.window is not None:
        window = Setting(float(given.window), flag)
    if given.burst_quantile is not None:
        quantile = Setting(float(given.burst_quantile), flag)
    if given.observation_delay is not None:
        delay = Setting(float(given.observation_delay), flag)
    if given.demand_per_replica is not None:
        per_replica = Setting(float(given.demand_per_replica), flag)
    strategy = Setting(Strategy.FORECAST, SettingSource.DEFAULT)
    settings = PlanSettings(
        lead, window, per_replica, delay, quantile, strategy, reserve, protection
    )
    if tuned is None or spec is None:
        return settings
    return retuned(settings, tuned, given)


def retuned(settings: PlanSettings, tuned: Tuned, given: Given = Given()) -> PlanSettings:
    """`settings` (resolved by `resolve_settings` with `given`) with what a re-tune chose over
    them, each of source `tuned`: the burst quantile, the stabilisation window, the reserve and
    the fixed hold; unchanged without a protection to keep. What `given` sets stays given (a
    replay's flags come over the tuning). The refit resolves a pool's settings once, re-tunes
    from them, and plans with these."""
    if settings.protection is None:
        return settings
    chosen: dict[str, Setting[float] | Setting[int]] = {}
    if tuned.burst_quantile is not None and given.burst_quantile is None:
        chosen["burst_quantile"] = Setting(tuned.burst_quantile, SettingSource.TUNED)
    if tuned.stabilization_seconds is not None and given.window is None:
        chosen["stabilization_seconds"] = Setting(tuned.stabilization_seconds, SettingSource.TUNED)
    if tuned.reserve is not None:
        chosen["reserve"] = Setting(tuned.reserve, SettingSource.TUNED)
    if tuned.fixed is not None:
        chosen["fixed"] = Setting(tuned.fixed, SettingSource.TUNED)
    return replace(settings, **chosen)


@dataclass(frozen=True)
class ModelSpec:
    """The forecaster's own knobs, read from a pool's forecast section (`model_spec`): how far
    ahead and at what step to forecast, the interval's width, the history Prophet needs, the
    holidays and the burst model's kind. What the plan depends on (the lead time, the burst
    quantile, the observation delay) travels in `PlanSettings` instead."""

    horizon: timedelta
    step: timedelta
    interval_width: float
    min_history: timedelta
    holidays: str | None = None
    burst_model: str = "quantile"


def model_spec(spec: ForecastSpec) -> ModelSpec:
    """The model-only knobs of a pool's forecast section."""
    return ModelSpec(
        spec.horizon,
        spec.step,
        spec.interval_width,
        spec.min_history,
        spec.holidays,
        spec.burst_model,
    )


def with_values(settings: PlanSettings, source: SettingSource, **values: float) -> PlanSettings:
    """`settings` with the named fields set to `values`, each from `source` (a backtest's flags,
    a replay's swept window): e.g. `with_values(s, SettingSource.CONFIGURED, lead_seconds=240)`."""
    return replace(settings, **{name: Setting(value, source) for name, value in values.items()})
