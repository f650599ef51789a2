"""The one fit path, shared by the daemon and the `plan`, `forecast` and `report` commands: per
pool read its history, re-tune it (`protection:`, `app.tune`), fit its forecast for its settings
(`core.settings.PlanSettings`), optionally score it on held-back days and read its latest
observations for the burst model (`fit_pools` -> `PoolFit` per pool).

Failures become values (NoForecast with the reason, warnings as strings in `PoolFit.warnings`),
so one bad pool never stops the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from predictive_headroom.app.hold import ChoiceOptions, hold_choice, plain_shadow
from predictive_headroom.app.tune import retune
from predictive_headroom.app.tuning import Tuning
from predictive_headroom.core.budget import daily_budget
from predictive_headroom.core.price import Price, pool_price
from predictive_headroom.core.screen import Screened, screen
from predictive_headroom.core.series import Forecast, History, NoForecast, Unobserved
from predictive_headroom.core.settings import (
    Given,
    PlanSettings,
    model_spec,
    resolve_settings,
    retuned,
)
from predictive_headroom.core.vocabulary import BurstFallback, NoForecastWhy
from predictive_headroom.forecast.accuracy import Accuracy, evaluate
from predictive_headroom.policy.config import Policy, Pool
from predictive_headroom.protocols import Forecaster, Source, SourceError
from predictive_headroom.replay.setup import priced_nodes
from predictive_headroom.replay.shadow import Shadow

logger = logging.getLogger(__name__)


def default_forecaster() -> Forecaster:
    """The production forecaster (Prophet with a seasonal-naive fallback)."""
    # Lazy: Prophet and its model code take about a second to import, and every command of the
    # CLI imports this module, most of them without fitting anything.
    from predictive_headroom.forecast.forecaster import ProphetForecaster

    return ProphetForecaster()


def fetch_history(pool: Pool, source: Source, at: float) -> History | NoForecast:
    """The pool's demand history up to `at`, or NoForecast('source-error') saying what went wrong."""
    assert pool.forecast is not None
    try:
        return source.history(pool.forecast, at)
    except SourceError as exc:  # a value, not a log line: each caller says it once, its own way
        return NoForecast(NoForecastWhy.SOURCE_ERROR, str(exc))


def screened_history(
    pool: Pool, source: Source, at: float, ceiling: float | None = None
) -> tuple[History | NoForecast, Screened | None]:
    """The pool's demand history up to `at` without the samples that cannot be real (`core.screen`:
    negative, or far above the series' own range, and above `ceiling`, the last good fit's bound,
    when given), logged once as a warning, and what was dropped (None when the read failed).
    NoForecast('implausible-input') when most samples were dropped: the daemon then keeps the
    last good forecast (`keep_usable`)."""
    history = fetch_history(pool, source, at)
    if isinstance(history, NoForecast):
        return history, None
    screened = screen(history, ceiling=ceiling)
    if not screened.count:
        return history, screened
    logger.warning("pool %s: %s", pool.name, screened.describe())
    if screened.mostly_dropped:
        return NoForecast(NoForecastWhy.IMPLAUSIBLE_INPUT, screened.describe()), screened
    return screened.history, screened


def fit_pool(
    pool: Pool, history: History, forecaster: Forecaster, at: float, settings: PlanSettings
) -> Forecast | NoForecast:
    """Fit one pool's forecast on `history` as known at `at` for `settings` (its lead time, burst
    quantile, observation delay); the forecast records them (`Forecast.fitted_for`)."""
    assert pool.forecast is not None
    fitted = forecaster.fit(history, model_spec(pool.forecast), settings, at)
    return replace(fitted, fitted_for=settings) if isinstance(fitted, Forecast) else fitted


@dataclass(frozen=True)
class PoolFit:
    """One pool's fit at one instant: the history it was fitted on (None when it could not be read),
    the forecast or the reason there is none, the latest observations for the burst model (None
    when not asked for or not needed), the hold-out accuracy when asked for, and warnings."""

    pool: str
    forecast: Forecast | NoForecast
    history: History | None = None
    observed: History | Unobserved | None = None
    accuracy: Accuracy | None = None
    warnings: tuple[str, ...] = ()
    tuning: Tuning | None = None
    settings: PlanSettings | None = None
    """The settings the pool plans with (and its forecast was fitted for): its configuration with
    the measured lead time, re-tuned when it was (None only when built without them)."""
    shadow: Shadow | None = None
    """A pool without `protection:` in dry-run: the live N beside its plan (`app.hold.plain_shadow`;
    a `protection:` pool's is its Tuning's)."""
    dropped: Mapping[str, int] = field(default_factory=dict)
    """History samples dropped as implausible, by reason (`core.screen`, `vocabulary.DroppedWhy`)."""


