"""The cluster reads of a reconcile served from list-and-watch caches (`kube.informer`).

`Caches` holds one informer per query, started by the first read that needs it (a label selector
of the nodes, a namespace's placeholders, ...) and stopped when no read asked for it for
`idle_stop` seconds (a pool left the config). `WatchedClusterReader` and `WatchedPodReader` answer
exactly what `KubeClusterReader` and `KubePodReader` answer, from memory; while a cache cannot be
read (its first list is not done, the API server refused the watch, it went stale) they ask the
listing reader they wrap, so a reconcile reads what the LIST design read.

`WatchedTargets` reads each Deployment target from a watch of that one Deployment, and each
CapacityBuffer target from a watch of that one buffer in the version discovery chose (a
`metadata.name` field selector, which RBAC allows with `resourceNames`); an adopted Deployment's
PriorityClass from a watch of that one class, shared with the actuator it wraps (`kube.priority`);
writes go to the actuator.

What a cache keeps per object (measured in `bench/informer_memory.py`, figures in
docs/operations.md): a node's name, cores, schedulability and `NodeSeen`; a pod's `PodSeen` or
`PodOnNode`; an Event's `Preemption`; a ResourceQuota's `QuotaSeen` (`kube.quotas`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.core.context import QuotaRoom
from predictive_headroom.kube.api import CallOptions
from predictive_headroom.kube.cluster import KubeClusterReader
from predictive_headroom.kube.discovery import CapacityBufferDiscovery
from predictive_headroom.kube.informer import Informer
from predictive_headroom.kube.nodes import node_entry
from predictive_headroom.kube.pods import (
    LIVE_PODS,
    NODE_PODS,
    PREEMPTED_EVENT_SELECTOR,
    KubePodReader,
    by_node,
    node_pod,
    pod_seen,
    preemption,
)
from predictive_headroom.kube.priority import PriorityClasses
from predictive_headroom.kube.quotas import (
    OWN_PODS,
    own_selector,
    placeholder_pod,
    quota_room,
    quota_seen,
)
from predictive_headroom.kube.targets import object_target
from predictive_headroom.kube.watch_options import WatchOptions, WatchQuery
from predictive_headroom.policy.adopt import PodTemplate
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.target import CAPACITY_BUFFER_GROUP, CAPACITY_BUFFER_PLURAL
from predictive_headroom.protocols import (
    Actuator,
    ActuatorError,
    ClusterState,
    NodeList,
    PodOnNode,
    PodSeen,
    Preemption,
    TargetState,
)

logger = logging.getLogger(__name__)


class Caches:
    """The informers of one daemon, one per query, and what readiness and /last-run say of them."""

    def __init__(
        self,
        options: WatchOptions | None = None,
        call_options: CallOptions | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        idle_stop: float = 900.0,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """`sleep(seconds)` waits each cache's backoffs (default: a wait its stop ends); tests
        inject it with `monotonic`."""
        self.options, self.call_options = options or WatchOptions(), call_options or CallOptions()
        self.monotonic, self.idle_stop, self.sleep = monotonic, idle_stop, sleep
        self.on_relist: Callable[[str, str], None] | None = None
        """Told (resource, reason) at every list of a cache; the shell points it at a metric."""
        self.on_backoff: Callable[[str, str], None] | None = None
        """Told (cache, reason) at every backoff wait of a cache; the shell points it at a metric."""
        self._informers: dict[WatchQuery, Informer[Any]] = {}
        self._lock = threading.Lock()

    def informer(
        self, query: WatchQuery, list_fn: Callable[..., Any], slim: Callable[[dict[str, Any]], Any]
    ) -> Informer[Any]:
        """The informer of `query`, started now when it is new; informers idle for `idle_stop`
        seconds are stopped."""
        with self._lock:
            found = self._informers.get(query)
            if found is None:
                found = self._informers[query] = Informer(
                    query,
                    list_fn,
                    slim,
                    self.options,
                    self.call_options,
                    lambda resource, reason: self._relisted(resource, reason),
                    self.monotonic,
                    self.sleep,
                    on_backoff=lambda cache, reason: self._backed_off(cache, reason),
                ).start()
            idle = [
                q
                for q, i in self._informers.items()
                if q != query and self.monotonic() - i.last_read > self.idle_stop
            ]
            for gone in idle:
                logger.info("cache of %s: not read lately, stopped", gone.describe())
                self._informers.pop(gone).stop()
        return found

    def _relisted(self, resource: str, reason: str) -> None:
        if self.on_relist is not None:
            self.on_relist(resource, reason)

    def _backed_off(self, cache: str, reason: str) -> None:
        if self.on_backoff is not None:
            self.on_backoff(cache, reason)

    def synced(self) -> tuple[bool, str]:
        """(ready, why): every cache has listed once; one whose watch or list the API server refused
        counts, as its reads list (and fail, naming the permission) as before watches."""
        with self._lock:
            informers = list(self._informers.values())
        starting = [i.query.describe() for i in informers if i.mode == "starting"]
        if starting:
            return False, f"cache(s) not synced yet: {', '.join(starting)}"
        listing = [i.query.describe() for i in informers if i.mode == "listing"]
        if listing:
            return True, f"reading by LIST (watch or list refused): {', '.join(listing)}"
        return True, f"{len(informers)} cache(s) synced"

    def status(self) -> list[dict[str, Any]]:
        """Each cache's mode, size, age and last re-list, for /last-run."""
        with self._lock:
            informers = list(self._informers.values())
        return [i.status().to_dict() for i in informers]

    def stop(self, wait: float = 0.0) -> list[str]:
        """Stop every cache's thread and wait up to `wait` seconds in all for them to end; the
        caches whose thread is still inside a call to the API server then."""
        with self._lock:
            informers = list(self._informers.values())
            self._informers.clear()
        for informer in informers:
            informer.stop()
        ends = time.monotonic() + wait
        return [i.query.describe() for i in informers if not i.join(ends - time.monotonic())]


