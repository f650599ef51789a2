"""A budgeted pool replayed on a real series (tests/data): every day's overhead node-hours (its
placeholders on the simulated node, 1/slots of a node-hour each per hour) stay within `budget:`,
walking forward, where the same pool without the budget holds more; the figures go to
docs/budget.md."""

from __future__ import annotations

from test_backtest import SeasonalNaiveForecaster
from testdata import series_path

from predictive_headroom.backtest.frontier import protection
from predictive_headroom.backtest.results import BacktestSettings
from predictive_headroom.backtest.run import run_backtest
from predictive_headroom.core.budget import day_of
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.sources.csvsource import read_csv_history

DAY = 86400.0
SERIES = series_path("nab_twitter_fb_5min")  # its first 14 days: all this test reads
POOL = {
    "name": "web",
    "target": {"namespace": "ns", "name": "ph"},
    "maxReplicas": 200,
    "forecast": {"query": "q", "demandPerReplica": 2},
}


def per_day(result, zone: str, start: int = 0) -> dict[float, float]:
    """The forecast strategy's placeholder node-hours per day of `zone`, from minute `start`."""
    run, slots = result.strategies["forecast"].run, result.cluster.node_slots
    out: dict[float, float] = {}
    times, held_at = result.times[start:].tolist(), run.placeholders[start:].tolist()
    for at, held in zip(times, held_at, strict=True):
        day = day_of(at, zone).start
        out[day] = out.get(day, 0.0) + held / 60.0 / slots
    return out


def test_a_budgeted_pool_stays_within_its_node_hours_every_day() -> None:
    full = read_csv_history(SERIES)
    history = full.until(full.start + 14 * DAY - 1)
    settings = BacktestSettings(replay=WhatIf(warmup_seconds=7 * DAY), refit_every_seconds=DAY)
    figures = {}
    for budget in (None, 20.0):
        spec = POOL | ({"budget": {"nodeHoursPerDay": budget}} if budget else {})
        result = run_backtest(
            history, Pool.model_validate(spec), settings, forecaster=SeasonalNaiveForecaster()
        )
        forecast, reactive = result.strategies["forecast"], result.strategies["reactive"]
        days, scored = per_day(result, "UTC"), per_day(result, "UTC", result.scored_from)
        kept = protection(
            forecast.metrics.unserved_pod_minutes, reactive.metrics.unserved_pod_minutes
        )
        figures[budget] = (kept, sum(scored.values()) / len(scored), max(days.values()))
        print(
            f"budget {budget}: kept {100 * kept:.1f}% on the {len(scored)} days scored, "
            f"placeholder node-hours a day there: mean {figures[budget][1]:.1f}, most on any day "
            f"{figures[budget][2]:.1f}; overhead over reactive "
            f"{forecast.overhead_node_hours / len(scored):.1f} a day"
        )
    assert figures[None][2] > 20.0  # without it the pool held more on some day
    assert figures[20.0][2] <= 20.0 + 1e-6  # with it, never more than the budget
    assert figures[20.0][1] < figures[None][1]
    assert figures[20.0][0] <= figures[None][0] + 1e-9  # the budget buys no protection