def fit_one(  # noqa: PLR0913 (keyword-only options, each named by the caller)
    pool: Pool,
    source: Source,
    at: float,
    forecaster: Forecaster,
    *,
    accuracy: bool = False,
    observe: bool = False,
    retune_window: float | None = None,
    measured_lead: float | None = None,
    disabled_too: bool = False,
    given: Given | None = None,
    price: Price | None = None,
    live: Sequence[tuple[float, int]] = (),
    ceiling: float | None = None,
    choice: ChoiceOptions | None = None,
) -> PoolFit:
    """Read, fit (and optionally score and observe) one pool with a forecast section. With
    `retune_window` (seconds), a `protection:` pool is first re-tuned on that much recent history
    (`app.tune.retune`) and fitted at the chosen burst quantile; with `choice`, it holds what
    `tune` would paste (`app.hold.hold_choice`). `measured_lead`: the closed loop's lead time
    (seconds; for `leadTime: auto`). A disabled forecast is fitted only when `disabled_too`
    (`forecast` shows it). `given`: a what-if (`tune --protection 99%`), through the one
    resolver. `price`: the node priced (`core.price`) the re-tune simulates (None: a node of 8
    placeholders). `live`: the target's replicas read over time (dry-run), replayed beside the
    plan (`Tuning.shadow`). `ceiling`: the last good fit's highest plausible sample
    (`Forecast.plausible_max`), which no sample read now may pass (`screened_history`)."""
    spec = pool.forecast
    assert spec is not None
    given = given or Given()
    settings = resolve_settings(pool, measured_lead=measured_lead, given=given)
    if not (spec.enabled or disabled_too):
        return PoolFit(pool.name, NoForecast(NoForecastWhy.DISABLED), settings=settings)
    history, screened = screened_history(pool, source, at, ceiling)
    dropped = {} if screened is None else dict(screened.dropped)
    if isinstance(history, NoForecast) or not len(history):
        return replace(_unread(pool, history, settings), dropped=dropped)
    tuning, shadow = None, None
    if retune_window is not None:
        held = _Held(pool, source, history, at, forecaster, retune_window, price, live, choice)
        tuning, shadow, settings = held.decide(settings, given)
    forecast = _bounded(fit_pool(pool, history, forecaster, at, settings), screened)
    logger.info("pool %s: %s", pool.name, describe(forecast))
    scored, warnings = None, ()
    if accuracy and isinstance(forecast, Forecast):
        scored, warnings = _scored(pool, history, forecaster, settings)
    observed = observe_pool(pool, forecast, source, at) if observe else None
    return PoolFit(
        pool.name,
        forecast,
        history,
        observed,
        scored,
        warnings,
        tuning,
        settings,
        shadow=shadow,
        dropped=dropped,
    )


def _bounded(forecast: Forecast | NoForecast, screened: Screened | None) -> Forecast | NoForecast:
    """`forecast` carrying the screen's upper bound (its latest observations are judged against
    it, `observe_pool`) and, when samples were dropped, a warning saying so."""
    if not isinstance(forecast, Forecast) or screened is None:
        return forecast
    note = screened.describe()
    return replace(
        forecast,
        plausible_max=screened.above,
        warnings=forecast.warnings + ((note,) if note else ()),
    )