class WatchedClusterReader:
    """`KubeClusterReader`'s answers from a node cache per label selector."""

    def __init__(self, lister: KubeClusterReader, caches: Caches) -> None:
        self.lister, self.caches = lister, caches
        self._list = lister._core.list_node

    def cluster_state(self, label_selector: str) -> ClusterState:
        """Node and core counts (all, and schedulable) for nodes matching `label_selector`."""
        return self.read_nodes(label_selector).state

    def read_nodes(self, label_selector: str) -> NodeList:
        """What `KubeClusterReader.read_nodes` lists, from the cache (listing while it cannot)."""
        informer = self.caches.informer(
            WatchQuery("nodes", "", label_selector), self._list, node_entry
        )
        entries = informer.current(self.caches.options.sync_wait)
        if entries is None:
            return self.lister.read_nodes(label_selector)
        return self.lister.counted(entries)


@dataclass(frozen=True)
class WatchedKind:
    """One kind of namespaced cluster read kept in watch caches, declared once: its resource, the
    CoreV1 list calls of one namespace and of all, and what a cache keeps of each object (`slim`,
    the fields kept). A new kind of read is one entry of `KINDS`; a `WatchQuery` adds the scope
    (namespace) and the selectors."""

    resource: str
    namespaced: str
    """The `CoreV1Api` method listing one namespace."""
    every_namespace: str
    """The `CoreV1Api` method listing all namespaces."""

    def list_fn(self, core: Any, namespace: str) -> Callable[..., Any]:
        """The list call of `namespace` ('': every namespace) on the client `core`."""
        if namespace:
            return functools.partial(getattr(core, self.namespaced), namespace)
        return cast(Callable[..., Any], getattr(core, self.every_namespace))


KINDS: dict[str, WatchedKind] = {
    "pods": WatchedKind("pods", "list_namespaced_pod", "list_pod_for_all_namespaces"),
    "events": WatchedKind("events", "list_namespaced_event", "list_event_for_all_namespaces"),
    "resourcequotas": WatchedKind(
        "resourcequotas", "list_namespaced_resource_quota", "list_resource_quota_for_all_namespaces"
    ),
}
"""Every namespaced kind the daemon reads through watch caches, by resource."""


class WatchedPodReader:
    """`KubePodReader`'s answers from pod and Event caches (one per namespace and selector)."""

    def __init__(self, lister: KubePodReader, caches: Caches, api_client: ApiClient) -> None:
        self.lister, self.caches = lister, caches
        self._core = kubernetes.client.CoreV1Api(api_client)

    def _cached(
        self, query: WatchQuery, slim: Callable[[dict[str, Any]], Any]
    ) -> tuple[Any, ...] | None:
        list_fn = KINDS[query.resource].list_fn(self._core, query.namespace)
        informer = self.caches.informer(query, list_fn, slim)
        return informer.current(self.caches.options.sync_wait)

    def placeholder_pods(self, namespace: str, label_selector: str) -> tuple[PodSeen, ...]:
        """The pods of `namespace` matching `label_selector`, with their scheduling times."""
        found = self._cached(WatchQuery("pods", namespace, label_selector), pod_seen)
        if found is None:
            return self.lister.placeholder_pods(namespace, label_selector)
        return found

    def workload_pods(self, namespace: str) -> tuple[PodSeen, ...]:
        """The pods of `namespace` that have not ended."""
        found = self._cached(WatchQuery("pods", namespace, "", LIVE_PODS), pod_seen)
        if found is None:
            return self.lister.workload_pods(namespace)
        return found

    def preemptions(self, namespace: str) -> tuple[Preemption, ...]:
        """The scheduler's `Preempted` Events on pods of `namespace`."""
        query = WatchQuery("events", namespace, "", PREEMPTED_EVENT_SELECTOR)
        found = self._cached(query, preemption)
        if found is None:
            return self.lister.preemptions(namespace)
        return found

    def quota_room(self, pool: Pool) -> QuotaRoom:
        """The ResourceQuotas of `pool`'s namespace and its own live placeholder pods
        (`kube.quotas`), from a cache of each (both listed while one cannot answer)."""
        ns = pool.target.namespace
        quotas = self._cached(WatchQuery("resourcequotas", ns, ""), quota_seen)
        pods = self._cached(WatchQuery("pods", ns, own_selector(pool), OWN_PODS), placeholder_pod)
        if quotas is None or pods is None:
            return self.lister.quota_room(pool)
        return quota_room(pool, quotas, pods)

    def pods_by_node(self) -> dict[str, tuple[PodOnNode, ...]]:
        """The pods bound to a node that have not ended, by node name: one cache of every
        namespace, or one per namespace of the lister's `node_namespaces` (each listed directly
        while its cache cannot answer)."""
        pairs: list[tuple[str, PodOnNode]] = []
        for namespace in self.lister.node_namespaces or ("",):
            found = self._cached(WatchQuery("pods", namespace, "", NODE_PODS), node_pod)
            pairs.extend(self.lister.node_pods(namespace) if found is None else found)
        return by_node(pairs)


