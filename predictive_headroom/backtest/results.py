"""The backtest's results: settings, per-strategy scores, the two sweeps, and the headline sentence.

Kept apart from `run` (which computes them) and `text`/`plot` (which show them), so all three
import these dataclasses without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from predictive_headroom.backtest.promise_entry import PromiseEntry
from predictive_headroom.core.curve import Point, cost_at, protection
from predictive_headroom.core.series import DAY_SECONDS, iso_utc
from predictive_headroom.core.vocabulary import CurveRefit
from predictive_headroom.replay.setup import WhatIf
from predictive_headroom.replay.simulator import ClusterSpec, Metrics, Run
from predictive_headroom.replay.tuning import GridRun

if TYPE_CHECKING:
    from predictive_headroom.replay.refit_cache import CacheSpec


@dataclass(frozen=True)
class BacktestSettings:
    """The backtest's own knobs (seconds for durations), over the replay's what-if (`replay`:
    the flags over the pool, the simulated nodes, the warm-up)."""

    replay: WhatIf = field(default_factory=WhatIf)
    refit_every_seconds: float = DAY_SECONDS
    dial: tuple[float, ...] = ()
    """Burst quantiles to sweep: forecast and naive at each (the dial's price)."""
    grid_quantiles: tuple[float, ...] = ()
    """Burst quantiles the grid replays when `dial` is empty (default: `DEFAULT_QUANTILES`),
    swept from the same refits without the dial's own runs (`tune`: the promise's five)."""
    stabilization_dial: tuple[float, ...] = ()
    """Scale-down stabilisation windows (seconds) to sweep likewise."""
    progress_seconds: float = 10.0
    """Without a terminal, one stderr progress line this often."""
    protections: tuple[float, ...] = ()
    """Read each family's cost at these protections (the frontier) and replay the promise."""
    burst_view: bool = True
    """The burst model's last scored day and what moves it (slow)."""
    grid: bool = False
    """Replay forecast and naive at every (dial quantile, dial window) pair."""
    interruption_rate: float | None = None
    """Per node-hour (`--interruptions 5%/day`); None: off."""
    notice_seconds: float = 120.0
    """The interruption notice (`--notice`)."""
    seed: int = 0
    """The interruptions' random draws (`--seed`)."""
    workers: int = 1
    """Worker processes the refits run in (`--workers`; 1: this process)."""
    refit_cache: CacheSpec | None = None
    """Where refits are kept across runs (`replay.refit_cache`; None: fit every one)."""
    curve_refit: CurveRefit = CurveRefit.DAILY
    """How the replay refits the forecast's curve between cuts (`--curve-refit`)."""


@dataclass
class StrategyResult:
    """One strategy's scored metrics, its yardstick and its simulated run."""

    metrics: Metrics
    run: Run
    overhead_node_hours: float = 0.0
    x: float | None = None

    def to_dict(self) -> dict[str, Any]:
        m = self.metrics
        return {
            "unserved_pod_minutes": m.unserved_pod_minutes,
            "node_hours": round(m.node_hours, 3),
            "cold_starts": m.cold_starts,
            "overhead_node_hours": round(self.overhead_node_hours, 3),
            "x": None if self.x is None else round(self.x, 3),
            "mean_placeholders": round(float(self.run.placeholders.mean()), 3),
        }


@dataclass
class DialPoint:
    """The forecast and the naive baseline replayed at one burst quantile of the sweep."""

    quantile: float
    forecast: StrategyResult
    naive: StrategyResult

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantile": self.quantile,
            "forecast": self.forecast.to_dict(),
            "naive": self.naive.to_dict(),
        }


@dataclass
class WindowPoint:
    """The forecast and the naive baseline replayed with one scale-down stabilisation window."""

    stabilization_seconds: float
    forecast: StrategyResult
    naive: StrategyResult

    def to_dict(self) -> dict[str, Any]:
        return {
            "stabilization_seconds": self.stabilization_seconds,
            "forecast": self.forecast.to_dict(),
            "naive": self.naive.to_dict(),
        }


