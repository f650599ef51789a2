"""The forecast report's facts: what a reviewer needs to trust (or question) the planned headroom.

`build_report` is pure (no clock, no I/O): per pool it plans the placeholder pod count at every step
of the forecast horizon with the real planner (carrying recent plans for scale-down
stabilisation, like the daemon), finds the next peaks, prices the headroom, compares past
forecasts with what happened and collects the warnings a reviewer must see. `report_to_json`
turns it into the machine-readable `report.json`; `write_report` keeps the daemon's last N.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from predictive_headroom.config import Policy, Pool
from predictive_headroom.planner import Plan, PlanRecord, plan_pool, plan_to_dict
from predictive_headroom.protocols import ClusterState
from predictive_headroom.schedules import open_intervals
from predictive_headroom.series import DAY_SECONDS, Forecast, History, NoForecast, from_epoch

logger = logging.getLogger(__name__)

SCHEMA = "predictive-headroom/report/v1"
RECENT_SECONDS = 7 * DAY_SECONDS
"""How much history the demand plot shows before now."""
PREFERRED_HISTORY_SECONDS = 14 * DAY_SECONDS
"""Less history than this is flagged: the weekly pattern is learned from one week or less."""
DEFAULT_HORIZON_SECONDS = 2 * DAY_SECONDS
PEAK_RADIUS_SECONDS = 6 * 3600
"""A peak is the highest forecast within 6 h either side (so at most two a day)."""
MAX_PEAKS = 3
MAX_PAST = 5
LOW_COVERAGE_MARGIN = 0.1


@dataclass(frozen=True)
class Notice:
    """A warning a reviewer must see: `code` is stable for machines, `message` is for people."""

    code: str
    message: str


@dataclass(frozen=True)
class Peak:
    """An expected peak of demand and the placeholder pods that will be warm for it."""

    at: float
    demand: float
    upper: float
    warm_replicas: int
    warm_from: float

    @property
    def lead_seconds(self) -> float:
        return self.at - self.warm_from


@dataclass(frozen=True)
class HeadroomCost:
    """What the planned headroom reserves over the horizon; `money` is None without prices."""

    hours: float
    replica_hours: float
    cpu_hours: float
    gib_hours: float
    money: float | None
    currency: str | None
    peak_replicas: int
    static_replica_hours: float
    """What keeping the peak count all the time would reserve, for comparison."""


@dataclass(frozen=True)
class PastForecast:
    """A forecast made earlier, read at the actual samples that have arrived since."""

    made_at: float
    times: np.ndarray
    actual: np.ndarray
    yhat: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    mape: float | None
    coverage: float


@dataclass(frozen=True)
class PoolReport:
    """Everything the report shows for one pool."""

    pool: Pool
    recent: History | None
    history_points: int
    history_seconds: float
    forecast: Forecast | None
    forecast_status: str
    forecast_detail: str
    now: Plan
    plan_times: np.ndarray
    plan_desired: np.ndarray
    plan_reasons: tuple[str, ...]
    windows: tuple[tuple[str, float, float], ...]
    peaks: tuple[Peak, ...]
    accuracy: dict[str, Any] | None
    past: tuple[PastForecast, ...]
    cost: HeadroomCost
    notices: tuple[Notice, ...]

    @property
    def step_seconds(self) -> float:
        return float(self.plan_times[1] - self.plan_times[0]) if self.plan_times.size > 1 else 0.0


@dataclass(frozen=True)
class Report:
    """The whole report: one PoolReport per pool, made at `at` (POSIX seconds)."""

    at: float
    pools: tuple[PoolReport, ...]
    source: str = ""


def iso(seconds: float) -> str:
    """ISO-8601 UTC text, e.g. 2014-07-15T18:00:00Z."""
    return from_epoch(seconds).isoformat().replace("+00:00", "Z")


def build_report(
    policy: Policy,
    histories: Mapping[str, History],
    forecasts: Mapping[str, Forecast | NoForecast],
    accuracies: Mapping[str, Any],
    at: float,
    cluster: ClusterState | None = None,
    past: Sequence[Mapping[str, Any]] | None = None,
    source: str = "",
) -> Report:
    """The report for every pool of `policy` at `at`; maps are keyed by pool name (missing = none).

    `accuracies` values are `accuracy.Accuracy` objects (or their `to_dict()`), or None;
    `past` holds earlier `report_to_json` outputs, whose forecasts are judged against `histories`.
    """
    pools = tuple(
        _pool_report(
            pool, histories.get(pool.name), forecasts.get(pool.name), accuracies.get(pool.name), at, cluster, past or (), policy
        )
        for pool in policy.pools
    )
    return Report(at, pools, source)


def _pool_report(
    pool: Pool,
    history: History | None,
    forecast: Forecast | NoForecast | None,
    accuracy: Any,
    at: float,
    cluster: ClusterState | None,
    past: Sequence[Mapping[str, Any]],
    policy: Policy,
) -> PoolReport:
    spec = pool.forecast
    usable = forecast if isinstance(forecast, Forecast) and forecast.expires_at > at else None
    if usable is not None:
        status, detail = "ok", ""
    elif isinstance(forecast, NoForecast):
        status, detail = forecast.why, forecast.detail
    elif isinstance(forecast, Forecast):
        status, detail = "forecast-expired", f"the forecast ended at {iso(forecast.expires_at)}, before {iso(at)}"
    elif spec is None:
        status, detail = "not-configured", ""
    else:
        status, detail = ("disabled", "") if not spec.enabled else ("not-fitted", "no forecast was fitted for this pool")
    horizon_end = usable.expires_at if usable else at + (spec.horizon.total_seconds() if spec else DEFAULT_HORIZON_SECONDS)
    step = usable.step_seconds if usable else (spec.step.total_seconds() if spec else 300.0)
    times, plans = plan_horizon(pool, at, horizon_end, min(max(step, 60.0), 900.0), cluster, forecast)
    desired = np.array([p.desired for p in plans], dtype=float)
    windows = tuple(
        (w.name, max(a, at), min(b, horizon_end))
        for w in pool.schedules
        for a, b in open_intervals(w, at, horizon_end, pool.lead_time.total_seconds())
    )
    acc = accuracy.to_dict() if hasattr(accuracy, "to_dict") else (dict(accuracy) if accuracy else None)
    peaks = find_peaks(usable, at, times, desired, pool.lead_time.total_seconds()) if usable else ()
    known = history.until(at) if history is not None else None
    recent = known.since(at - RECENT_SECONDS) if known is not None else None
    report = PoolReport(
        pool=pool,
        recent=recent,
        history_points=len(known) if known is not None else 0,
        history_seconds=known.span_seconds + known.step_seconds if known is not None and len(known) > 1 else 0.0,
        forecast=usable,
        forecast_status=status,
        forecast_detail=detail,
        now=plans[0],
        plan_times=times,
        plan_desired=desired,
        plan_reasons=tuple(p.reason for p in plans),
        windows=windows,
        peaks=peaks,
        accuracy=acc,
        past=judge_past(pool.name, past, known, at) if known is not None else (),
        cost=headroom_cost(pool, times, desired, policy),
        notices=(),
    )
    return _with_notices(report, plans)


def plan_horizon(
    pool: Pool,
    start: float,
    end: float,
    step: float,
    cluster: ClusterState | None,
    forecast: Forecast | NoForecast | None,
) -> tuple[np.ndarray, list[Plan]]:
    """The plan at every `step` from `start` to `end`, stabilised with recent plans as the daemon does."""
    times = start + step * np.arange(int(math.floor((end - start) / step + 1e-9)) + 1, dtype=float)
    window = pool.scale_down_stabilization.total_seconds()
    recent: list[PlanRecord] = []
    plans = []
    for t in times:
        plan = plan_pool(pool, float(t), cluster, forecast, recent)
        plans.append(plan)
        recent = [r for r in recent if r.at > t - window] + [plan.record()]
    return times, plans


def find_peaks(
    forecast: Forecast, at: float, plan_times: np.ndarray, desired: np.ndarray, lead: float
) -> tuple[Peak, ...]:
    """The next (up to three) highest forecast peaks after `at`, each with the replicas warm for it.

    A peak is a point higher than everything within 6 h before it and at least as high as
    everything within 6 h after, standing out by 5% of the forecast's range. The warm count is
    the most placeholder pods planned during the lead time before the peak, and `warm_from`
    when that count was first reached without a drop in between.
    """
    mask = forecast.times > at
    t, v = forecast.times[mask], forecast.yhat[mask]
    if v.size < 3:
        return ()
    radius = max(1, int(round(PEAK_RADIUS_SECONDS / forecast.step_seconds)))
    hi = np.lib.stride_tricks.sliding_window_view(np.pad(v, radius, constant_values=-np.inf), 2 * radius + 1)
    lo = np.lib.stride_tricks.sliding_window_view(np.pad(v, radius, constant_values=np.inf), 2 * radius + 1)
    is_peak = (v >= hi.max(axis=1)) & (v > hi[:, :radius].max(axis=1))
    is_peak &= v - lo.min(axis=1) >= 0.05 * (v.max() - v.min())
    is_peak[[0, -1]] = False
    index = list(np.flatnonzero(is_peak))
    if not index and 0 < int(np.argmax(v)) < v.size - 1:
        index = [int(np.argmax(v))]
    chosen = sorted(sorted(index, key=lambda i: -v[i])[:MAX_PEAKS])
    peaks = []
    for i in chosen:
        upper = float(forecast.upper[mask][i])
        warm, since = _warm_for(float(t[i]), plan_times, desired, lead)
        peaks.append(Peak(float(t[i]), float(v[i]), upper, warm, since))
    return tuple(peaks)


def _warm_for(peak: float, times: np.ndarray, desired: np.ndarray, lead: float) -> tuple[int, float]:
    step = float(times[1] - times[0]) if times.size > 1 else 0.0
    last = max(0, int(np.searchsorted(times, peak + 1e-6)) - 1)
    first = min(last, int(np.searchsorted(times, peak - lead - step / 2)))
    warm = int(desired[first : last + 1].max())
    k = first + int(np.flatnonzero(desired[first : last + 1] == warm)[0])
    while k > 0 and desired[k - 1] >= warm:
        k -= 1
    return warm, float(times[k])


def headroom_cost(pool: Pool, times: np.ndarray, desired: np.ndarray, policy: Policy) -> HeadroomCost:
    """Replica-, CPU- and GiB-hours the plan reserves (each step held until the next), and money."""
    dt = np.diff(times)
    replica_hours = float(np.sum(desired[:-1] * dt) / 3600)
    hours = float((times[-1] - times[0]) / 3600) if times.size > 1 else 0.0
    cpu_hours = replica_hours * pool.placeholder.cpu_cores
    gib_hours = replica_hours * pool.placeholder.memory_gib
    money, currency = None, None
    if policy.cost is not None:
        money = cpu_hours * policy.cost.cost_per_cpu_hour + gib_hours * policy.cost.cost_per_gib_hour
        currency = policy.cost.currency
    peak = int(desired.max()) if desired.size else 0
    return HeadroomCost(hours, replica_hours, cpu_hours, gib_hours, money, currency, peak, peak * hours)


def judge_past(name: str, past: Sequence[Mapping[str, Any]], known: History, at: float) -> tuple[PastForecast, ...]:
    """Earlier forecasts of pool `name` (from saved report.json data) against the actuals since."""
    judged = []
    for data in past:
        made = float(data.get("at", math.inf))
        pool = next((p for p in data.get("pools", []) if p.get("name") == name), None)
        series = ((pool or {}).get("forecast") or {}).get("series")
        if not series or not made < at:
            continue
        ft = np.asarray(series["times"], dtype=float)
        actual = known.since(made + 1e-6).until(min(at, float(ft[-1])))
        if len(actual) < 3:
            continue
        read = {k: np.interp(actual.times, ft, np.asarray(series[k], dtype=float)) for k in ("yhat", "lower", "upper")}
        nonzero = actual.values != 0
        err = np.abs(actual.values - read["yhat"])[nonzero] / np.abs(actual.values[nonzero])
        mape = float(100 * err.mean()) if nonzero.any() else None
        inside = (actual.values >= read["lower"]) & (actual.values <= read["upper"])
        judged.append(PastForecast(made, actual.times, actual.values, read["yhat"], read["lower"], read["upper"], mape, float(inside.mean())))
    judged.sort(key=lambda p: p.made_at)
    return tuple(judged[-MAX_PAST:])


def _hours(seconds: float) -> str:
    return f"{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:.1f} h"


def _with_notices(r: PoolReport, plans: list[Plan]) -> PoolReport:
    """Attach the warnings a reviewer must see."""
    pool, spec, found = r.pool, r.pool.forecast, []
    if spec is not None and spec.enabled and r.forecast_status != "source-error":
        needed = spec.min_history.total_seconds()
        if r.history_seconds < needed:
            found.append(Notice("too-little-history", f"only {_hours(r.history_seconds)} of history; the forecast needs {_hours(needed)} (minHistory) to fit Prophet"))
        elif r.history_seconds < PREFERRED_HISTORY_SECONDS:
            found.append(Notice("short-history", f"only {_hours(r.history_seconds)} of history; 14 days or more let the model learn the weekly pattern"))
    if r.forecast_status == "disabled":
        found.append(Notice("forecast-disabled", "the forecast is disabled (forecast.enabled: false); only schedules, the proportional rule and minReplicas size this pool"))
    elif r.forecast_status not in ("ok", "not-configured"):
        found.append(Notice("forecast-unavailable", f"no forecast ({r.forecast_status}){': ' + r.forecast_detail if r.forecast_detail else ''}; the pool falls back to its floors"))
    if r.forecast is not None:
        found.extend(Notice("forecast-note", w) for w in r.forecast.warnings)
    if r.accuracy and r.accuracy.get("coverage") is not None and spec is not None:
        coverage, width = float(r.accuracy["coverage"]), spec.interval_width
        if coverage < width - LOW_COVERAGE_MARGIN:
            found.append(Notice("low-coverage", f"only {coverage:.0%} of recent actuals fell inside the {width:.0%} forecast band; the band is too narrow to trust"))
    at_max = (r.plan_desired >= pool.max_replicas) & (pool.max_replicas > 0) | np.array([p.reason == "max" for p in plans])
    if at_max.any():
        asked = max(max((v for k, v in p.components.items() if k != "max" and v is not None), default=0) for p in plans)
        first = float(r.plan_times[np.flatnonzero(at_max)[0]])
        found.append(Notice("max-replicas", f"the plan reaches maxReplicas {pool.max_replicas} for {_hours(at_max.sum() * r.step_seconds)} of the horizon, first at {iso(first)}; up to {asked} were asked for"))
    if r.now.details.get("proportional_status") == "no-cluster-state":
        found.append(Notice("no-cluster-state", "the proportional rule was left out: no cluster state was given (the daemon reads it from the nodes)"))
    return PoolReport(**{**r.__dict__, "notices": tuple(found)})


# ---------------------------------------------------------------------------------------------
# JSON and files.


def _num(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def report_to_json(report: Report) -> dict[str, Any]:
    """The report's facts as JSON-ready data (the shape of report.json)."""
    return {"schema": SCHEMA, "at": report.at, "generated_at": iso(report.at), "source": report.source, "pools": [_pool_json(p) for p in report.pools]}


