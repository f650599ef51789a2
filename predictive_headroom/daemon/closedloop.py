"""The closed loop: what happened in the cluster, measured per pool, and the lead time it implies.

From what each reconcile reads anyway (the pool's node list, its placeholder pods, the scheduler's
`Preempted` Events in the placeholders' namespace) a `PoolLoop` keeps, within a bounded window:

- node boot: creation to first `Ready` of the pool's nodes that appeared recently, each node
  counted once (a node that flaps NotReady and back is not counted again);
- placeholder start: `PodScheduled` to `Ready` of each placeholder pod, counted once;
- headroom used: placeholders the scheduler preempted (the victim's `DisruptionTarget` condition
  or the `Preempted` Event; a victim seen both ways is one use);
- pods that waited (opt-in): workload pods scheduled onto a node of the pool at least
  `wait_threshold_seconds` after their creation, with that wait, each pod once.

`lead_time` turns the samples into the pool's lead time when the policy says `leadTime: auto`:
the p90 of node boot plus the p90 of placeholder start, bounded to [`lead_min`, `lead_max`], once
`min_boots` boots were seen; before that, the configured value. Memory is bounded: samples older
than the window are dropped and at most `max_samples` are kept per kind; the nodes and pods
already counted are remembered only while they are recent.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import numpy as np

from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import NodeSeen, PodSeen, Preemption

DAY = 86400.0


@dataclass(frozen=True)
class LoopSettings:
    """Bounds of the closed loop's memory and of the measured lead time."""

    window_seconds: float = 7 * DAY
    """Samples older than this are dropped (the report shows the last 7 days)."""
    recent_seconds: float = 3600.0
    """Nodes and pods created within this are measured; older ones were up before we looked."""
    max_samples: int = 5000
    """Per pool and kind, the newest samples kept at most."""
    min_boots: int = 5
    """Node boots needed before `leadTime: auto` uses the measurement."""
    percentile: float = 90.0
    lead_min_seconds: float = 30.0
    lead_max_seconds: float = 1800.0
    observe_placeholders: bool = True
    """Read placeholder pods and `Preempted` Events (headroom used, placeholder start)."""
    wait_namespaces: tuple[str, ...] = ()
    """Namespaces whose pods are watched for waiting on a node (opt-in; empty: none)."""
    read_node_pods: bool = False
    """List the pods on each leaving node, cluster-wide (opt-in; the disruption component)."""
    wait_threshold_seconds: float = 10.0
    """A pod scheduled this long after its creation waited for capacity (the scheduler places a pod
    that fits in well under a second)."""


LeadSource = Literal["measured", "configured"]


@dataclass(frozen=True)
class LeadTime:
    """The lead time a pool plans with, where it came from and on how many boots it rests."""

    seconds: float
    source: LeadSource
    samples: int
    configured_seconds: float
    node_boot_seconds: float | None = None
    pod_start_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "source": self.source,
            "samples": self.samples,
            "configured_seconds": self.configured_seconds,
            "node_boot_p90_seconds": self.node_boot_seconds,
            "placeholder_start_p90_seconds": self.pod_start_seconds,
        }


def is_auto(pool: Pool) -> bool:
    """True when the policy says `leadTime: auto` for `pool`."""
    return bool(getattr(pool.lead_time, "auto", False))


def pool_node_selector(pool: Pool) -> str:
    """The label selector of the pool's nodes: the placeholder's nodeSelector, else the
    proportional rule's, else '' (every node)."""
    chosen = pool.placeholder.node_selector or (
        pool.proportional.node_selector if pool.proportional else {}
    )
    return ",".join(f"{k}={v}" for k, v in sorted(chosen.items()))


def placeholder_selector(pool: Pool) -> str:
    """The placeholder pods' label selector (the chart labels every placeholder with its pool);
    none for an adopted Deployment (`placeholder.existing`), whose pods lack that label (adding it
    would restart them): its pods are told by name (`own_pods`)."""
    return "" if pool.placeholder.existing else f"predictive-headroom.io/pool={pool.name}"


def own_pods(pool: Pool, pods: Iterable[PodSeen]) -> tuple[PodSeen, ...]:
    """The pool's placeholder pods among those `placeholder_selector` listed: all of them, or for
    an adopted Deployment those named after it (`<deployment>-<hash>-<5 characters>`)."""
    if not pool.placeholder.existing:
        return tuple(pods)
    owned = _owned_by(pool.target.name)
    return tuple(p for p in pods if owned.match(p.name))


def _owned_by(deployment: str) -> re.Pattern[str]:
    """Names of a Deployment's pods: `<deployment>-<pod-template-hash>-<5 characters>`."""
    return re.compile(rf"^{re.escape(deployment)}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}$")


class _Samples:
    """(time, value) pairs within the window, at most `limit`, oldest first."""

    def __init__(self, limit: int) -> None:
        self.items: deque[tuple[float, float]] = deque(maxlen=limit)

    def add(self, at: float, value: float) -> None:
        self.items.append((at, value))

    def prune(self, since: float) -> None:
        while self.items and self.items[0][0] < since:
            self.items.popleft()

    def values(self, since: float = -math.inf) -> np.ndarray:
        return np.array([v for t, v in self.items if t >= since], dtype=float)


