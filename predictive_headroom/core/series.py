"""The values that flow between source, forecaster, planner and report: plain arrays, no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from predictive_headroom.core.settings import PlanSettings

DAY_SECONDS = 86_400
WEEK_SECONDS = 7 * DAY_SECONDS
MAX_SAMPLE = 1e18
"""The largest demand sample a source accepts, in absolute value (an exabyte; a billion billion
requests): larger ones overflow the fit's arithmetic (a square of 1e308 is infinite) and are
refused at read (`sources`)."""


def from_epoch(seconds: float) -> datetime:
    """Return an aware UTC datetime for POSIX seconds."""
    return datetime.fromtimestamp(float(seconds), tz=UTC)


def iso_utc(seconds: float) -> str:
    """ISO-8601 UTC text for POSIX seconds, e.g. 2014-07-15T18:00:00Z: every page, JSON output and
    message writes instants this way."""
    return from_epoch(seconds).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class History:
    """A demand series: ascending POSIX-second timestamps and finite float values of equal length."""

    times: np.ndarray
    values: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        times = np.asarray(self.times, dtype=float)
        values = np.asarray(self.values, dtype=float)
        if times.shape != values.shape or times.ndim != 1:
            raise ValueError(
                f"history {self.source!r}: times and values must be 1-D and of equal length"
            )
        if times.size > 1 and np.any(np.diff(times) <= 0):
            raise ValueError(f"history {self.source!r}: timestamps must be strictly ascending")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "values", values)

    def __len__(self) -> int:
        return int(self.times.size)

    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    @property
    def span_seconds(self) -> float:
        return float(self.times[-1] - self.times[0]) if len(self) else 0.0

    @property
    def step_seconds(self) -> float:
        """The typical sampling interval (median spacing)."""
        return float(np.median(np.diff(self.times))) if len(self) > 1 else 0.0

    def until(self, cutoff: float) -> History:
        """Return the part of the series at or before `cutoff` (POSIX seconds): what was known then."""
        n = int(np.searchsorted(self.times, cutoff, side="right"))
        return History(self.times[:n], self.values[:n], self.source)

    def since(self, cutoff: float) -> History:
        """Return the part of the series at or after `cutoff`."""
        n = int(np.searchsorted(self.times, cutoff, side="left"))
        return History(self.times[n:], self.values[n:], self.source)


@dataclass(frozen=True)
class BurstProfile:
    """The q-quantile of past residual growth over the lead time, by day of week and time of day (UTC).

    `values` has shape (7, bins) when `by_weekday`, else (1, bins); entries are in demand units.
    """

    quantile: float
    lead: float
    bin_seconds: float
    values: np.ndarray
    by_weekday: bool = True

    def at(self, times: np.ndarray | float) -> np.ndarray | float:
        """Return the burst allowance at `times` (POSIX seconds)."""
        t = np.asarray(times, dtype=float)
        bins = self.values.shape[1]
        tod = ((np.mod(t, DAY_SECONDS)) // self.bin_seconds).astype(int) % bins
        if self.by_weekday:
            # 1970-01-01 was a Thursday; weekday() numbering has Monday = 0.
            dow = (np.floor(t / DAY_SECONDS).astype(int) + 3) % 7
        else:
            dow = np.zeros_like(tod)
        out = self.values[dow, tod]
        return float(out) if np.ndim(times) == 0 else out


class BurstModel(Protocol):
    """A conditional quantile model of demand growth over the lead time (see `forecast.burst_model`).

    It is evaluated on what is observed at each instant, so it answers "how much can demand still
    grow within the lead time, given what it is doing now"."""

    quantile: float
    lead: float
    delay_seconds: float
    lookback_seconds: float
    """How much recent history (before `t - delay_seconds`) the features at `t` read."""
    max_age_seconds: float
    """The oldest the latest observed sample may be (after the delay) for the model to be used."""

    def allowance(self, observed: History, at: np.ndarray, forecast: Forecast) -> np.ndarray:
        """The burst allowance (demand units) at each instant of `at`, from samples of `observed` at
        or before `at - delay_seconds` only; NaN where no fresh sample is known. Negative where
        less growth than the ramp is expected."""
        ...

    def importance(self) -> list[dict[str, Any]]:
        """What moves the model: `{"feature", "drop"}` rows, largest first (may be empty)."""
        ...