def _pool_json(r: PoolReport) -> dict[str, Any]:
    pool, f, c = r.pool, r.forecast, r.cost
    forecast: dict[str, Any] = {"status": r.forecast_status, "detail": r.forecast_detail}
    if f is not None:
        forecast.update(
            model=f.model,
            fit_seconds=round(f.fit_seconds, 3),
            history_end=iso(f.history_end),
            expires_at=iso(f.expires_at),
            interval_width=pool.forecast.interval_width if pool.forecast else None,
            series={"times": f.times.tolist(), **{k: [_num(x) for x in getattr(f, k)] for k in ("yhat", "lower", "upper")}},
        )
    changes = [
        {"at": iso(t), "desired_replicas": int(d), "reason": why}
        for k, (t, d, why) in enumerate(zip(r.plan_times, r.plan_desired, r.plan_reasons))
        if k == 0 or (d, why) != (r.plan_desired[k - 1], r.plan_reasons[k - 1])
    ]
    return {
        "name": pool.name,
        "target": {"kind": pool.target.kind, "namespace": pool.target.namespace, "name": pool.target.name},
        "min_replicas": pool.min_replicas,
        "max_replicas": pool.max_replicas,
        "lead_time_seconds": pool.lead_time.total_seconds(),
        "history": {"points": r.history_points, "days": round(r.history_seconds / DAY_SECONDS, 2)},
        "forecast": forecast,
        "plan": {"now": plan_to_dict(r.now), "step_seconds": r.step_seconds, "changes": changes},
        "schedule_windows": [{"name": n, "from": iso(a), "to": iso(b)} for n, a, b in r.windows],
        "peaks": [
            {"at": iso(p.at), "demand": p.demand, "upper": p.upper, "warm_replicas": p.warm_replicas,
             "warm_from": iso(p.warm_from), "lead_seconds": p.lead_seconds}
            for p in r.peaks
        ],
        "accuracy": r.accuracy,
        "past_forecasts": [
            {"made_at": iso(p.made_at), "points": int(p.times.size), "mape": p.mape, "coverage": p.coverage}
            for p in r.past
        ],
        "cost": {
            "hours": c.hours, "replica_hours": c.replica_hours, "cpu_hours": c.cpu_hours, "gib_hours": c.gib_hours,
            "money": c.money, "currency": c.currency, "peak_replicas": c.peak_replicas, "static_replica_hours": c.static_replica_hours,
        },
        "warnings": [{"code": n.code, "message": n.message} for n in r.notices],
    }