class PoolLoop:
    """What one pool's closed loop measured (see the module docstring)."""

    def __init__(self, pool: Pool, settings: LoopSettings | None = None) -> None:
        self.pool_name = pool.name
        self.settings = settings or LoopSettings()
        limit = self.settings.max_samples
        self.boots, self.starts, self.used = _Samples(limit), _Samples(limit), _Samples(limit)
        self.waits = _Samples(limit)
        self._waited: dict[str, float] = {}
        """Workload pods whose wait was counted (uid -> creation)."""
        self.used_total = 0
        self.started: float | None = None
        """When this loop first looked (the report does not claim a week it has not seen)."""
        self.last_used: float | None = None
        self._nodes: dict[str, float] = {}
        """Nodes whose boot was counted (uid -> creation), forgotten once no longer recent."""
        self._pods: dict[str, float] = {}
        """Placeholder pods whose start was counted (uid -> creation)."""
        self._victims: dict[str, float] = {}
        """Preempted placeholders already counted (uid -> when)."""

    def observe_nodes(self, nodes: Iterable[NodeSeen], now: float) -> list[float]:
        """Count the first Ready of nodes that appeared recently; returns the new boot times."""
        self.started = now if self.started is None else self.started
        recent = now - self.settings.recent_seconds
        new = []
        for node in nodes:
            if node.uid in self._nodes or node.created < recent or node.ready_since is None:
                continue
            self._nodes[node.uid] = node.created
            boot = node.ready_since - node.created
            if 0 <= boot <= self.settings.recent_seconds:
                self.boots.add(node.ready_since, boot)
                new.append(boot)
        self._forget(now)
        return new

    def observe_pods(self, pods: Iterable[PodSeen], now: float) -> tuple[list[float], int]:
        """Count each recent placeholder's start (scheduled to Ready) and each preempted one;
        returns the new start times and how many new preemptions."""
        recent = now - self.settings.recent_seconds
        starts, used = [], 0
        for pod in pods:
            if pod.preempted_at is not None:
                used += self._use(pod.uid, pod.preempted_at, now)
            if (
                pod.uid in self._pods
                or pod.created < recent
                or pod.ready_since is None
                or pod.scheduled_since is None
            ):
                continue
            self._pods[pod.uid] = pod.created
            start = pod.ready_since - pod.scheduled_since
            if 0 <= start <= self.settings.recent_seconds:
                self.starts.add(pod.ready_since, start)
                starts.append(start)
        self._forget(now)
        return starts, used

    def observe_waits(
        self, pods: Iterable[PodSeen], nodes: Collection[str], now: float
    ) -> list[float]:
        """Count workload pods scheduled recently onto one of `nodes` (the pool's) at least
        `wait_threshold_seconds` after their creation; returns their new waits."""
        recent = now - self.settings.recent_seconds
        waits = []
        for pod in pods:
            since = pod.scheduled_since
            if since is None or since < recent or pod.uid in self._waited or pod.node not in nodes:
                continue
            wait = since - pod.created
            self._waited[pod.uid] = pod.created
            if wait >= self.settings.wait_threshold_seconds:
                self.waits.add(since, wait)
                waits.append(wait)
        self._forget(now)
        return waits

    def observe_preemptions(self, events: Iterable[Preemption], deployment: str, now: float) -> int:
        """Count the `Preempted` Events on this pool's placeholders (named after `deployment`)."""
        owned = _owned_by(deployment)
        return sum(self._use(e.pod_uid or e.pod, e.at, now) for e in events if owned.match(e.pod))

    def _use(self, uid: str, at: float, now: float) -> int:
        if uid in self._victims or at < now - self.settings.recent_seconds:
            return 0
        self._victims[uid] = at
        self.used.add(at, 1.0)
        self.used_total += 1
        self.last_used = at if self.last_used is None else max(self.last_used, at)
        return 1

    def _forget(self, now: float) -> None:
        recent = now - 2 * self.settings.recent_seconds
        for memo in (self._nodes, self._pods, self._victims, self._waited):
            for uid in [u for u, t in memo.items() if t < recent]:
                del memo[uid]
        since = now - self.settings.window_seconds
        for samples in (self.boots, self.starts, self.used, self.waits):
            samples.prune(since)

    def lead_time(self, configured: timedelta, now: float) -> LeadTime:
        """The measured lead time once `min_boots` boots are in the window, else `configured`."""
        s = self.settings
        since = now - s.window_seconds
        boots, starts = self.boots.values(since), self.starts.values(since)
        conf = configured.total_seconds()
        boot = float(np.percentile(boots, s.percentile)) if boots.size else None
        start = float(np.percentile(starts, s.percentile)) if starts.size else None
        if boot is None or boots.size < s.min_boots:
            return LeadTime(conf, "configured", int(boots.size), conf, boot, start)
        total = boot + (start or 0.0)
        seconds = float(min(s.lead_max_seconds, max(s.lead_min_seconds, round(total))))
        return LeadTime(seconds, "measured", int(boots.size), conf, boot, start)

    def summary(self, now: float, since: float | None = None) -> dict[str, Any]:
        """The window's figures since `since` (default: the window, or from `recent_seconds`
        before this loop first looked when that is later): boots (count, p50, p90), placeholder starts, headroom used,
        pods that waited (`pods_watched`: whether any namespace is watched for them)."""
        if since is None:
            first = (self.started or now) - self.settings.recent_seconds  # what it saw at once
            since = max(now - self.settings.window_seconds, first)
        boots, starts = self.boots.values(since), self.starts.values(since)
        used, waits = self.used.values(since), self.waits.values(since)
        return {
            "since": since,
            "node_boots": int(boots.size),
            "node_boot_p50_seconds": _pct(boots, 50),
            "node_boot_p90_seconds": _pct(boots, 90),
            "placeholder_starts": int(starts.size),
            "placeholder_start_p90_seconds": _pct(starts, 90),
            "headroom_used": int(used.size),
            "headroom_last_used_at": self.last_used,
            "pods_watched": bool(self.settings.wait_namespaces),
            "pods_waited": int(waits.size),
            "pod_wait_total_seconds": round(float(waits.sum()), 1),
            "pod_wait_worst_seconds": round(float(waits.max()), 1) if waits.size else None,
        }


def _pct(values: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values.size else None