@dataclass(frozen=True)
class _Held:
    """What a refit reads to decide what a pool holds: its history, the forecaster, the re-tune's
    window, the node's price, the live N read in dry-run and how `tune`'s choice is made."""

    pool: Pool
    source: Source
    history: History
    at: float
    forecaster: Forecaster
    retune_window: float
    price: Price | None
    live: Sequence[tuple[float, int]]
    choice: ChoiceOptions | None

    def decide(
        self, settings: PlanSettings, given: Given
    ) -> tuple[Tuning | None, Shadow | None, PlanSettings]:
        """What the pool holds and plans with: a `protection:` pool's Tuning and its settings
        re-tuned (resolved once, then re-tuned); else, in dry-run with a choice and a live N, its
        shadow; else nothing, the settings as resolved."""
        if settings.protection is not None:
            tuning = self.tuning(settings)
            return tuning, None, retuned(settings, tuning.tuned, given)
        if self.choice is not None and self.live:
            return None, self.shadow(settings), settings
        return None, None, settings

    def tuning(self, settings: PlanSettings) -> Tuning:
        """The Tuning of a `protection:` pool: `tune`'s choice held (`app.hold.hold_choice`), or
        the re-tune alone without `choice` (`app.tune.retune`)."""
        nodes = None if self.price is None else priced_nodes(self.price)
        if self.choice is None:
            return retune(
                self.pool,
                self.history,
                self.at,
                self.forecaster,
                settings,
                window_seconds=self.retune_window,
                nodes=nodes,
                live=self.live,
            )
        return hold_choice(
            self.pool,
            _choice_history(self.pool, self.source, self.history, self.at, self.choice),
            self.at,
            self.forecaster,
            settings,
            options=self.choice,
            retune_window=self.retune_window,
            nodes=nodes,
            live=self.live,
            budget=_budget(self.pool, self.price),
        )

    def shadow(self, settings: PlanSettings) -> Shadow | None:
        """A pool without `protection:`, in dry-run: its live N beside its plan
        (`app.hold.plain_shadow`)."""
        assert self.choice is not None
        return plain_shadow(
            self.pool,
            _choice_history(self.pool, self.source, self.history, self.at, self.choice),
            self.at,
            self.forecaster,
            settings,
            options=self.choice,
            nodes=None if self.price is None else priced_nodes(self.price),
            live=self.live,
        )


def _choice_history(
    pool: Pool, source: Source, history: History, at: float, choice: ChoiceOptions
) -> History:
    """The history `tune`'s choice reads: up to `choice.window_seconds` before `at`, read again
    from the source when the window is longer than `forecast.history` (the fit's read), without
    the samples that cannot be real (`core.screen`, as the fit's)."""
    assert pool.forecast is not None
    if choice.window_seconds <= pool.forecast.history.total_seconds():
        return history.since(at - choice.window_seconds)
    try:
        longer = screen(source.recent(pool.forecast, at, choice.window_seconds))
    except SourceError as exc:
        logger.warning(
            "pool %s: reading %g days for tune's choice: %s; using the fit's",
            pool.name,
            choice.window_seconds / 86400,
            exc,
        )
        return history
    if longer.mostly_dropped:  # the fit's history, screened already, rather than mostly junk
        return history
    return longer.history


def _budget(pool: Pool, price: Price | None) -> tuple[float, str] | None:
    """The pool's `budget:` in overhead node-hours a day and in words (None: no budget, or
    no price to count it in)."""
    if pool.budget is None or price is None:
        return None
    try:
        b = daily_budget(pool.budget, price)
    except ValueError as exc:
        logger.warning("pool %s: %s; tune's choice is made without the budget", pool.name, exc)
        return None
    return b.node_hours, b.given


def _scored(
    pool: Pool, history: History, forecaster: Forecaster, settings: PlanSettings
) -> tuple[Accuracy | None, tuple[str, ...]]:
    """The pool's hold-out accuracy on `history`, or None and a warning saying why there is none."""
    assert pool.forecast is not None
    try:
        return evaluate(history, model_spec(pool.forecast), forecaster, settings), ()
    except ValueError as exc:
        logger.info("pool %s: no hold-out accuracy: %s", pool.name, exc)
        return None, (f"pool {pool.name}: no hold-out accuracy: {exc}",)


def _unread(pool: Pool, history: History | NoForecast, settings: PlanSettings) -> PoolFit:
    """The fit of a pool whose history could not be read (`history` says why) or is empty."""
    if isinstance(history, NoForecast):
        warning = f"pool {pool.name}: {history.detail}"
        return PoolFit(pool.name, history, warnings=(warning,), settings=settings)
    why = "the series is empty up to the report time"
    return PoolFit(
        pool.name,
        NoForecast(NoForecastWhy.SOURCE_ERROR, why),
        warnings=(f"pool {pool.name}: {why}",),
        settings=settings,
    )


