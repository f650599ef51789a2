"""Pure helpers for Prometheus range queries: the query window on the step grid, chunking below
the per-request point limit, reading the JSON matrix, and the messages about several series or
holes in the data.

No I/O here; `predictive_headroom.sources.prometheus.PrometheusSource` does the HTTP calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np

from predictive_headroom.core.series import from_epoch
from predictive_headroom.policy.durations import format_duration
from predictive_headroom.policy.echo import cut

MAX_POINTS_PER_REQUEST = 10_000
"""Points per series per request; Prometheus refuses range queries of more than 11,000."""
GAP_STEPS = 3
"""Holes longer than this many steps are reported as gaps."""

LabelSet = tuple[tuple[str, str], ...]


def query_window(end: float, history_seconds: float, step: float) -> tuple[float, float]:
    """Return (start, end) of a range query on the step grid: the last grid point at or before `end`
    and the grid point `history_seconds` before it (whole steps)."""
    stop = math.floor(end / step) * step
    return stop - math.floor(history_seconds / step) * step, stop


def chunk_ranges(
    start: float, end: float, step: float, max_points: int = MAX_POINTS_PER_REQUEST
) -> list[tuple[float, float]]:
    """Split the grid `start, start+step, ... <= end` into inclusive (first, last) pieces of at most
    `max_points` points each; consecutive pieces share no point."""
    total = math.floor((end - start) / step) + 1 if end >= start else 0
    return [
        (start + i * step, start + (min(i + max_points, total) - 1) * step)
        for i in range(0, total, max_points)
    ]


class BadAnswer(ValueError):
    """An answer that is not a range query's matrix; the message says exactly what came back."""


def parse_matrix(result: Any) -> dict[LabelSet, tuple[np.ndarray, np.ndarray]]:
    """Turn a range query's `data.result` into float arrays keyed by each series' sorted labels.

    Every other shape is a `BadAnswer` saying what came back and where: a scalar or string
    (`[t, "v"]`), a vector (`value` instead of `values`), an item that is not a series object,
    labels that are not an object of strings, a point that is not `[time, "value"]`, a time that
    is not a number or a value that is not a number's text ("NaN" and "+Inf" are numbers)."""
    if not isinstance(result, list):
        raise BadAnswer(f"data.result of type {_kind(result)}, not a list of series")
    if len(result) == 2 and not isinstance(result[0], dict) and not isinstance(result[1], dict):
        raise BadAnswer(
            f"data.result {_show(result)}: a scalar or string answer, not a range of a series"
        )
    out: dict[LabelSet, tuple[np.ndarray, np.ndarray]] = {}
    for i, series in enumerate(result):
        where = f"data.result[{i}]"
        if not isinstance(series, dict):
            raise BadAnswer(f"{where} is {_show(series)}, not a series object")
        if "values" not in series and "value" in series:
            raise BadAnswer(
                f"{where} has a single `value`: an instant (vector) answer, not a range (matrix)"
            )
        labels = series.get("metric", {})
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise BadAnswer(f"{where}.metric is {_show(labels)}, not an object of label strings")
        pairs = series.get("values")
        if not isinstance(pairs, list):
            raise BadAnswer(f"{where}.values is {_show(pairs)}, not a list of [time, value]")
        times, values = np.empty(len(pairs)), np.empty(len(pairs))
        for k, pair in enumerate(pairs):
            times[k], values[k] = _point(pair, f"{where}.values[{k}]")
        out[tuple(sorted(labels.items()))] = (times, values)
    return out


def _point(pair: Any, where: str) -> tuple[float, float]:
    """(time, value) of one `[time, "value"]` pair of a matrix answer, or `BadAnswer`."""
    if not isinstance(pair, list) or len(pair) != 2:
        raise BadAnswer(f"{where} is {_show(pair)}, not a [time, value] pair")
    t, v = pair
    if isinstance(t, bool) or not isinstance(t, (int, float, str)):
        raise BadAnswer(f"{where} has the time {_show(t)}, not a number")
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise BadAnswer(f"{where} has the value {_show(v)}, not a number")
    try:
        time = float(t)
    except ValueError:
        raise BadAnswer(f"{where} has the time {_show(t)}, not a number") from None
    if not math.isfinite(time):
        raise BadAnswer(f"{where} has the time {_show(t)}, not a finite number")
    try:
        return time, float(v)
    except ValueError:
        raise BadAnswer(f"{where} has the value {_show(v)}, not a number") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _show(value: Any) -> str:
    """A short JSON-like rendering of `value` for a message (its first 80 characters and its
    length when longer, `policy.echo.cut`)."""
    return cut("null" if value is None else repr(value), 80)