@dataclass(frozen=True)
class ReplaySettings:
    """What a backtest ran with, every choice resolved (the JSON `settings`: these keys, in order)."""

    data: str
    points: int
    data_step_seconds: float
    pool: str | None
    max_replicas: int
    """The pool's smallest cap known from its fields (maxReplicas, or `limits:` when they allow
    fewer, `core.components.static_cap`): a reserve on top of a plan is capped there, as the
    planner does."""
    demand_per_replica: float
    demand_per_replica_source: str
    median_app_pods: float
    node_slots: int
    lag_seconds: float
    scale_down_delay_seconds: float
    hpa_hold_seconds: float
    lead_seconds: float
    quantile: float | None
    burst_model: str | None
    observation_delay_seconds: float | None
    scale_down_stabilization_seconds: float
    warmup_seconds: float
    scored_from: float
    scored_to: float
    scored_minutes: int
    refit_every_seconds: float
    refits: int
    models: dict[str, int]
    fit_seconds: float
    cores_per_node: float
    schedule_windows: str
    proportional_rule: str
    protection_fallback: str = "none"
    """The pool's `protectionFallback` (`fixed`: the promise walk holds a fixed N when its
    ledger says so, `replay.fallback`)."""
    cap_name: str = "maxReplicas"
    """The cap `max_replicas` is (`core.components.static_cap_name`): in the JSON only when it is
    not maxReplicas."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["cap_name"] == "maxReplicas":
            del out["cap_name"]
        return out


def x_against(
    static_curve: list[tuple[int, Metrics]], node_hours: float, unserved: float
) -> float | None:
    """The yardstick x: static headroom's unserved pod-minutes at `node_hours` (the static curve,
    linear between points) over `unserved`; 1 when both are 0, None (unbounded) when only
    `unserved` is 0."""
    nh = np.maximum.accumulate([m.node_hours for _, m in static_curve])
    static_unserved = float(
        np.interp(node_hours, nh, [m.unserved_pod_minutes for _, m in static_curve])
    )
    if unserved > 0:
        return static_unserved / unserved
    return 1.0 if static_unserved == 0 else None


@dataclass(frozen=True)
class InterruptionRow:
    """One strategy on the interrupted cluster against the same strategy without interruptions."""

    name: str
    calm: Metrics
    interrupted: Metrics
    interruptions: int
    mean_placeholders: float

    @property
    def change(self) -> float:
        """Unserved pod-minutes with the interruptions minus without them (`calm`). Not only what
        the interruptions cost: a row with the disruption component also holds its placeholders
        (room for leaving nodes, the spot reserve) in the run with interruptions, and they absorb
        ordinary bursts too, so the change can be below 0 (`NEGATIVE_CHANGE`)."""
        return self.interrupted.unserved_pod_minutes - self.calm.unserved_pod_minutes

    @property
    def node_hours_change(self) -> float:
        """Node-hours with the interruptions minus without them (0.0, never -0.0, when equal)."""
        return round(self.interrupted.node_hours - self.calm.node_hours, 3) + 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.name,
            "unserved_pod_minutes": self.interrupted.unserved_pod_minutes,
            "unserved_pod_minutes_without_interruptions": self.calm.unserved_pod_minutes,
            "waiting_change_with_interruptions": self.change,
            "node_hours": round(self.interrupted.node_hours, 3),
            "node_hours_change": self.node_hours_change,
            "interruptions": self.interruptions,
            "mean_placeholders": round(self.mean_placeholders, 3),
        }


NEGATIVE_CHANGE = (
    "a change below 0 means the run with interruptions left fewer pod-minutes waiting than the "
    "same strategy without them: the disruption component's placeholders (room for the pods of "
    "leaving nodes, the spot reserve) also absorbed ordinary bursts, more than the interruptions "
    "cost; a replacement node ordered at a notice can do the same"
)
"""Why the change in waiting with interruptions can be negative, for the text and the page."""


@dataclass(frozen=True)
class InterruptionReport:
    """The strategies replayed with nodes interrupted at random (`backtest --interruptions`)."""

    rate_per_node_hour: float
    notice_seconds: float
    seed: int
    rows: list[InterruptionRow]
    component: dict[str, Any] | None = None
    """The disruption component alone over the scored span (`component_chart_data`): what the
    page draws."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "rate_per_node_day": round(self.rate_per_node_hour * 24, 6),
            "notice_seconds": self.notice_seconds,
            "seed": self.seed,
            "strategies": [r.to_dict() for r in self.rows],
        }
        if self.component is not None:
            out["component"] = self.component
        return out


