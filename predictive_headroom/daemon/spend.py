"""The day's spend of each budgeted pool, kept where the next leader finds it.

`budget:` caps what a pool holds from midnight (`core.budget`); the daemon counts it from its own
plans (`daemon.components.DaemonContext`). Kept in memory only, every restart counted the day
again from zero (issue 64: three restarts spent 2.00x the budget, hourly restarts up to 3.5x). So
the leader keeps, per budgeted pool, what was held since the start of the day on its Lease, as
the annotation `predictive-headroom.io/spend`, written with the Lease's own renewals
(`kube.leader.LeaderElector.carry`: no request of its own) and brought up to date at most once a
minute; a replica that starts leading reads it back before it plans (`SpendKeeper.resume`), and
holds its count at the record's instant until its first plan (the placeholders kept running).

The annotation is JSON, one entry per pool: `{"web": {"day": <POSIX start of the day>, "at":
<POSIX instant>, "seconds": <placeholder-seconds held from the day's start until at>, "replicas":
<count held at at>}}`. A record that cannot be read (not JSON, a field missing or not a number)
is said once on the log and on /last-run (`budget.record`), and the day is counted from the
restart, as without a record (docs/budget.md).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

logger = logging.getLogger(__name__)

ANNOTATION = "predictive-headroom.io/spend"
SAVE_EVERY = 60.0
"""Seconds (of the daemon's clock) between updates of the record."""


@dataclass(frozen=True)
class Spent:
    """What one pool held on one day, up to an instant: placeholder-seconds since the day's start,
    and the count held then."""

    day: float
    at: float
    seconds: float
    replicas: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "day": self.day,
            "at": round(self.at, 3),
            "seconds": round(self.seconds, 3),
            "replicas": self.replicas,
        }


def encode(spent: Mapping[str, Spent]) -> str:
    """The annotation's text for `spent` (pools in name order)."""
    return json.dumps({name: spent[name].to_dict() for name in sorted(spent)}, sort_keys=True)


def decode(text: str) -> dict[str, Spent]:
    """The record in the annotation's `text`; ValueError naming what cannot be read."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"annotation {ANNOTATION} is not JSON ({exc})") from None
    if not isinstance(found, dict):
        raise ValueError(f"annotation {ANNOTATION} is not a JSON object")
    out: dict[str, Spent] = {}
    for name, entry in found.items():
        fields = entry if isinstance(entry, dict) else {}
        numbers = [fields.get(k) for k in ("day", "at", "seconds", "replicas")]
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in numbers
        ):
            raise ValueError(
                f"annotation {ANNOTATION}: pool {name!r} needs numbers day, at, seconds and "
                f"replicas, found {json.dumps(entry)[:200]}"
            )
        day, at, seconds, replicas = numbers
        if seconds < 0 or replicas < 0 or at < day:  # type: ignore[operator]
            raise ValueError(f"annotation {ANNOTATION}: pool {name!r} has impossible values")
        out[str(name)] = Spent(float(day), float(at), float(seconds), int(replicas))  # type: ignore[arg-type]
    return out


@runtime_checkable
class SpendStore(Protocol):
    """Where the record lives: the leader Lease (`kube.leader.LeaderElector`)."""

    term: int
    """Counts the times this replica started leading."""

    @property
    def is_leader(self) -> bool: ...

    def annotation(self, key: str) -> str | None:
        """The Lease's annotation as last read (None: absent)."""
        ...

    def carry(self, key: str, value: str) -> None:
        """Write the annotation with the next renewal (ignored unless leading)."""
        ...


class Resumable(Protocol):
    """What the keeper reads from and resumes (`daemon.components.DaemonContext`)."""

    def spent(self) -> dict[str, Spent]:
        """Each budgeted pool's spend of its day up to now."""
        ...

    def resume(self, spent: Mapping[str, Spent]) -> None:
        """Count each pool's day from what `spent` says was held."""
        ...


class SpendKeeper:
    """Reads the record when this replica starts leading and keeps it up to date while it leads."""

    def __init__(self, store: SpendStore) -> None:
        self.store = store
        self._term = 0
        self._saved_at: float | None = None
        self.problem: str | None = None
        """Why the record could not be read at the last takeover (None: it was, or none yet)."""
        self.resumed_from: float | None = None
        """The instant of the record the day was counted from (None: counted from the start)."""

    def begin(self, context: Resumable) -> None:
        """A reconcile starts: when this replica has started leading since the last one, count
        the day from the record on the Lease (or, when it cannot be read, from now)."""
        if not self.store.is_leader or self.store.term == self._term:
            return
        self._term, self._saved_at = self.store.term, None
        text = self.store.annotation(ANNOTATION)
        if text is None:
            self.problem, self.resumed_from = None, None
            return
        try:
            spent = decode(text)
        except ValueError as exc:
            self.problem = f"{exc}; the day's spend is counted from this restart"
            logger.warning("budget: the spend record on the leader Lease: %s", self.problem)
            return
        self.problem = None
        self.resumed_from = max((s.at for s in spent.values()), default=None)
        context.resume(spent)
        logger.info(
            "budget: the day's spend of %s read from the leader Lease",
            ", ".join(f"{n} ({s.seconds / 3600:.2f} placeholder-hours)" for n, s in spent.items())
            or "no pool",
        )

    def after(self, context: Resumable, now: float) -> None:
        """A reconcile ended at `now`: bring the record up to date (at most every `SAVE_EVERY`
        seconds) while leading."""
        if not self.store.is_leader:
            return
        if self._saved_at is not None and now - self._saved_at < SAVE_EVERY:
            return
        self.store.carry(ANNOTATION, encode(context.spent()))
        self._saved_at = now

    def status(self) -> dict[str, object]:
        """What /last-run shows of the record."""
        return {
            "kept_on": f"the leader Lease (annotation {ANNOTATION})",
            "resumed_from": self.resumed_from,
            "problem": self.problem,
        }
