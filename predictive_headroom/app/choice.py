"""`tune`'s choice, made in one place: what `predictive-headroom tune` pastes for a pool, and what
the daemon holds at each refit (issue 62, item 1).

`backtest.pasted.tune_choice` is the one function: on a backtest's replays
(`backtest.against_fixed.replays`) it applies `tune`'s rule at the protection asked
(`backtest.choice.recommend_choice`: the protection level or fixed N, judged on the days it did not
see), and with a budget the most protection that budget bought (`backtest.budget.within_budget`).
`choose_for_pool` replays a pool's history and calls it. `tune` and the daemon's refit
(`app.fit.fit_one`, through `app.hold.hold_choice`) call `choose_for_pool`, the daemon walked
forward in `backtest --protection` (`backtest.daemon_walk`) calls `tune_choice` on each day's cut,
so they name the same choice for the same history and instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from predictive_headroom.backtest.against_fixed import Replays, replays
from predictive_headroom.backtest.pasted import Budget, TuneChoice, tune_choice
from predictive_headroom.backtest.results import BacktestResult, BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.series import DAY_SECONDS, History, iso_utc
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.promise import PROMISE_QUANTILES
from predictive_headroom.replay.promise_price import FRONTIER_LEVELS
from predictive_headroom.replay.setup import SimulatedNodes, WhatIf


def choice_settings(
    target: float,
    *,
    base: BacktestSettings | None = None,
    nodes: SimulatedNodes | None = None,
    quantiles: Sequence[float] = PROMISE_QUANTILES,
    windows: Sequence[float] = (),
) -> BacktestSettings:
    """The replay `tune` makes for `target`: `base` (the command's flags; default: the daemon's
    simulated `nodes`, one process, no cache) at the promise's quantiles, measuring the
    frontier's levels and `target`, without the burst view."""
    if base is None:
        base = BacktestSettings(replay=WhatIf(nodes=nodes or SimulatedNodes()), workers=1)
    return replace(
        base,
        grid_quantiles=tuple(quantiles),
        stabilization_dial=tuple(windows),
        protections=tuple(sorted({*FRONTIER_LEVELS, target})),
        burst_view=False,
    )


@dataclass(frozen=True)
class PoolChoice:
    """A pool's history replayed as `tune` replays it, and `tune`'s choice on it."""

    result: BacktestResult
    replays: Replays
    choice: TuneChoice
    read: str
    """What history was read, in words (`read_words`)."""


def read_words(history: History, window_seconds: float | None = None) -> str:
    """`14.0 days (2026-... to 2026-...)`, with how it stands against the window read up to
    (which starts at the midnight after `window_seconds` before the end, `app.hold.window_start`:
    up to a day less)."""
    days = history.span_seconds / DAY_SECONDS if len(history) else 0.0
    text = (
        f"{days:.1f} days ({iso_utc(history.start)} to {iso_utc(history.end)})"
        if len(history)
        else "no history"
    )
    if window_seconds is None or not len(history):
        return text
    window = window_seconds / DAY_SECONDS
    if history.span_seconds < window_seconds - DAY_SECONDS - 3600.0:
        return f"{text}: all the source holds, less than the {window:g}-day window"
    return f"{text}: the {window:g}-day window, from the midnight after its start"


def choose_for_pool(
    pool: Pool,
    history: History,
    target: float,
    forecaster: Forecaster,
    settings: BacktestSettings,
    *,
    budget: Budget | None = None,
    progress: bool = False,
    window_seconds: float | None = None,
    yours: Sequence[int] = (),
) -> PoolChoice:
    """Replay `history` through the backtest with `settings` (`choice_settings`) and make
    `tune`'s choice for `target` on it (`tune_choice`, within `budget` when given). Raises
    ValueError (saying what is needed) when the history is too short to replay. `yours`: the
    user's fixed N, a budget is read against (`backtest.pasted.at_least_yours`)."""
    result = run_backtest(history, pool, settings, progress, forecaster=forecaster)
    r = replays(result, (target,))
    return PoolChoice(
        result, r, tune_choice(r, target, budget, yours), read_words(history, window_seconds)
    )


__all__ = [
    "Budget",
    "PoolChoice",
    "TuneChoice",
    "choice_settings",
    "choose_for_pool",
    "tune_choice",
]