def write_report_files(directory: Path, report: Report) -> None:
    """Write index.html and report.json into the existing `directory`."""
    from predictive_headroom.report_html import render_html

    (directory / "report.json").write_text(json.dumps(report_to_json(report), indent=1), encoding="utf-8")
    (directory / "index.html").write_text(render_html(report), encoding="utf-8")


_REPORT_DIR = re.compile(r"^\d{8}T\d{6}Z(-\d+)?$")
LATEST = "latest"


def write_report(out_root: Path, report: Report, keep: int) -> Path:
    """Write the report into a new timestamped directory under `out_root`, point `latest` at it
    and delete all but the newest `keep` report directories; returns the new directory.

    The directory appears complete or not at all (written aside, then renamed into place).
    """
    out_root.mkdir(parents=True, exist_ok=True)
    stem = from_epoch(report.at).strftime("%Y%m%dT%H%M%SZ")
    final, n = out_root / stem, 0
    while final.exists():
        n += 1
        final = out_root / f"{stem}-{n}"
    work = Path(tempfile.mkdtemp(prefix=".writing-", dir=out_root))
    try:
        write_report_files(work, report)
        work.chmod(0o755)
        work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    link = out_root / f".{LATEST}-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(final.name)
    os.replace(link, out_root / LATEST)
    for old in _report_dirs(out_root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    logger.info("report written to %s", final)
    return final


def _report_dirs(out_root: Path) -> list[Path]:
    """Report directories under `out_root`, oldest first."""
    found = [p for p in out_root.iterdir() if p.is_dir() and not p.is_symlink() and _REPORT_DIR.match(p.name)]
    return sorted(found, key=lambda p: (p.name[:16], int(p.name[17:] or 0)))


def latest_report_dir(out_root: Path) -> Path | None:
    """The newest complete report directory under `out_root`, or None when there is none."""
    link = out_root / LATEST
    if link.is_symlink() and (out_root / os.readlink(link) / "index.html").is_file():
        return out_root / os.readlink(link)
    dirs = _report_dirs(out_root) if out_root.is_dir() else []
    return dirs[-1] if dirs else None


def load_past_reports(out_root: Path, limit: int = MAX_PAST) -> list[dict[str, Any]]:
    """The newest `limit` saved report.json files under `out_root` (oldest first), for `past`."""
    found = []
    for directory in _report_dirs(out_root)[-limit:] if out_root.is_dir() else []:
        try:
            found.append(json.loads((directory / "report.json").read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            logger.warning("skipping unreadable past report %s: %s", directory, exc)
    return found

