"""The forecast-to-replicas arithmetic, written once: the ramp, the forward maximum and the burst
decision. Pure numpy; every function takes arrays of instants, so the daemon (one instant), the
`plan` and `report` horizons and the backtest (every minute of a refit) run the same code.

See `docs/design.md`, "Forecast to replicas":

    ramp(t)  = max(curve read every minute over [t, t + lead]) - curve(t)
    burst(t) = the burst model's quantile of growth beyond the ramp, from what was observed at
               t - delay; or the refit-time table's largest bin over [t, t + lead]
    forecast replicas(t) = ceil(max(0, ramp(t) + burst(t)) / demandPerReplica)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from predictive_headroom.core.series import Forecast, History, Unobserved
from predictive_headroom.core.vocabulary import BurstFallback, BurstSource

PEAK_RADIUS_SECONDS = 6 * 3600
"""A peak of demand is the highest forecast within 6 h either side (so at most two a day)."""
RAMP_STEP = 60.0
"""The curve is read at this spacing over the lead time (the burst model is trained on the same)."""


def forward_max(
    values: np.ndarray, window: int, *, include_current: bool = True, past_end: float | None = None
) -> np.ndarray:
    """out[i] = max(values[i : i + window + 1]), or max(values[i + 1 : i + window + 1]) without
    the current step. Past the end the series is held at its last value (`past_end` None), or
    taken as `past_end` (NaN marks windows that run past the end as unknown)."""
    values = np.asarray(values)
    if values.size == 0 or (window <= 0 and include_current):
        return values.copy()
    if window <= 0:
        raise ValueError("a window without the current step needs at least one step")
    fill = values[-1] if past_end is None else past_end
    padded = np.concatenate([values, np.full(window, fill)])
    first = 0 if include_current else 1
    size = window + 1 if include_current else window
    return sliding_window_view(padded, size)[first : first + values.size].max(axis=1)


def rolling_max(values: np.ndarray, window: int) -> np.ndarray:
    """out[i] = max(values[max(0, i - window + 1) : i + 1]) (trailing window of `window` steps).

    By doubling: after each pass out[i] is the largest of the last `span` values up to i, and
    a pass of `step` <= `span` extends that to `span + step` (about log2(window) passes)."""
    out = np.array(values, copy=True)
    span = 1
    while span < window and out.size:
        step = min(span, window - span)
        nxt = out.copy()
        np.maximum(out[step:], out[:-step], out=nxt[step:])
        out, span = nxt, span + step
    return out


def minute_reads(
    times: np.ndarray, curve: np.ndarray, at: np.ndarray, lead: float, first: float = 0.0
) -> np.ndarray:
    """The curve (linear between its points, held beyond its ends) read at `t + first`, then every
    `RAMP_STEP` up to `t + lead` (the last read exactly at `t + lead`), for each `t` of `at`:
    shape (len(at), reads)."""
    offsets = np.arange(first, lead + RAMP_STEP / 2, RAMP_STEP)
    if offsets.size == 0 or offsets[-1] < lead:
        offsets = np.append(offsets, lead)
    return np.interp(np.asarray(at, dtype=float)[:, None] + offsets[None, :], times, curve)


def ramp_at(times: np.ndarray, curve: np.ndarray, at: np.ndarray, lead: float) -> np.ndarray:
    """The predictable rise at each `t` of `at`: max(curve read every minute over [t, t + lead])
    - curve(t), never negative. The one ramp: the planner adds it and the burst model is trained
    on growth beyond it."""
    reads = minute_reads(times, curve, at, lead)
    return reads.max(axis=1) - reads[:, 0]


def table_allowance(forecast: Forecast, at: np.ndarray, lead: float) -> np.ndarray:
    """The refit-time table's allowance at each `t` of `at`: the largest bin the lead window
    [t, t + lead] touches (placeholders asked for now cover bursts starting anywhere in it)."""
    at = np.asarray(at, dtype=float)
    table = forecast.burst
    if table is None:
        return np.zeros(at.size)
    offsets = np.append(np.arange(0.0, lead, table.bin_seconds), lead)
    return np.asarray(table.at(at[:, None] + offsets[None, :]), dtype=float).max(axis=1)


@dataclass(frozen=True)
class BurstAllowance:
    """The burst allowance at one instant (demand units), where it came from, and why the model was
    not used (`""` when it was, or when the forecast has no model). A model's value may be
    negative: less growth than the ramp is expected; the forecast component clips the sum at 0."""

    value: float
    source: BurstSource
    why: str = ""

    @property
    def fell_back(self) -> bool:
        """True when the forecast had a burst model but the table answered instead."""
        return bool(self.why)


@dataclass(frozen=True)
class BurstAllowances:
    """`burst_allowances` over many instants: values, whether the model answered, and why not."""

    values: np.ndarray
    from_model: np.ndarray
    why: np.ndarray
    """Per instant: a `BurstFallback` text (possibly with a detail after a colon), or ""."""

    def __len__(self) -> int:
        return int(self.values.size)

    def __getitem__(self, i: int) -> BurstAllowance:
        source = BurstSource.MODEL if self.from_model[i] else BurstSource.PROFILE
        return BurstAllowance(float(self.values[i]), source, str(self.why[i]))


def burst_allowances(
    forecast: Forecast,
    at: np.ndarray,
    lead: float,
    observed: History | Unobserved | None,
) -> BurstAllowances:
    """The burst decision at each `t` of `at`: the forecast's burst model on the samples of
    `observed` at or before `t - delay` when the newest of them is at most `max_age` old, else the
    refit-time table with the reason (`BurstFallback`). Without a model: the table, no reason.

    `observed` may be a short read of the latest samples (the daemon) or a whole series (the
    backtest, the report): the model's features never read past `t - delay`, so both give the same
    value at the same instant."""
    at = np.asarray(at, dtype=float)
    values = table_allowance(forecast, at, lead)
    from_model = np.zeros(at.size, dtype=bool)
    why = np.full(at.size, "", dtype=object)
    model = forecast.burst_model
    if model is None or at.size == 0:
        return BurstAllowances(values, from_model, why)
    if observed is None:
        why[:] = BurstFallback.NOT_OBSERVED.value
        return BurstAllowances(values, from_model, why)
    if isinstance(observed, Unobserved):
        why[:] = f"{observed.why}: {observed.detail}" if observed.detail else observed.why
        return BurstAllowances(values, from_model, why)
    finite = np.isfinite(observed.values)
    times = observed.times[finite]
    cutoff = at - model.delay_seconds
    newest = np.searchsorted(times, cutoff, side="right") - 1
    age = cutoff - times[np.maximum(newest, 0)] if times.size else np.full(at.size, math.inf)
    why[:] = ""
    why[newest < 0] = BurstFallback.NO_RECENT_SAMPLES.value
    why[(newest >= 0) & (age > model.max_age_seconds)] = BurstFallback.STALE_OBSERVATIONS.value
    fresh = np.flatnonzero(why == "")
    if fresh.size:
        asked = at[fresh]
        # Only what the features of these instants can read (twice the lookback, for margin).
        seen = observed.until(float(asked.max())).since(
            float(asked.min()) - 2 * (model.lookback_seconds + model.delay_seconds)
        )
        answer = np.asarray(model.allowance(seen, asked, forecast), dtype=float)
        ok = np.isfinite(answer)
        values[fresh[ok]] = answer[ok]
        from_model[fresh[ok]] = True
        why[fresh[~ok]] = BurstFallback.STALE_OBSERVATIONS.value
    return BurstAllowances(values, from_model, why)


def local_peaks(
    values: np.ndarray, radius: int, min_rise_share: float = 0.05, most: int | None = None
) -> np.ndarray:
    """Indices of the true local maxima of `values`, ascending: a point higher than everything
    within `radius` points before it and at least as high as everything within `radius` after,
    rising by `min_rise_share` of the series' range above the lowest point within `radius`. The
    first and last points are never peaks (the curve may go on rising past them). With `most`, the
    highest `most` of them."""
    v = np.asarray(values, dtype=float)
    if v.size < 3:
        return np.zeros(0, dtype=int)
    radius = max(1, int(radius))
    hi = sliding_window_view(np.pad(v, radius, constant_values=-np.inf), 2 * radius + 1)
    lo = sliding_window_view(np.pad(v, radius, constant_values=np.inf), 2 * radius + 1)
    is_peak = (v >= hi.max(axis=1)) & (v > hi[:, :radius].max(axis=1))
    is_peak &= v - lo.min(axis=1) >= min_rise_share * (v.max() - v.min())
    is_peak[[0, -1]] = False
    index = np.flatnonzero(is_peak)
    if most is not None:
        index = np.sort(index[np.argsort(-v[index], kind="stable")][:most])
    return index
