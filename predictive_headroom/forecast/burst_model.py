"""The conditional burst model: how much can demand still grow within the lead time, given what it
is doing now?

The refit-time table (`predictive_headroom.forecast.burst`) answers by time of day alone, so it
asks for as much in a calm hour as in a storm, and keeps last month's level after traffic has
doubled. This model learns the same quantity conditionally. For each minute `t` of the training
history, the target is

    g(t) = max demand over (t, t + lead] - demand(t) - ramp(t)

(demand linear between samples, read every minute, as the backtest's cluster sees it; `ramp` is
the predictable rise of Prophet's own curve, which the planner adds separately), and the inputs
are the features of `predictive_headroom.forecast.burst_features`, computed from the samples at or
before `t - delay` only. The target is divided by the newest observed level (`LEVEL_FLOOR`), so
bursts scale with demand. One scikit-learn `HistGradientBoostingRegressor(loss="quantile")` per
quantile asked for: small (150 iterations of 15 leaves, at least 100 rows a leaf, `PARAMS`),
fitted at each refit on at most `MAX_ROWS` minutes of the history the forecast was fitted on.

At every reconcile the planner feeds it the latest observations (`allowance`); when they cannot
be had, or are stale, it falls back to the table.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predictive_headroom.core.series import DAY_SECONDS, Forecast, History
from predictive_headroom.forecast.burst_features import (
    FEATURES,
    feature_matrix,
    growth_target,
    lookback_seconds,
    sample_columns,
)

MAX_ROWS = 10_000
"""Training minutes, evenly strided (28 days: every fourth minute)."""
IMPORTANCE_ROWS = 1440
"""Permutation importance is measured on the last day of training minutes."""
PARAMS = {
    "max_iter": 150,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 100,
    "learning_rate": 0.1,
    "l2_regularization": 1.0,
}
"""Moderately shrunk trees (at least 100 rows a leaf, l2 1); see `docs/measurements.md`."""
LEVEL_FLOOR = 0.1
"""The target is growth relative to the newest observed level, floored at this share of the scale,
so the allowance follows the level past the range the trees were fitted on."""


@functools.cache
def _controller() -> Any:
    import sklearn.ensemble  # noqa: F401  (load its OpenMP runtime before the controller looks)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_thread() -> Any:
    """A context in which fitting and predicting use one OpenMP thread: the model is small, and the
    daemon shares its cores with Prophet's Stan (`docs/measurements.md`)."""
    return _controller().limit(limits=1, user_api="openmp")


def per_level(values: np.ndarray, newest: np.ndarray, scale: float) -> np.ndarray:
    """The unit of the target at each row: the newest observed level, at least `LEVEL_FLOOR` x scale."""
    return np.maximum(np.abs(values[np.maximum(newest, 0)]), LEVEL_FLOOR * scale)


@dataclass
class BurstTrainer:
    """The training set of one refit, fitting a `QuantileBurstModel` per quantile on demand (cached)."""

    lead: float
    delay_seconds: float
    step_seconds: float
    scale: float
    x: np.ndarray
    y: np.ndarray
    past_curve: tuple[np.ndarray, np.ndarray] | None
    models: dict[float, QuantileBurstModel] = field(default_factory=dict)
    released: bool = False
    """True once `let_go`: only the rows `importance` reads are kept."""

    def model(self, quantile: float) -> QuantileBurstModel:
        """The model at `quantile`, fitted once (ValueError for a new quantile once `let_go`)."""
        if quantile not in self.models:
            if self.released:
                raise ValueError(f"burst model at q={quantile:g}: its training set was let go")
            from sklearn.ensemble import HistGradientBoostingRegressor

            started = time.perf_counter()
            regressor = HistGradientBoostingRegressor(
                loss="quantile", quantile=quantile, random_state=0, early_stopping=False, **PARAMS
            )
            with one_thread():
                regressor.fit(self.x, self.y)
            self.models[quantile] = QuantileBurstModel(
                self, quantile, regressor, time.perf_counter() - started
            )
        return self.models[quantile]

    def let_go(self) -> None:
        """Keep only the last `IMPORTANCE_ROWS` training rows (what `importance` reads), once every
        model a run needs is fitted: the models are unchanged, a model at a new quantile raises."""
        if not self.released:
            self.x = self.x[-IMPORTANCE_ROWS:].copy()
            self.y = self.y[-IMPORTANCE_ROWS:].copy()
            self.released = True