COMPONENT_STEP_MINUTES = 5
"""The disruption component chart's step: the most placeholders held in each 5 minutes."""


def component_chart_data(
    times: np.ndarray, placeholders: np.ndarray, interrupted: np.ndarray
) -> dict[str, Any]:
    """The disruption component alone over the scored minutes `times` (POSIX seconds): the most
    placeholders it held in each `COMPONENT_STEP_MINUTES` (`times`, `placeholders`) and the
    instants a node was interrupted (`interruptions`, one per node), as ISO-8601 UTC."""
    n = COMPONENT_STEP_MINUTES
    size = placeholders.size - placeholders.size % n
    held = placeholders[:size].reshape(-1, n).max(axis=1) if size else placeholders[:0]
    at = np.repeat(times[: interrupted.size], interrupted.astype(np.int64))
    return {
        "times": [iso_utc(float(t)) for t in times[:size:n]],
        "placeholders": [int(v) for v in held],
        "interruptions": [iso_utc(float(t)) for t in at],
    }


@dataclass(frozen=True)
class BacktestResult:
    """Every strategy, the static curve, the settings used, the minute grid, the dials and the burst
    allowance over the last scored day (`core.series.burst_chart_data`)."""

    strategies: dict[str, StrategyResult]
    static_curve: list[tuple[int, Metrics]]
    settings: ReplaySettings
    times: np.ndarray
    pods: np.ndarray
    scored_from: int
    cluster: ClusterSpec
    fit_seconds: float = 0.0
    dial: list[DialPoint] = field(default_factory=list)
    stabilization_dial: list[WindowPoint] = field(default_factory=list)
    burst: dict[str, Any] | None = None
    grid: list[GridRun] = field(default_factory=list)  # forecast and naive at each setting pair
    frontier: dict[str, Any] | None = None  # cost at equal protection (backtest.frontier)
    promise: list[PromiseEntry] | None = None  # what `protection: P` keeps (promise_measure)
    interruptions: InterruptionReport | None = None  # `--interruptions`: what each leaves waiting
    notes: tuple[str, ...] = ()  # what the reader must know about the series (an outlier)
    current: list[dict[str, Any]] | None = None  # `--current N`: the user's fixed N against ours
    replayed: Any = field(default=None, repr=False, compare=False)
    """The promise's candidates summed per day (`promise_measure.Replayed`, made for `promise`),
    for `against_fixed.replays` to read rather than replay again."""

    def x_of(self, node_hours: float, unserved: float) -> float | None:
        """`x_against` this result's static curve."""
        return x_against(self.static_curve, node_hours, unserved)

    def headline(self) -> dict[str, Any]:
        """The numbers the product claims, with the sentence."""
        f, o, r = (self.strategies[k] for k in ("forecast", "oracle", "reactive"))
        reactive_u = r.metrics.unserved_pod_minutes
        return {
            "x_forecast": self.strategies["forecast"].to_dict()["x"],
            "x_naive": self.strategies["naive"].to_dict()["x"],
            "forecast_unserved_pct_of_reactive": round(
                100 * f.metrics.unserved_pod_minutes / reactive_u, 2
            )
            if reactive_u
            else None,
            "forecast_overhead_vs_oracle": round(f.overhead_node_hours / o.overhead_node_hours, 3)
            if o.overhead_node_hours > 0
            else None,
            "text": headline(self),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the `backtest` command (`dial` and `stabilization_dial` only when asked for)."""
        out = {
            "strategies": {name: s.to_dict() for name, s in self.strategies.items()},
            "static_curve": [
                {
                    "replicas": n,
                    "unserved_pod_minutes": m.unserved_pod_minutes,
                    "node_hours": round(m.node_hours, 3),
                    "cold_starts": m.cold_starts,
                }
                for n, m in self.static_curve
            ],
            "settings": self.settings.to_dict(),
            "headline": self.headline(),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.dial:
            out["dial"] = [p.to_dict() for p in self.dial]
        if self.stabilization_dial:
            out["stabilization_dial"] = [p.to_dict() for p in self.stabilization_dial]
        if self.burst is not None:
            out["burst"] = self.burst
        if self.frontier is not None:
            out["frontier"] = self.frontier
        if self.promise is not None:
            out["promise"] = [e.to_dict() for e in self.promise]
        if self.interruptions is not None:
            out["interruptions"] = self.interruptions.to_dict()
        if self.current is not None:
            out["current"] = self.current
        return out


def headline(result: BacktestResult) -> str:
    """The result in plain words, both views: how much unserved demand the forecast leaves against
    static headroom at equal cost, and what static headroom costs to protect as well. "Tie" when
    both leave nothing unserved at equal cost: then the cost to get there is what to compare."""
    f = result.strategies["forecast"]
    unserved, static = (
        f.metrics.unserved_pod_minutes,
        _static_unserved_at(result, f.metrics.node_hours),
    )
    if unserved == 0 and static == 0:
        return (
            "Tie: at the same cost static headroom and the forecast both leave no demand unserved, so compare "
            f"the cost to get there: {_equal_protection(result)}."
        )
    protection = _equal_protection(result)
    text = f"{_equal_cost(unserved, static)}. {protection[0].upper()}{protection[1:]}."
    waited = result.strategies["reactive"].metrics.unserved_pod_minutes
    if waited < FEW_EVENTS:
        text += (
            f" Few events: without headroom only {waited:.0f} pod-minutes waited for a node "
            f"(under {FEW_EVENTS:g}, a few bursts), so one burst more or less moves this a lot."
        )
    return text


FEW_EVENTS = 60.0
"""Below this many waiting pod-minutes a ratio or a protection rests on a few bursts: a burst
leaves 5-20 pod-minutes waiting on the shared series (a 3-minute node lag times a few pods), so
60 is 3-12 bursts, where one more or less moves a count by a third or more (1/sqrt(n)); see
docs/promise.md."""


def _static_unserved_at(result: BacktestResult, node_hours: float) -> float:
    """Unserved pod-minutes of static headroom costing `node_hours` (the static curve, linear between points)."""
    nh = np.maximum.accumulate([m.node_hours for _, m in result.static_curve])
    return float(
        np.interp(node_hours, nh, [m.unserved_pod_minutes for _, m in result.static_curve])
    )


def _equal_protection(result: BacktestResult) -> str:
    """What static headroom costs at the protection the forecast kept, read along its curve by
    the one interpolation every command uses (`core.curve.cost_at`)."""
    f = result.strategies["forecast"]
    reactive = result.strategies["reactive"].metrics
    points = [
        Point(m.node_hours - reactive.node_hours, m.unserved_pod_minutes, f"N={n}")
        for n, m in result.static_curve
    ]
    unserved = f.metrics.unserved_pod_minutes
    cost = cost_at(
        points, reactive.unserved_pod_minutes, protection(unserved, reactive.unserved_pod_minutes)
    ).cost
    if cost is None:
        most = result.static_curve[-1][0]
        return (
            f"to protect as well, static headroom would need more than {most} placeholder{'s' if most != 1 else ''}; "
            f"the forecast spends {f.overhead_node_hours:.1f} node-hours over no headroom"
        )
    if cost <= 0:
        return (
            f"to protect as well, static headroom needs no placeholder at all; "
            f"the forecast spends {f.overhead_node_hours:.1f} node-hours over no headroom"
        )
    n = next(n for n, m in result.static_curve if m.unserved_pod_minutes <= unserved)
    return (
        f"to protect as well, static headroom needs {cost:.1f} node-hours over no headroom, read along "
        f"its curve (the fewest reaching it: {n} placeholder{'s' if n != 1 else ''}); the forecast "
        f"spends {f.overhead_node_hours:.1f} ({100 * f.overhead_node_hours / cost:.0f}% of that)"
    )


def _equal_cost(unserved: float, static: float) -> str:
    counts = f"({unserved:.0f} unserved pod-minutes against {static:.0f})"
    if unserved == 0:
        return f"At the same cost the forecast leaves no demand unserved, where static headroom leaves {static:.0f} pod-minutes"
    if static == 0:
        return f"At the same cost the forecast leaves {unserved:.0f} unserved pod-minutes, where static headroom leaves none"
    x = static / unserved
    if round(x, 1) == 1.0:
        return f"At the same cost the forecast leaves about as much unserved demand as static headroom {counts}"
    if x > 1:
        return f"At the same cost the forecast leaves {x:.1f}x less unserved demand than static headroom {counts}"
    return f"At the same cost the forecast leaves {1 / x:.1f}x more unserved demand than static headroom {counts}"