@dataclass(frozen=True)
class Unobserved:
    """The latest observations could not be had at reconcile time, and why (the planner then
    falls back to the refit-time burst table)."""

    why: str
    detail: str = ""


@dataclass(frozen=True)
class Forecast:
    """A fitted forecast over `times` (POSIX seconds, ascending) with its interval and burst profile."""

    times: np.ndarray
    yhat: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    model: str
    history_end: float
    fit_seconds: float = 0.0
    burst: BurstProfile | None = None
    warnings: tuple[str, ...] = field(default=())
    model_curve: np.ndarray | None = None
    """The curve the planner reads the predictable ramp from, at `times`: the model's own fit, the
    one the burst profile's residuals were measured against. None means `yhat` itself."""
    burst_for: Callable[[float], BurstProfile] | None = field(
        default=None, repr=False, compare=False
    )
    """The burst profile at another quantile, from the same fit's residuals (None: not available).
    The backtest's quantile sweep uses it to price the dial without refitting."""
    burst_model: BurstModel | None = field(default=None, repr=False, compare=False)
    """The conditional burst model fitted with this forecast, or None: the planner
    then uses the `burst` table alone. The table stays as the fallback when observations are missing."""
    burst_model_for: Callable[[float], BurstModel] | None = field(
        default=None, repr=False, compare=False
    )
    """The burst model at another quantile (fitted on demand from the same refit), for the dial."""
    fitted_for: PlanSettings | None = field(default=None, compare=False)
    """The settings this forecast was fitted for (lead time, observation delay, burst quantile;
    None: not recorded). A refit is needed when `settings.needs_refit(forecast.fitted_for)`."""
    plausible_max: float | None = field(default=None, compare=False)
    """The highest demand sample the history it was fitted on makes plausible (`core.screen`);
    the latest observations are judged against it. None: not judged (too short, or not screened)."""

    def __post_init__(self) -> None:
        names = ("times", "yhat", "lower", "upper") + (
            ("model_curve",) if self.model_curve is not None else ()
        )
        for name in names:
            arr = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"forecast {name} contains NaN or infinite values")
            object.__setattr__(self, name, arr)

    @property
    def expires_at(self) -> float:
        """The last instant the forecast covers; after it the planner drops the forecast component."""
        return float(self.times[-1])

    @property
    def step_seconds(self) -> float:
        return float(np.median(np.diff(self.times))) if self.times.size > 1 else 0.0

    def covers(self, t: float) -> bool:
        """True when `t` lies within the forecast (allowing one step before the first point)."""
        return (
            bool(self.times.size)
            and self.times[0] - max(self.step_seconds, 1.0) <= t <= self.times[-1]
        )

    def value_at(self, t: float | np.ndarray) -> float | np.ndarray:
        """Linear interpolation of yhat at `t`."""
        return np.interp(t, self.times, self.yhat)

    @property
    def ramp_curve(self) -> np.ndarray:
        """The curve the predictable ramp is read from, at `times`: `model_curve` when set, else `yhat`."""
        return self.yhat if self.model_curve is None else self.model_curve


@dataclass(frozen=True)
class NoForecast:
    """No usable forecast, with the reason (`insufficient-history`, `prometheus-error`, `expired`, ...)."""

    why: str
    detail: str = ""


def burst_chart_data(
    pool: str,
    model: BurstModel | None,
    times: np.ndarray,
    demand: np.ndarray,
    allowance: np.ndarray,
    fit: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """What the burst model asked for over `times` next to demand, and which features moved it
    (permutation importance, when the model can tell): the burst section of the report and the
    backtest page. `fit` says which fit the allowance comes from (`vocabulary.BurstFit`: "kind",
    "history_end" of the newest fit, "fits" in force over `times`), so each page can say it. None
    without a model."""
    if model is None:
        return None
    ranked = model.importance()

    def num(x: float) -> float | None:
        return round(float(x), 4) if math.isfinite(x) else None

    return {
        "pool": pool,
        "quantile": model.quantile,
        "lead_seconds": model.lead,
        "model": "quantile",
        "times": [iso_utc(t) for t in times],
        "demand": [num(x) for x in demand],
        "allowance": [num(x) for x in allowance],
        "importance": list(ranked),
        "fit": dict(fit) if fit is not None else None,
    }