def train(
    history: History,
    lead: float,
    delay: float,
    curve: tuple[np.ndarray, np.ndarray] | None,
    max_rows: int = MAX_ROWS,
) -> BurstTrainer | None:
    """The training set from `history` (what was known at refit time) and the model's in-sample curve
    (`curve`: times and values; None fits without ramp and residual). None when under a day is usable."""
    ok = np.isfinite(history.values)
    times, values = history.times[ok], history.values[ok]
    if times.size < 3:
        return None
    step = float(np.median(np.diff(times)))
    first = times[0] + delay + lookback_seconds(step, lead)
    last = times[-1] - lead
    if last - first < DAY_SECONDS:
        return None
    minutes = np.arange(math.ceil(first / 60) * 60.0, last, 60.0)
    minutes = minutes[:: max(1, math.ceil(minutes.size / max_rows))]
    scale = float(np.median(np.abs(values))) or float(np.max(np.abs(values))) or 1.0
    columns = sample_columns(times, values, step, lead)
    x, newest = feature_matrix(
        times, values, columns, minutes, delay=delay, step=step, lead=lead, scale=scale, curve=curve
    )
    ramp = x[:, 11] * scale
    y = (growth_target(times, values, minutes, lead) - ramp) / per_level(values, newest, scale)
    keep = np.isfinite(y) & np.isfinite(x[:, 5])
    past = None if curve is None else (curve[0][-2000:], curve[1][-2000:])
    return BurstTrainer(lead, delay, step, scale, x[keep], y[keep], past)


@dataclass
class QuantileBurstModel:
    """A fitted quantile of lead-time growth (implements `core.series.BurstModel`)."""

    trainer: BurstTrainer
    quantile: float
    regressor: Any
    fit_seconds: float
    _importance: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def lead(self) -> float:
        return self.trainer.lead

    def let_go(self) -> None:
        """Let go of the training set this model was fitted on (`BurstTrainer.let_go`)."""
        self.trainer.let_go()

    @property
    def delay_seconds(self) -> float:
        return self.trainer.delay_seconds

    @property
    def lookback_seconds(self) -> float:
        return lookback_seconds(self.trainer.step_seconds, self.trainer.lead)

    @property
    def max_age_seconds(self) -> float:
        """Two data steps: one missed scrape is tolerated, a stopped series is not."""
        return 2 * self.trainer.step_seconds

    def allowance(self, observed: History, at: np.ndarray, forecast: Forecast | None) -> np.ndarray:
        """The allowance at each instant of `at` from the samples of `observed` at or before
        `t - delay` (NaN where there is none, or the newest is older than `max_age_seconds`).

        It is the quantile of the growth beyond the ramp, so it is negative where the model expects
        less than the ramp: `ramp + allowance` is the quantile of growth, which the planner clips at
        0. Clipping the allowance itself would keep the ramp's full cost at every quantile."""
        t = self.trainer
        at = np.asarray(at, dtype=float)
        ok = np.isfinite(observed.values)
        times, values = observed.times[ok], observed.values[ok]
        if times.size == 0:
            return np.full(at.size, np.nan)
        columns = sample_columns(times, values, t.step_seconds, t.lead)
        x, newest = feature_matrix(
            times,
            values,
            columns,
            at,
            delay=t.delay_seconds,
            step=t.step_seconds,
            lead=t.lead,
            scale=t.scale,
            curve=self._curve(forecast),
        )
        with one_thread():
            out = self.regressor.predict(x) * per_level(values, newest, t.scale)
        stale = (newest < 0) | (
            at - t.delay_seconds - times[np.maximum(newest, 0)] > self.max_age_seconds
        )
        out[stale] = np.nan
        return out

    def _curve(self, forecast: Forecast | None) -> tuple[np.ndarray, np.ndarray] | None:
        """The in-sample fit before the forecast's first point, then the forecast's own curve."""
        past = self.trainer.past_curve
        if past is None:
            return None
        if forecast is None:
            return past
        before = past[0] < forecast.times[0]
        return np.concatenate([past[0][before], forecast.times]), np.concatenate(
            [past[1][before], forecast.ramp_curve]
        )

    def importance(self) -> list[dict[str, Any]]:
        """Permutation importance on the last day of training minutes: how much the pinball loss
        grows when one feature is shuffled, largest first (the target is relative growth; times the
        history's median level, so about demand units at a typical level)."""
        if self._importance is None:
            from sklearn.inspection import permutation_importance
            from sklearn.metrics import make_scorer, mean_pinball_loss

            t = self.trainer
            x, y = t.x[-IMPORTANCE_ROWS:], t.y[-IMPORTANCE_ROWS:]
            scorer = make_scorer(mean_pinball_loss, alpha=self.quantile, greater_is_better=False)
            with one_thread():  # like fit and predict: two spinning threads stall on busy cores
                result = permutation_importance(
                    self.regressor, x, y, scoring=scorer, n_repeats=3, random_state=0
                )
            drops = result.importances_mean * t.scale
            order = np.argsort(-drops)
            self._importance = [
                {"feature": FEATURES[i], "drop": round(float(drops[i]), 6)} for i in order
            ]
        return self._importance