def fit_pools(
    pools: Policy | Sequence[Pool],
    source: Source,
    at: float,
    forecaster: Forecaster | None = None,
    *,
    accuracy: bool = False,
    observe: bool = False,
    retune_window: float | None = None,
    disabled_too: bool = False,
    price_of: Callable[[Pool], Price] | None = None,
    choice: ChoiceOptions | None = None,
) -> dict[str, PoolFit]:
    """`fit_one` for every pool (of a policy, or listed) with a forecast section, in order (the
    others are left out); `price_of` prices each pool's node (default: a policy's `cost:`,
    `core.price.pool_price`), which its re-tune simulates."""
    forecaster = forecaster or default_forecaster()
    chosen = pools.pools if isinstance(pools, Policy) else pools
    if price_of is None and isinstance(pools, Policy):
        cost = pools.cost

        def price_of(pool: Pool) -> Price:
            return pool_price(pool, cost)

    return {
        pool.name: fit_one(
            pool,
            source,
            at,
            forecaster,
            accuracy=accuracy,
            observe=observe,
            retune_window=retune_window,
            disabled_too=disabled_too,
            price=None if price_of is None else price_of(pool),
            choice=choice,
        )
        for pool in chosen
        if pool.forecast is not None
    }


def settings_of(pools: Policy, fits: Mapping[str, PoolFit]) -> dict[str, PlanSettings]:
    """Every pool's settings: those its fit planned with (measured lead time, re-tune), else its
    configuration's (a pool without a forecast section)."""
    out = {}
    for pool in pools.pools:
        fit = fits.get(pool.name)
        out[pool.name] = fit.settings if fit and fit.settings else resolve_settings(pool)
    return out


def needs_observations(pool: Pool, forecast: Forecast | NoForecast | None) -> bool:
    """True when the pool's forecast carries a burst model, which reads the latest observations."""
    return (
        isinstance(forecast, Forecast)
        and forecast.burst_model is not None
        and pool.forecast is not None
    )


def observe_pool(
    pool: Pool,
    forecast: Forecast | NoForecast | None,
    source: Source | None,
    at: float,
    dropped: Callable[[str, int], None] | None = None,
) -> History | Unobserved | None:
    """The pool's latest observations up to `at` when its forecast carries a burst model: one short
    range query covering what the model's features read, without the samples that cannot be real
    (negative, or above the bound of the history the forecast was fitted on: `core.screen`;
    logged, and each reason's count given to `dropped`). None when nothing needs them; an
    `Unobserved` saying why when the read fails (the planner then uses the refit-time table)."""
    if not needs_observations(pool, forecast):
        return None
    assert isinstance(forecast, Forecast) and pool.forecast is not None
    if source is None:
        return Unobserved(BurstFallback.NO_SOURCE)
    model = forecast.burst_model
    span = model.lookback_seconds + model.delay_seconds + 2 * pool.forecast.step.total_seconds()
    try:
        recent = source.recent(pool.forecast, at, span)
    except Exception as exc:  # any failure: the table stands in, the floors are untouched
        logger.warning(
            "pool %s: cannot read the latest observations, using the refit-time burst table: %s",
            pool.name,
            exc,
        )
        return Unobserved(BurstFallback.FRESH_READ_FAILED, str(exc))
    # A short read has no range of its own (a burst starting now would look absurd against the
    # quiet hour before it): it is judged against the fitted history's bound.
    above = math.inf if forecast.plausible_max is None else forecast.plausible_max
    screened = screen(recent, above=above)
    if screened.count:
        logger.warning("pool %s: latest observations: %s", pool.name, screened.describe())
        for why, n in screened.dropped.items():
            if dropped is not None:
                dropped(why, n)
    return screened.history


def describe(forecast: Forecast | NoForecast) -> str:
    """One line about a forecast for logs."""
    if isinstance(forecast, NoForecast):
        return f"no forecast ({forecast.why}){': ' + forecast.detail if forecast.detail else ''}"
    return f"{forecast.model} forecast fitted in {forecast.fit_seconds:.2f}s, {forecast.times.size} points"


def keep_usable(
    previous: Mapping[str, Forecast | NoForecast],
    fresh: Mapping[str, Forecast | NoForecast],
    at: float,
) -> dict[str, Forecast | NoForecast]:
    """Fresh forecasts, except that a failed refit keeps the last good forecast until it expires."""
    merged: dict[str, Forecast | NoForecast] = dict(fresh)
    for name, new in fresh.items():
        old = previous.get(name)
        if (
            isinstance(new, NoForecast)
            and isinstance(old, Forecast)
            and new.why != NoForecastWhy.DISABLED
        ):
            if at <= old.expires_at:
                logger.warning(
                    "pool %s: refit failed (%s); keeping the forecast fitted at %s",
                    name,
                    new.why,
                    old.history_end,
                )
                merged[name] = old
            else:
                merged[name] = NoForecast(
                    NoForecastWhy.EXPIRED, f"last good forecast expired; refit failed: {new.why}"
                )
    return merged