class WatchedTargets:
    """An `Actuator` whose targets are read from a cache of each named Deployment or CapacityBuffer.

    After a write of a pool's target (and until the cache shows the resourceVersion last read
    directly) the target is read directly: a cache a few events behind must not make the daemon's
    own write look like a person's change. Without `discovery`, CapacityBuffers are read directly.
    """

    def __init__(
        self,
        actuator: Actuator,
        caches: Caches,
        api_client: ApiClient,
        discovery: CapacityBufferDiscovery | None = None,
    ) -> None:
        self.actuator, self.caches, self.discovery = actuator, caches, discovery
        self._apps = kubernetes.client.AppsV1Api(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        found = getattr(actuator, "priority_classes", None)
        self.priority_classes: PriorityClasses = (
            found
            if isinstance(found, PriorityClasses)
            else PriorityClasses(api_client, caches.call_options)
        )
        """One reader of PriorityClass values for this and the actuator, from one watch per class."""
        self.priority_classes.caches = caches
        self._expected: dict[str, str] = {}
        """Per pool written to: the resourceVersion the cache must show before it is read again."""
        self._templates: dict[str, PodTemplate | None] = {}
        """Per pool: the pod template last read of its target (its PriorityClass is confirmed
        before each write)."""

    def _watched(self, pool: Pool) -> bool:
        return pool.target.kind == "Deployment" or (
            pool.target.kind == "CapacityBuffer" and self.discovery is not None
        )

    def _cached(self, pool: Pool) -> TargetState | None:
        ns, name = pool.target.namespace, pool.target.name
        picked = f"metadata.name={name}"
        if pool.target.kind == "Deployment":
            query = WatchQuery("deployments", ns, "", picked)
            list_fn = functools.partial(self._apps.list_namespaced_deployment, ns)
        else:
            assert self.discovery is not None
            try:
                api = self.discovery.api_for(pool)
            except ActuatorError:
                return None  # the actuator's read names what is missing
            where = (CAPACITY_BUFFER_GROUP, api.version)
            if api.namespaced:
                list_fn = functools.partial(
                    self._custom.list_namespaced_custom_object, *where, ns, CAPACITY_BUFFER_PLURAL
                )
            else:
                list_fn = functools.partial(
                    self._custom.list_cluster_custom_object, *where, CAPACITY_BUFFER_PLURAL
                )
            # kubectl's fully qualified form: a version the cluster stops serving is a new cache
            resource = f"{CAPACITY_BUFFER_PLURAL}.{api.version}.{CAPACITY_BUFFER_GROUP}"
            query = WatchQuery(resource, ns if api.namespaced else "", "", picked)
        slim = functools.partial(object_target, conditions=pool.target.kind == "CapacityBuffer")
        found = self.caches.informer(query, list_fn, slim).current(self.caches.options.sync_wait)
        return found[0] if found else None

    def read(self, pool: Pool) -> TargetState:
        """The target's state from the cache when it is a Deployment or CapacityBuffer the cache
        holds and has caught up with the daemon's last write; else read by the actuator (which
        names what is missing)."""
        if not self._watched(pool):
            return self.actuator.read(pool)
        cached, expected = self._cached(pool), self._expected.get(pool.name)
        if cached is not None and expected in (None, cached.resource_version):
            self._expected.pop(pool.name, None)
            state = self.priority_classes.resolve(pool, cached)
        else:
            state = self.actuator.read(pool)
            if expected is not None:
                self._expected[pool.name] = state.resource_version
        self._templates[pool.name] = state.template
        return state

    def scale(self, pool: Pool, replicas: int, reason: str, dry_run: bool) -> None:
        """Write through the actuator, an adopted placeholder's PriorityClass confirmed first
        (`TargetRefused` when it changed); the target is then read directly until the cache
        caught up."""
        self.priority_classes.confirm(pool, self._templates.get(pool.name))
        if self._watched(pool):
            self._expected[pool.name] = ""
        self.actuator.scale(pool, replicas, reason, dry_run)

    def record_refusal(self, pool: Pool, message: str) -> None:
        """A Warning Event on the pool's target saying why it is not written (never raises)."""
        self.actuator.record_refusal(pool, message)
