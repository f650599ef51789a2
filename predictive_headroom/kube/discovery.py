"""Which CapacityBuffer API the cluster serves, found by API discovery.

CapacityBuffer (`autoscaling.x-k8s.io`) has been published as `v1alpha1`, `v1beta1` and `v1`, and an
alpha version is dropped once a newer one has been served for a while, so the version is not
hard-coded. `choose_api` (pure) picks, per pool:

- the version pinned by `target.apiVersion`, when the server serves CapacityBuffers in it;
- else the server's preferred version of the group, when it serves CapacityBuffers and this code
  supports it;
- else the newest supported version that serves CapacityBuffers.

The scope (namespaced or cluster-wide) comes from discovery too, so the object is read and written
at the right path. `CapacityBufferDiscovery` does the two kinds of discovery call (the group list,
then each version's resource list), caches what it found until `refresh()`, and turns "not served"
into an `ActuatorError` in the user's terms, per pool, so the other pools keep being served.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.errors import CLIENT_ERRORS, NotFound, Unreachable, mapped, short
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.target import (
    CAPACITY_BUFFER_GROUP,
    CAPACITY_BUFFER_PLURAL,
    CAPACITY_BUFFER_VERSIONS,
)
from predictive_headroom.protocols import ActuatorError

logger = logging.getLogger(__name__)

NOT_INSTALLED = (
    f"CapacityBuffer is not installed: no {CAPACITY_BUFFER_GROUP}/{CAPACITY_BUFFER_PLURAL} on this "
    "cluster; install an autoscaler that serves it (Karpenter ≥ 1.14 with --feature-gates "
    "CapacityBuffer=true, or Cluster Autoscaler ≥ 1.34 with the CapacityBuffer feature), or use "
    "kind: Deployment"
)


class CapacityBufferUnavailable(ActuatorError):
    """No CapacityBuffer API this daemon can use is served for a pool; the message says why and what to do."""


@dataclass(frozen=True)
class Served:
    """What discovery found in the `autoscaling.x-k8s.io` group."""

    versions: tuple[str, ...] = ()
    """Every version of the group the server serves (empty: the group is not served at all)."""
    preferred: str | None = None
    buffers: dict[str, bool] = field(default_factory=dict)
    """Versions that serve capacitybuffers -> whether the resource is namespaced there."""


@dataclass(frozen=True)
class BufferApi:
    """The CapacityBuffer API one pool is read and written through."""

    version: str
    namespaced: bool
    chosen_by: str  # target.apiVersion | server-preferred | newest-supported

    @property
    def api_version(self) -> str:
        return f"{CAPACITY_BUFFER_GROUP}/{self.version}"

    @property
    def scope(self) -> str:
        return "Namespaced" if self.namespaced else "Cluster"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "CapacityBuffer",
            "api_version": self.api_version,
            "scope": self.scope,
            "chosen_by": self.chosen_by,
            "error": None,
        }


def choose_api(served: Served, pinned: str | None) -> BufferApi | str:
    """The CapacityBuffer API to use given what the server serves and the pinned version, or why there is none."""
    supported = [v for v in CAPACITY_BUFFER_VERSIONS if v in served.buffers]
    if not served.buffers:
        return NOT_INSTALLED
    if pinned is not None:
        if pinned in served.buffers:
            return BufferApi(pinned, served.buffers[pinned], "target.apiVersion")
        return (
            f"CapacityBuffer {CAPACITY_BUFFER_GROUP}/{pinned}, pinned by target.apiVersion, is not served by this "
            f"cluster (it serves {_versions(served.buffers)}): set target.apiVersion to one of those, or remove it "
            "to use the server's preferred version"
        )
    if not supported:
        return (
            f"this cluster serves CapacityBuffer only as {_versions(served.buffers)}, which this daemon cannot "
            f"write (it supports {', '.join(CAPACITY_BUFFER_VERSIONS)}): upgrade predictive-headroom, or use kind: "
            "Deployment"
        )
    if served.preferred in supported:
        return BufferApi(served.preferred, served.buffers[served.preferred], "server-preferred")
    return BufferApi(supported[0], served.buffers[supported[0]], "newest-supported")


def _versions(buffers: dict[str, bool]) -> str:
    return ", ".join(f"{CAPACITY_BUFFER_GROUP}/{v}" for v in buffers)


class CapacityBufferDiscovery:
    """Finds the CapacityBuffer API of each pool by API discovery; caches it until `refresh()`."""

    def __init__(self, api_client: ApiClient, options: CallOptions | None = None) -> None:
        self.options = options or CallOptions()
        self._apis = kubernetes.client.ApisApi(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._lock = threading.Lock()
        self._served: Served | None = None

    def refresh(self) -> None:
        """Forget what was found: the next use asks the server again (at start, on reload, after a 404)."""
        with self._lock:
            self._served = None

    def served(self) -> Served:
        """What the server serves in the group (cached); raises ActuatorError when discovery itself fails."""
        with self._lock:
            if self._served is None:
                self._served = self._discover()
            return self._served

    def api_for(self, pool: Pool) -> BufferApi:
        """The API to read and write `pool`'s CapacityBuffer through; raises CapacityBufferUnavailable."""
        chosen = choose_api(self.served(), pool.target.pinned_version)
        if isinstance(chosen, str):
            raise CapacityBufferUnavailable(f"pool {pool.name}: {chosen}")
        return chosen

    def describe(self, pools: Iterable[Pool]) -> dict[str, dict[str, Any]]:
        """Per CapacityBuffer pool, the API in use or the error (for the start-up log and /last-run)."""
        out: dict[str, dict[str, Any]] = {}
        for pool in pools:
            if pool.target.kind != "CapacityBuffer":
                continue
            try:
                out[pool.name] = self.api_for(pool).to_dict()
            except ActuatorError as exc:
                out[pool.name] = {
                    "kind": "CapacityBuffer",
                    "api_version": None,
                    "scope": None,
                    "chosen_by": None,
                    "error": str(exc),
                }
        return out

    def _discover(self) -> Served:
        try:
            groups = self._get("the API group list", self._apis.get_api_versions)
        except _NotServed:
            return Served()
        group = next((g for g in groups.groups or [] if g.name == CAPACITY_BUFFER_GROUP), None)
        if group is None:
            return Served()
        versions = tuple(v.version for v in group.versions or [])
        preferred = group.preferred_version.version if group.preferred_version else None
        buffers: dict[str, bool] = {}
        for version in versions:
            try:
                resources = self._get(
                    f"{CAPACITY_BUFFER_GROUP}/{version}",
                    self._custom.get_api_resources,
                    group=CAPACITY_BUFFER_GROUP,
                    version=version,
                )
            except _NotServed:  # listed a moment ago, gone now (a CRD being changed): not served
                continue
            for resource in resources.resources or []:
                if resource.name == CAPACITY_BUFFER_PLURAL:
                    buffers[version] = bool(resource.namespaced)
        served = Served(versions, preferred, buffers)
        logger.debug(
            "discovery of %s: versions %s (preferred %s); capacitybuffers in %s",
            CAPACITY_BUFFER_GROUP,
            versions,
            preferred,
            buffers,
        )
        return served

    def _get(self, what: str, fn: Any, **kwargs: Any) -> Any:
        try:
            for attempt in self.options.retrying():
                with attempt:
                    return fn(**kwargs, _request_timeout=self.options.timeout)
        except CLIENT_ERRORS as exc:
            error = mapped(exc, short(exc))
            if isinstance(error, NotFound):
                raise _NotServed(what) from error
            if isinstance(error, Unreachable):
                raise ActuatorError(
                    f"API discovery of {what} failed after {self.options.attempts} attempt(s) "
                    f"(timeout {self.options.timeout:g}s): {short(exc)}"
                ) from error
            raise ActuatorError(
                f"API discovery of {what} failed: {short(exc)}; CapacityBuffer pools wait for the "
                "next reconcile"
            ) from error
        raise AssertionError("unreachable: tenacity either returns or raises")


class _NotServed(Exception):
    """A discovery document answered 404."""
