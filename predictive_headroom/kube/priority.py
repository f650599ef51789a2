"""The value of the PriorityClass an adopted placeholder's pods run under, read at every reconcile.

A class's `value` cannot be edited, but the class can be deleted and created again under the same
name with another value (issue 64: `overprovisioning` re-created at 1000 left one cache at -1 and
another at 1000, and the daemon scaled up pods nothing would preempt). So nothing is kept for
ever: with list-and-watch caches (`kube.watched.Caches`), each class is one watch of that one
object (a `metadata.name` field selector, which RBAC allows with `resourceNames`), and every read
asks it; a cache that cannot vouch for the class now (not synced, refused, stale) is not trusted,
and the class is read directly, as it is at every reconcile without caches. A class deleted reads
as missing at once, so `policy.adopt.pause_problem` refuses the target, naming it.

One `PriorityClasses` serves every reader of a target (the watched one and the actuator it wraps),
so two readers never disagree about a class; and right before a write to an adopted placeholder
the class is read once more, directly (`confirm`): a write is never sent on a class the watch has
not caught up with yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.kube.api import CallOptions, _call, _Op
from predictive_headroom.kube.errors import Forbidden, NotFound
from predictive_headroom.kube.watch_options import WatchOptions, WatchQuery
from predictive_headroom.policy.adopt import PodTemplate, pause_problem
from predictive_headroom.policy.config import Pool
from predictive_headroom.protocols import ActuatorError, TargetRefused, TargetState


class _Cache(Protocol):
    def current(self, wait: float = 0.0) -> tuple[Any, ...] | None: ...

    def age(self) -> float: ...


class WatchCaches(Protocol):
    """What a class's watch is had from (`kube.watched.Caches`)."""

    options: WatchOptions

    def informer(
        self, query: WatchQuery, list_fn: Callable[..., Any], slim: Callable[[dict[str, Any]], Any]
    ) -> _Cache: ...


Value = tuple[int | None, str | None]
"""A class's value, or None and why it could not be read."""


def class_value(obj: dict[str, Any]) -> int | None:
    """A PriorityClass's JSON as the value a cache keeps for it (None: no integer value)."""
    value = obj.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def missing(name: str) -> str:
    """Why a class that does not exist cannot be read (for `pause_problem`)."""
    return f"there is no PriorityClass {name}: the API server refuses new pods naming it"


class PriorityClasses:
    """Reads the value of a PriorityClass by name, at every call: from a watch of the class when
    `caches` is set and the watch can vouch for it, else by a GET."""

    def __init__(
        self,
        api_client: ApiClient,
        options: CallOptions | None = None,
        caches: WatchCaches | None = None,
    ) -> None:
        self.options = options or CallOptions()
        self.caches = caches
        """The daemon's caches (set by `kube.watched.WatchedTargets`); None: a GET per read."""
        self._scheduling = kubernetes.client.SchedulingV1Api(api_client)
        self._behind: dict[str, Value] = {}
        """Per class: what a direct read found that its watch does not show yet."""

    def value(self, name: str, pool: str, direct: bool = False) -> Value:
        """The class's value now, or None and why it could not be read (for `pause_problem`);
        `direct` reads it from the API server whatever the watch holds (right before a write).
        Once a direct read found other than the watch holds, the class is read directly until
        the watch shows what it found: a watch behind never undoes a refusal."""
        watched = self._watched(name)
        behind = self._behind.get(name)
        if not direct and watched is not None and behind in (None, watched):
            self._behind.pop(name, None)
            return watched
        found = self._get(name, pool)
        if watched is not None and found != watched:
            self._behind[name] = found
        else:
            self._behind.pop(name, None)
        return found

    def _get(self, name: str, pool: str) -> Value:
        """The class read from the API server."""
        op = _Op("get", "priorityclasses", "scheduling.k8s.io", "PriorityClass", "", name, pool)
        try:
            found = _call(op, self.options, self._scheduling.read_priority_class, name=name)
        except NotFound:
            return None, missing(name)
        except Forbidden:
            return None, f"forbidden: the daemon may not get priorityclasses/{name}"
        except ActuatorError as exc:
            return None, str(exc)
        return int(found.value), None

    def _watched(self, name: str) -> Value | None:
        """The class as its watch holds it; None when there is no watch or it cannot vouch for the
        class now (first list not in, watch refused, nothing heard for `stale_after`)."""
        caches = self.caches
        if caches is None:
            return None
        query = WatchQuery("priorityclasses", "", "", f"metadata.name={name}")
        informer = caches.informer(query, self._scheduling.list_priority_class, class_value)
        found = informer.current(caches.options.sync_wait)
        if found is None or informer.age() > caches.options.stale_after:
            return None
        return (found[0], None) if found else (None, missing(name))

    def confirm(self, pool: Pool, template: PodTemplate | None) -> None:
        """Raise `TargetRefused` (the refusal `pause_problem` words) when the PriorityClass of an
        adopted placeholder's `template`, read directly now, is no longer one below 0: the watch
        may be a moment behind a class deleted and re-created, and a write is not undone."""
        if not pool.placeholder.existing or template is None or template.priority_class is None:
            return
        value, unread = self.value(template.priority_class, pool.name, direct=True)
        now = dataclasses.replace(template, priority=value, priority_unread=unread)
        problem = pause_problem(pool.target, pool.name, now)
        if problem is not None:
            raise TargetRefused(problem)

    def resolve(self, pool: Pool, state: TargetState) -> TargetState:
        """`state` with its pod template's PriorityClass value read now, for a pool whose
        placeholder is declared existing (the only ones `pause_problem` is asked about); else
        `state`."""
        template = state.template
        if not pool.placeholder.existing or template is None or template.priority_class is None:
            return state
        value, unread = self.value(template.priority_class, pool.name)
        resolved = dataclasses.replace(template, priority=value, priority_unread=unread)
        return dataclasses.replace(state, template=resolved)
