"""A tail-aware reserve: N sized from a tail model of the app pods' growth over the lead time.

The growth at minute t is how many more app pods run at the worst minute of the next `lead`
minutes than at t (`growth`): what a reserve has to absorb for nothing to wait for a node. Over a
long history (`TAIL_DAYS`) its body is read as it is and its tail, the growths over a high
threshold (`THRESHOLD_QUANTILE` of the positive ones), is a generalized Pareto fit (peaks over a
threshold, `scipy.stats.genpareto`). A reserve of N leaves (G - N)+ of each growth G unabsorbed;
the expected unabsorbed share is E[(G - N)+] / E[G+], and the tail reserve for a protection P is
the smallest N whose share is at most 1 - P (`tail_reserve`).

A record burst is one of many exceedances of a fit over weeks: it neither vanishes from the
reserve a week later nor sets it alone. A decision at minute `at` reads only the minutes known
then (`tail_reserve_at`: up to `at` minus the observation delay), so it is walk-forward.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.stats import genpareto

from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.replay.simulator import ClusterSpec, app_pods, minute_grid

TAIL_DAYS = 28
"""Days of history the tail is fitted on."""
THRESHOLD_QUANTILE = 0.9
"""The threshold: this quantile of the positive growths."""
MIN_EXCEEDANCES = 20
"""Fewer growths over the threshold than this: no fit (no tail reserve)."""
MAX_SHAPE = 0.9
"""The fitted shape is capped here so the expected excess stays finite (a shape of 1 or more
has no mean)."""


def growth(pods: np.ndarray, lead_minutes: int) -> np.ndarray:
    """G[t] = max(pods[t + 1 .. t + lead]) - pods[t], for every t whose next `lead` minutes are in
    `pods` (negative where demand falls)."""
    lead = max(1, int(lead_minutes))
    if pods.size <= lead:
        return np.zeros(0)
    ahead = sliding_window_view(pods[1:].astype(np.float64), lead).max(axis=1)
    return ahead - pods[: ahead.size]


@dataclass(frozen=True)
class Tail:
    """The growth's distribution: its positive body up to `threshold` as observed, and over it a
    generalized Pareto of `shape` and `scale` for the `exceedance_share` of minutes past it;
    `mean_positive` is E[G+] over all `minutes`."""

    threshold: float
    shape: float
    scale: float
    body: np.ndarray
    exceedance_share: float
    minutes: int
    mean_positive: float

    def excess(self, reserve: float) -> float:
        """E[(G - reserve)+]: the growth a reserve leaves unabsorbed, per minute."""
        below = float(np.clip(self.body - reserve, 0.0, None).sum()) / self.minutes
        x = reserve - self.threshold
        xi, sigma = self.shape, self.scale
        if x <= 0:
            over = -x + sigma / (1.0 - xi)
        elif abs(xi) < 1e-9:
            over = sigma * math.exp(-x / sigma)
        else:
            base = 1.0 + xi * x / sigma
            over = 0.0 if base <= 0 else (sigma + xi * x) / (1.0 - xi) * base ** (-1.0 / xi)
        return below + self.exceedance_share * over

    def unabsorbed(self, reserve: float) -> float:
        """The expected share of the growth a reserve leaves unabsorbed (0 when nothing grows)."""
        return 0.0 if self.mean_positive <= 0 else self.excess(reserve) / self.mean_positive


def fit_tail(g: np.ndarray) -> Tail | None:
    """The tail model of the growths `g` (None: too few positive growths over the threshold)."""
    positive = g[g > 0]
    if positive.size < MIN_EXCEEDANCES:
        return None
    u = float(np.quantile(positive, THRESHOLD_QUANTILE))
    over = positive[positive > u] - u
    if over.size < MIN_EXCEEDANCES:
        return None
    with warnings.catch_warnings():  # the optimiser's warnings on flat likelihoods
        warnings.simplefilter("ignore")
        shape, _, scale = genpareto.fit(over, floc=0.0)
    if not (math.isfinite(shape) and math.isfinite(scale)) or scale <= 0:
        return None
    return Tail(
        threshold=u,
        shape=min(float(shape), MAX_SHAPE),
        scale=float(scale),
        body=positive[positive <= u],
        exceedance_share=over.size / g.size,
        minutes=int(g.size),
        mean_positive=float(positive.sum()) / g.size,
    )


def tail_reserve(tail: Tail, target: float, largest: int) -> int:
    """The smallest reserve N in 0..`largest` whose expected unabsorbed share is at most
    1 - `target` (`largest` when none is)."""
    lo, hi = 0, max(0, largest)
    while lo < hi:  # the unabsorbed share falls as the reserve grows
        mid = (lo + hi) // 2
        if tail.unabsorbed(mid) <= 1.0 - target + 1e-12:
            hi = mid
        else:
            lo = mid + 1
    return lo


def tail_reserve_at(
    pods: np.ndarray, at: int, known_lag: int, lead_minutes: int, target: float
) -> int | None:
    """The tail reserve held from minute `at`: fitted on the `TAIL_DAYS` days of `pods` known
    then (minutes before `at - known_lag`), at most their peak; None when there is too little
    to fit."""
    return tail_reserves_at(pods, at, known_lag, lead_minutes, (target,))[0]


def tail_reserves_at(
    pods: np.ndarray, at: int, known_lag: int, lead_minutes: int, targets: Sequence[float]
) -> list[int | None]:
    """`tail_reserve_at` for each of `targets`, from one fit (the fit does not depend on the
    target): the same values, one optimisation instead of one per target."""
    seen = max(0, at - known_lag)
    known = pods[max(0, seen - TAIL_DAYS * 1440) : seen]
    tail = fit_tail(growth(known, lead_minutes))
    if tail is None:
        return [None for _ in targets]
    largest = int(known.max())
    return [tail_reserve(tail, target, largest) for target in targets]


def tail_reserve_of(
    history: History, seen: float, demand_per_replica: float, cluster: ClusterSpec, target: float
) -> int | None:
    """The tail reserve from a demand `history`: its app pods (at `demand_per_replica`, held as
    the simulated HPA holds them) over the `TAIL_DAYS` days up to `seen` (the instant minus the
    observation delay), their growth over the cluster's node lag; None with too little to fit."""
    window = history.until(seen).since(seen - TAIL_DAYS * DAY_SECONDS)
    if len(window) < 2:
        return None
    _, demand = minute_grid(window)
    pods = app_pods(demand, demand_per_replica, cluster.hpa_hold_minutes)
    return tail_reserve_at(pods, pods.size, 0, cluster.lag_minutes, target)