def differing_labels(label_sets: Sequence[LabelSet]) -> dict[str, list[str]]:
    """Return the labels whose values differ between series, with the values seen ('' = absent)."""
    dicts = [dict(labels) for labels in label_sets]
    names = sorted({name for d in dicts for name in d})
    return {
        name: sorted({d.get(name, "") for d in dicts})
        for name in names
        if len({d.get(name, "") for d in dicts}) > 1
    }


def find_gaps(
    times: np.ndarray, step: float, min_steps: int = GAP_STEPS
) -> list[tuple[float, float]]:
    """Return (last point before, first point after) for every hole longer than `min_steps` steps."""
    if times.size < 2:
        return []
    holes = np.flatnonzero(np.diff(times) > min_steps * step)
    return [(float(times[i]), float(times[i + 1])) for i in holes]


def _utc(seconds: float) -> str:
    return from_epoch(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    return format_duration(timedelta(seconds=round(seconds)))


def many_series_message(query: str, label_sets: Sequence[LabelSet]) -> str:
    """The error for a query that returns several series: which labels differ and how to fix it."""
    diff = differing_labels(label_sets)
    shown = "; ".join(
        f"{name}: {', '.join(repr(v) for v in values[:4])}{', ...' if len(values) > 4 else ''}"
        for name, values in diff.items()
    )
    return (
        f"query {query!r} returned {len(label_sets)} series, which differ in label(s) {shown}; "
        f"the demand query must return exactly one series: wrap it in an aggregation such as "
        f"sum({query}), or select one series with a label matcher"
    )


def quality_warnings(
    times: np.ndarray, start: float, end: float, step: float, query: str
) -> list[str]:
    """Describe holes in a fetched series: inside it, before its first point and after its last."""
    warnings = []
    limit = GAP_STEPS * step
    gaps = find_gaps(times, step)
    if gaps:
        listed = ", ".join(f"{_utc(a)} to {_utc(b)} ({_span(b - a)})" for a, b in gaps[:3])
        more = f" and {len(gaps) - 3} more" if len(gaps) > 3 else ""
        warnings.append(
            f"query {query!r}: {len(gaps)} gap(s) longer than {_span(limit)} with no samples: {listed}{more}"
        )
    if times[0] - start > limit:
        warnings.append(
            f"query {query!r}: data starts at {_utc(times[0])}, {_span(times[0] - start)} after the "
            f"requested start {_utc(start)}; the history is shorter than asked"
        )
    if end - times[-1] > limit:
        warnings.append(
            f"query {query!r}: the last sample is at {_utc(times[-1])}, {_span(end - times[-1])} before "
            f"{_utc(end)}; is the metric still being collected?"
        )
    return warnings


POINTS_SLACK = 2
"""Points a series may have beyond the grid's count (an edge sample) before the answer is refused."""


def check_points(
    series: Mapping[LabelSet, tuple[np.ndarray, np.ndarray]],
    query: str,
    start: float,
    end: float,
    step: float,
) -> None:
    """Raise ValueError naming the counts when a series has more points than the grid can hold.

    A range query answers at most one point per step per series, so `range ÷ step + 1`; far more
    means the server (or something in front of it) is not answering this query.
    """
    expected = math.floor((end - start) / step) + 1 if end >= start else 0
    for times, _ in series.values():
        got = times.size
        if got > expected + POINTS_SLACK:
            raise PointsError(
                f"query {query!r}: the answer has {got:,} points for a series, but "
                f"{_utc(start)} to {_utc(end)} at step {step:g}s holds {expected:,}; refused"
            )


class PointsError(ValueError):
    """An answer with more points than its range and step allow."""
