"""Walk-forward refits for the backtest: the forecast in force at every minute, using only the past.

The model is refitted at the first scored minute and every `every` seconds after, on the history
known at that instant (at most the pool's `forecast.history` of it). Per-minute forecast parts
(`planner.forecast_part`) are computed on demand from the forecast in force, so a months-long
series does not hold one object per minute per strategy in memory.

The same refits also serve the quantile sweep (`quantiles`): each forecast's burst profile is
recomputed at every swept quantile from the same fit's residuals (`Forecast.at_quantile`), and the
model-free baseline is refitted at each, so the dial's price costs no extra Prophet fits.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from predictive_headroom.core.planner import ForecastPart, forecast_part, table_burst
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster

NaiveFit = Callable[
    [History, float, float, float], Any
]  # (history, lead, quantile, now) -> BurstProfile
WARMUP = ForecastPart(None, "warmup")


class RefitParts(Sequence[ForecastPart]):
    """The forecast part of every minute of `times`: `WARMUP` before `first`, then the part read from
    the forecast made at the latest refit at or before that minute.

    A forecast with a burst model is evaluated on `observed` (the whole series) over all the
    minutes it is in force at once; each minute's features read only the samples at or before
    that minute minus the observation delay (`predictive_headroom.forecast.burst_features`)."""

    def __init__(
        self,
        times: np.ndarray,
        first: int,
        starts: np.ndarray,
        forecasts: list[Forecast | NoForecast],
        lead: float,
        dpr: float,
        observed: History | None = None,
    ) -> None:
        self.times, self.first, self.starts, self.forecasts = times, first, starts, forecasts
        self.lead, self.dpr, self.observed = lead, dpr, observed
        self._bursts: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return int(self.times.size)

    def __getitem__(self, i: int) -> ForecastPart:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        if i < self.first:
            return WARMUP
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        forecast = self.forecasts[k]
        at = float(self.times[i])
        if (
            self.observed is None
            or not isinstance(forecast, Forecast)
            or forecast.burst_model is None
        ):
            return forecast_part(forecast, at, self.lead, self.dpr)
        value = float(self.allowances(k)[i - int(self.starts[k])])
        if math.isfinite(value):
            return forecast_part(forecast, at, self.lead, self.dpr, burst=(value, "model", ""))
        return forecast_part(
            forecast,
            at,
            self.lead,
            self.dpr,
            burst=(table_burst(forecast, at, self.lead), "profile", "stale-observations"),
        )

    def allowances(self, k: int) -> np.ndarray:
        """The burst model's allowance at every minute forecast `k` is in force (NaN: no fresh sample)."""
        if k not in self._bursts:
            forecast = self.forecasts[k]
            assert (
                isinstance(forecast, Forecast)
                and forecast.burst_model is not None
                and self.observed is not None
            )
            end = int(self.starts[k + 1]) if k + 1 < len(self.starts) else len(self)
            minutes = self.times[int(self.starts[k]) : end]
            model = forecast.burst_model
            # Only what the features of these minutes can read (twice the lookback, for margin).
            seen = self.observed.until(float(minutes[-1])).since(
                float(minutes[0]) - 2 * (model.lookback_seconds + model.delay_seconds)
            )
            self._bursts[k] = model.allowance(seen, minutes, forecast)
        return self._bursts[k]


@dataclass
class WalkForward:
    """Per-minute forecast parts of the model and of the naive baseline (at the pool's quantile and
    at each swept quantile), and what fitting cost."""

    model: RefitParts
    naive: RefitParts
    dial: dict[float, tuple[RefitParts, RefitParts]]
    refits: int
    fit_seconds: float
    models: dict[str, int]


def naive_forecast(profile: Any, now: float, horizon: float) -> Forecast:
    """A flat zero forecast carrying the naive burst profile, so the planner's ramp is 0."""
    times = np.array([now, now + horizon])
    zero = np.zeros(2)
    return Forecast(times, zero, zero, zero, "naive-burst", now, 0.0, profile)


def walk_forward(
    history: History,
    pool: Pool,
    times: np.ndarray,
    first: int,
    every: float,
    forecaster: Forecaster,
    naive_fit: NaiveFit,
    progress: bool,
    every_line: int,
    quantiles: Sequence[float] = (),
) -> WalkForward:
    """Refit at times[first] and every `every` seconds after on the history known then (up to the
    observation delay before it)."""
    spec = pool.forecast
    assert spec is not None
    lead, dpr, horizon = (
        pool.lead_time.total_seconds(),
        spec.demand_per_replica,
        spec.horizon.total_seconds(),
    )
    refit_at = np.arange(times[first], times[-1] + 1, every)
    starts = np.searchsorted(times, refit_at, side="left")
    model: list[Forecast | NoForecast] = []
    naive: list[Forecast | NoForecast] = []
    swept: dict[float, tuple[list[Forecast | NoForecast], list[Forecast | NoForecast]]] = {
        q: ([], []) for q in quantiles
    }
    fit_seconds, models = 0.0, {}
    bar = _progress_bar(len(refit_at), progress)
    for k, at in enumerate(refit_at):
        # Like every decision at `at`, the refit sees only the samples at or before `at - delay`.
        seen = float(at) - spec.observation_delay.total_seconds()
        known = history.until(seen).since(seen - spec.history.total_seconds())
        started = time.perf_counter()
        fitted = forecaster.fit(known, spec, lead, float(at))
        fit_seconds += time.perf_counter() - started
        key = fitted.model if isinstance(fitted, Forecast) else f"none:{fitted.why}"
        models[key] = models.get(key, 0) + 1
        model.append(fitted)
        naive.append(
            naive_forecast(
                naive_fit(known, lead, spec.burst_quantile, float(at)), float(at), horizon
            )
        )
        for q, (mq, nq) in swept.items():
            mq.append(fitted.at_quantile(q) if isinstance(fitted, Forecast) else fitted)
            nq.append(naive_forecast(naive_fit(known, lead, q, float(at)), float(at), horizon))
        bar.update(1)
        if progress and bar.disable and ((k + 1) % every_line == 0 or k + 1 == len(refit_at)):
            print(
                f"backtest: refit {k + 1}/{len(refit_at)} ({fit_seconds:.0f}s fitting)",
                file=sys.stderr,
                flush=True,
            )
    bar.close()

    def parts(forecasts: list[Forecast | NoForecast]) -> RefitParts:
        return RefitParts(times, first, starts, forecasts, lead, dpr, history)

    dial = {q: (parts(mq), parts(nq)) for q, (mq, nq) in swept.items()}
    return WalkForward(parts(model), parts(naive), dial, len(refit_at), fit_seconds, models)


def _progress_bar(total: int, progress: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc="refits",
        unit="fit",
        file=sys.stderr,
        disable=not (progress and sys.stderr.isatty()),
    )
