"""An HTTP server that answers like kube-apiserver for the endpoints predictive-headroom uses.

The real `kubernetes` client talks to it over HTTP (`server.api_client()`), so tests exercise the
client's serialisation, error classes and timeouts. It keeps objects in memory with a global
resourceVersion like etcd, honours optimistic concurrency (409 Conflict on a stale
resourceVersion), `dryRun=All`, label and field selectors and `limit`/`continue` on lists, and can
inject faults (403/404/409/500/..., slow answers, truncated bodies) per method and path pattern. Every request is
recorded so tests can assert what was written.

Watches (`?watch=true` on a collection) stream chunked JSON lines like the apiserver: every change after
the `resourceVersion` asked for (a filtered watch sends ADDED/DELETED when an object enters or leaves the
selector), `BOOKMARK`s every `bookmark_every` seconds when `allowWatchBookmarks` is set, an `ERROR` event
with a 410 Status for a version older than the last `compact()`, and the end of the stream after
`timeoutSeconds`. `hang_watches()` answers watches with headers and then silence;
`cut_connections()` breaks every open connection (a watch sees its stream end unfinished).

Served: apps/v1 deployments (GET) and their /scale (GET, PATCH, PUT); autoscaling.x-k8s.io
capacitybuffers (GET, PATCH, PUT) in the versions and the scope the test asks for (only v1beta1,
only v1alpha1, cluster-scoped v1, none at all, ...); core/v1 nodes (LIST, GET) and pods (LIST; with
their scheduling conditions, a node that flaps Ready, pods never scheduled, preemption);
coordination.k8s.io/v1 leases (GET, POST, PUT, DELETE); core/v1 and events.k8s.io/v1 events (POST,
LIST); scheduling.k8s.io/v1 priorityclasses (GET); core/v1 resourcequotas (LIST, WATCH; `used` as the test
sets it); API discovery (`/apis` and `/apis/<group>/<version>`) for those groups. Anything else is a
404 with the apiserver's "the server could not find the requested resource".
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import kubernetes.client

SERVICE_ACCOUNT = "system:serviceaccount:predictive-headroom:predictive-headroom"

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_KINDS = {  # (group, resource) -> (kind, apiVersion, namespaced)
    ("apps", "deployments"): ("Deployment", "apps/v1", True),
    ("autoscaling.x-k8s.io", "capacitybuffers"): (
        "CapacityBuffer",
        "autoscaling.x-k8s.io/v1alpha1",
        True,
    ),
    ("", "nodes"): ("Node", "v1", False),
    ("", "pods"): ("Pod", "v1", True),
    ("coordination.k8s.io", "leases"): ("Lease", "coordination.k8s.io/v1", True),
    ("", "events"): ("Event", "v1", True),
    ("events.k8s.io", "events"): ("Event", "events.k8s.io/v1", True),
    ("scheduling.k8s.io", "priorityclasses"): ("PriorityClass", "scheduling.k8s.io/v1", False),
    ("", "resourcequotas"): ("ResourceQuota", "v1", True),
}
BUFFER_GROUP = "autoscaling.x-k8s.io"
_VERSION_PRIORITY = (
    "v1",
    "v1beta1",
    "v1alpha1",
)  # how the apiserver orders CRD versions (simplified)
_DISCOVERY = {  # group -> (versions, [(resource, kind, namespaced)]) served besides CapacityBuffer
    "apps": (("v1",), [("deployments", "Deployment", True), ("deployments/scale", "Scale", True)]),
    "coordination.k8s.io": (("v1",), [("leases", "Lease", True)]),
    "events.k8s.io": (("v1",), [("events", "Event", True)]),
}
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


POOL_LABEL = "predictive-headroom.io/pool"
OWN_POOL = "<from the name>"
"""`add_deployment`'s default pool: the object's name without `-placeholder` or `-buffer`, as the
tests' policies name their targets (`web-placeholder` is pool `web`'s)."""


def _pool_labels(name: str, pool: str | None) -> dict[str, Any]:
    """The metadata labels of a target that is `pool`'s own (`OWN_POOL`: named after it)."""
    if pool is None:
        return {}
    if pool == OWN_POOL:
        pool = name.removesuffix("-placeholder").removesuffix("-buffer")
    return {"labels": {POOL_LABEL: pool}}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also what a strategic merge does on maps without lists)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _matches(labels: dict[str, str], selector: str) -> bool:
    """Equality-based label selector: `k=v`, `k==v`, `k!=v`, `k` (exists), `!k` (absent)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(obj: dict[str, Any], selector: str) -> bool:
    """Equality field selector (`reason=Preempted,involvedObject.kind=Pod`, `a!=b`)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        path, _, wanted = term.replace("!=", "=").replace("==", "=").partition("=")
        value: Any = obj
        for part in path.strip().split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if (str(value if value is not None else "") == wanted.strip()) == negate:
            return False
    return True


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str
    at: float
    agent: str = ""
    """The client's User-Agent (`api_client(agent=...)` tells replicas apart)."""


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int | None
    delay: float
    remaining: int | None
    message: str | None = None
    when: Callable[[Recorded], bool] | None = None
    retry_after: int | None = None


class ApiError(Exception):
    """An error answer with a Kubernetes Status body."""

    def __init__(self, code: int, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": _REASONS.get(self.code, "Unknown"),
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


@dataclass
class _Route:
    group: str
    version: str
    namespace: str | None
    resource: str
    name: str | None
    sub: str | None
    method: str
    query: dict[str, str] = field(default_factory=dict)

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.resource}
        if self.group:
            out["group"] = self.group
        if self.name:
            out["name"] = self.name
        return out


class FakeApiServer:
    """In-memory kube-apiserver on 127.0.0.1 (random port) served from a background thread."""

    def __init__(
        self,
        capacity_buffer_crd: bool = True,
        capacity_buffer_versions: tuple[str, ...] = ("v1alpha1",),
        capacity_buffer_scope: str = "Namespaced",
        preferred_version: str | None = None,
        provisioning_requests: bool = False,
    ) -> None:
        """`capacity_buffer_versions`: the autoscaling.x-k8s.io versions serving capacitybuffers (none
        when `capacity_buffer_crd` is False), at `capacity_buffer_scope` (Namespaced or Cluster).
        `provisioning_requests`: the group also serves ProvisioningRequests in v1 and v1beta1, as with
        Cluster Autoscaler's ProvisioningRequest CRD. `preferred_version` overrides the group's
        preferred version (default: the highest-priority served version)."""
        self.capacity_buffer_versions = (
            tuple(capacity_buffer_versions) if capacity_buffer_crd else ()
        )
        self.capacity_buffer_crd = bool(self.capacity_buffer_versions)
        self.capacity_buffer_scope = capacity_buffer_scope
        self.provisioning_requests = provisioning_requests
        self.preferred_version = preferred_version
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self._last_rv = 99
        self._history: list[tuple[int, tuple[str, str, str, str], Any, Any]] = []
        """Every change (resourceVersion, key, object before, object after; None when absent)."""
        self._changed = threading.Condition(self._lock)
        self._compacted = 0
        """Watches from a resourceVersion below this are answered 410 Gone."""
        self.bookmark_every: float | None = 0.5
        """Seconds between BOOKMARK events of a watch that allows them; None: never sent."""
        self._hangs = 0
        self._open: set[Any] = set()
        """The sockets of the connections open now (`cut_connections` breaks them)."""
        self._faults: list[_Fault] = []
        self._truncations: list[_Fault] = []
        self._requests: list[Recorded] = []
        self._stopping = threading.Event()
        self.bytes_sent = 0
        """Bytes of response bodies sent so far (what the clients had to read and parse)."""
        self.tokens: dict[str, dict[str, Any]] = {}
        """Bearer tokens a TokenReview authenticates: token -> `status.user` (username, groups)."""
        self.non_resource_grants: set[tuple[str, str]] = set()
        """(user or group, path) pairs a SubjectAccessReview allows `get` on."""
        self._clients: list[kubernetes.client.ApiClient] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-apiserver", daemon=True
        )

    @property
    def buffer_group_versions(self) -> tuple[str, ...]:
        """The versions of autoscaling.x-k8s.io served now (tests may change what is served while running)."""
        served = set(self.capacity_buffer_versions) | (
            {"v1", "v1beta1"} if self.provisioning_requests else set()
        )
        return tuple(v for v in _VERSION_PRIORITY if v in served) + tuple(
            sorted(served - set(_VERSION_PRIORITY))
        )

    @property
    def preferred_version(self) -> str | None:
        """The group's preferred version: the one set, else the highest-priority served version."""
        versions = self.buffer_group_versions
        return (
            self._preferred if self._preferred in versions else (versions[0] if versions else None)
        )

    @preferred_version.setter
    def preferred_version(self, value: str | None) -> None:
        self._preferred = value

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for client in self._clients:
            client.close()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def configuration(self) -> kubernetes.client.Configuration:
        """A client Configuration pointing at this server (urllib3's own retries off)."""
        config = kubernetes.client.Configuration(host=self.url)
        config.retries = False
        return config

    def api_client(self, agent: str | None = None) -> kubernetes.client.ApiClient:
        """A real ApiClient for this server, closed when the server stops; `agent` sets its User-Agent
        so `Recorded.agent` tells which replica sent a request."""
        client = kubernetes.client.ApiClient(self.configuration())
        if agent is not None:
            client.user_agent = agent
        self._clients.append(client)
        return client

    # -- seeding and inspecting state ----------------------------------------------------------

    def _put(self, group: str, resource: str, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        kind, api_version, _ = _KINDS[(group, resource)]
        if resource == "capacitybuffers":
            api_version = f"{BUFFER_GROUP}/{obj.get('apiVersion', '').rpartition('/')[2] or self.preferred_version}"
            ns = ns if self.capacity_buffer_scope == "Namespaced" else ""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        if ns:
            meta["namespace"] = ns
        obj["kind"], obj["apiVersion"] = kind, api_version
        if not ns:
            meta.pop("namespace", None)
        with self._lock:
            meta["resourceVersion"] = str(self._next_rv())
            key = (group, resource, ns, meta["name"])
            self._record_change(key, self._objects.get(key), obj)
            self._objects[key] = obj
        return copy.deepcopy(obj)

    def _next_rv(self) -> int:
        with self._lock:
            self._last_rv = next(self._rv)
            return self._last_rv

    def _record_change(self, key: tuple[str, str, str, str], old: Any, new: Any) -> None:
        """Append one change to the history watches read, and wake them (under the lock)."""
        rv = int(new["metadata"]["resourceVersion"]) if new is not None else self._next_rv()
        self._history.append((rv, key, copy.deepcopy(old), copy.deepcopy(new)))
        self._changed.notify_all()

    def _remove(self, key: tuple[str, str, str, str]) -> None:
        """Delete the object at `key` (if any), recording a DELETED change."""
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._record_change(key, old, None)

    def compact(self) -> int:
        """What etcd compaction does: watches from any resourceVersion so far get 410 Gone; returns it."""
        with self._lock:
            self._compacted = self._next_rv()
            return self._compacted

    def hang_watches(self, times: int = 1) -> None:
        """The next `times` watch requests get a 200 and headers, then nothing at all (no events, no
        bookmarks, no end) until the server stops: a watch stuck behind a broken proxy."""
        with self._lock:
            self._hangs += times

    def cut_connections(self) -> int:
        """Break every connection open now (watches streaming, keep-alive connections) as a dropped
        network path or a restarted load balancer would: the client reads an unfinished answer or a
        reset. New connections are served as before; returns how many were cut."""
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by its handler
                sock.shutdown(socket.SHUT_RDWR)
        return len(sockets)

    def _get(self, group: str, resource: str, ns: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self._objects.get((group, resource, ns, name))
            return copy.deepcopy(obj) if obj else None

    def add_deployment(
        self,
        ns: str,
        name: str,
        replicas: int = 0,
        annotations: dict[str, str] | None = None,
        pool: str | None = OWN_POOL,
        pod: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create a Deployment with `replicas` and optional metadata annotations, labelled as the
        placeholder of `pool` (see `_pool_labels`; None: no label, another team's Deployment);
        `pod` replaces its pod template's spec (default: one pause container)."""
        return self._put(
            "apps",
            "deployments",
            ns,
            {
                "metadata": {
                    "name": name,
                    "annotations": dict(annotations or {}),
                    "generation": 1,
                    **_pool_labels(name, pool),
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": pod
                        or {
                            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]
                        },
                    },
                },
                "status": {"replicas": replicas},
            },
        )

    def add_priority_class(self, name: str, value: int) -> dict[str, Any]:
        """Create a PriorityClass `name` of `value` (cluster-scoped)."""
        body = {"metadata": {"name": name}, "value": value, "globalDefault": False}
        return self._put("scheduling.k8s.io", "priorityclasses", "", body)

    def add_resource_quota(
        self,
        ns: str,
        name: str,
        hard: dict[str, str],
        used: dict[str, str] | None = None,
        scopes: list[str] | None = None,
        scope_selector: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Create or replace ResourceQuota `name` in `ns`, its status as the quota controller
        would fill it (`used` as given: the fake counts nothing itself); listed and watched."""
        spec: dict[str, Any] = {"hard": dict(hard)}
        if scopes:
            spec["scopes"] = list(scopes)
        if scope_selector:
            spec["scopeSelector"] = {"matchExpressions": list(scope_selector)}
        status = {"hard": dict(hard), "used": dict(used or {})}
        return self._put(
            "", "resourcequotas", ns, {"metadata": {"name": name}, "spec": spec, "status": status}
        )

    def delete_priority_class(self, name: str) -> None:
        """A person's `kubectl delete priorityclass` (gone at once)."""
        with self._lock:
            assert ("scheduling.k8s.io", "priorityclasses", "", name) in self._objects
            self._remove(("scheduling.k8s.io", "priorityclasses", "", name))

    def delete_deployment(self, ns: str, name: str) -> None:
        """A person's `kubectl delete deployment` (no grace: gone at once)."""
        with self._lock:
            assert ("apps", "deployments", ns, name) in self._objects
            self._remove(("apps", "deployments", ns, name))

    def deployment(self, ns: str, name: str) -> dict[str, Any] | None:
        return self._get("apps", "deployments", ns, name)

    def replicas(self, ns: str, name: str) -> int:
        """spec.replicas of a Deployment (or a CapacityBuffer when no such Deployment exists)."""
        obj = self.deployment(ns, name) or self.capacity_buffer(ns, name)
        assert obj is not None, f"no Deployment or CapacityBuffer {ns}/{name}"
        return int(obj["spec"].get("replicas", 0))

    def edit_deployment(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A person's change (kubectl scale / annotate): merge-patch the object, bump resourceVersion."""
        with self._lock:
            obj = self.deployment(ns, name)
            assert obj is not None
            return self._put("apps", "deployments", ns, merge_patch(obj, patch))

    def add_capacity_buffer(
        self,
        ns: str,
        name: str,
        replicas: int = 0,
        annotations: dict[str, str] | None = None,
        pool: str | None = OWN_POOL,
        status: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create a CapacityBuffer labelled as `pool`'s (see `_pool_labels`; None: no label), with
        `replicas` (and the `status` its autoscaler would set)."""
        return self._put(
            "autoscaling.x-k8s.io",
            "capacitybuffers",
            ns,
            {
                "metadata": {
                    "name": name,
                    "annotations": dict(annotations or {}),
                    **_pool_labels(name, pool),
                },
                "spec": {"podTemplateRef": {"name": f"{name}-template"}, "replicas": replicas},
                **({"status": status} if status is not None else {}),
            },
        )  # fmt: skip

    def capacity_buffer(self, ns: str, name: str) -> dict[str, Any] | None:
        """The CapacityBuffer `name` (in `ns` when the resource is namespaced; `ns` is ignored when cluster-scoped)."""
        return self._get(
            BUFFER_GROUP,
            "capacitybuffers",
            ns if self.capacity_buffer_scope == "Namespaced" else "",
            name,
        )

    def edit_capacity_buffer(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A person's change to a CapacityBuffer: merge-patch it, bump resourceVersion."""
        with self._lock:
            obj = self.capacity_buffer(ns, name)
            assert obj is not None
            return self._put(BUFFER_GROUP, "capacitybuffers", ns, merge_patch(obj, patch))

    def add_node(
        self,
        name: str,
        cpu: str = "4",
        labels: dict[str, str] | None = None,
        unschedulable: bool = False,
        ready: bool = True,
        allocatable: dict[str, str] | None = None,
        images: int = 0,
        created: str | None = None,
        ready_since: str | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """A Node; `taints` are its `spec.taints` ({key, value, effect}); `images` adds that many `status.images` entries, as a kubelet reports them (a real
        node's object is mostly these: about 13 KB with 50 images). `created` sets its
        creationTimestamp and `ready_since` its Ready condition's lastTransitionTime (RFC 3339)."""
        resources = {"cpu": cpu, "memory": "15Gi", "pods": "110", **(allocatable or {})}
        ready_condition: dict[str, Any] = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
        }
        if ready_since or created:
            ready_condition["lastTransitionTime"] = ready_since or created
        return self._put(
            "",
            "nodes",
            "",
            {
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                    **({"creationTimestamp": created} if created else {}),
                },
                "spec": {
                    **({"unschedulable": unschedulable} if unschedulable else {}),
                    **({"taints": list(taints)} if taints else {}),
                },
                "status": {
                    "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                    "allocatable": resources,
                    "conditions": [ready_condition],
                    "images": [
                        {
                            "names": [
                                f"registry.example.com/team/image-{i}@sha256:{uuid.uuid5(uuid.NAMESPACE_OID, str(i)).hex * 2}",
                                f"registry.example.com/team/image-{i}:v1.{i}.0",
                            ],
                            "sizeBytes": 10_000_000 + i,
                        }
                        for i in range(images)
                    ],
                },
            },
        )

    def taint_node(self, name: str, key: str, value: str = "", effect: str = "NoSchedule") -> None:
        """What an autoscaler or termination handler does: add a taint to the node's spec."""
        with self._lock:
            node = self._get("", "nodes", "", name)
            assert node is not None, f"no node {name}"
            node["spec"].setdefault("taints", []).append(
                {"key": key, "effect": effect, **({"value": value} if value else {})}
            )
            self._put("", "nodes", "", node)

    def cordon_node(self, name: str, unschedulable: bool = True) -> None:
        """`kubectl cordon` (or uncordon with False)."""
        with self._lock:
            node = self._get("", "nodes", "", name)
            assert node is not None, f"no node {name}"
            node["spec"]["unschedulable"] = unschedulable
            self._put("", "nodes", "", node)

    def delete_node(self, name: str) -> None:
        """The node object is gone (the autoscaler deleted it, the instance was reclaimed)."""
        with self._lock:
            self._remove(("", "nodes", "", name))

    def add_pod(
        self,
        ns: str,
        name: str,
        node: str,
        requests: dict[str, str],
        owner_kind: str = "DaemonSet",
        phase: str = "Running",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod bound to `node`, owned by a controller of `owner_kind` (listed, not served)."""
        owner = {
            "apiVersion": "apps/v1",
            "kind": owner_kind,
            "name": name,
            "uid": str(uuid.uuid4()),
        }
        return self._put(
            "",
            "pods",
            ns,
            {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "ownerReferences": [owner],
                    **({"labels": dict(labels)} if labels else {}),
                    **({"annotations": dict(annotations)} if annotations else {}),
                },
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {"name": "main", "image": "example", "resources": {"requests": requests}}
                    ],
                },
                "status": {"phase": phase},
            },
        )

    def set_node_ready(self, name: str, ready: bool, at: str) -> dict[str, Any]:
        """The kubelet's report: the node's Ready condition flips to `ready` at `at` (RFC 3339)."""
        with self._lock:
            node = self._get("", "nodes", "", name)
            assert node is not None, f"no node {name}"
            for entry in node["status"]["conditions"]:
                if entry["type"] == "Ready" and (entry["status"] == "True") != ready:
                    entry["status"] = "True" if ready else "False"
                    entry["reason"] = "KubeletReady" if ready else "KubeletNotReady"
                    entry["lastTransitionTime"] = at
            return self._put("", "nodes", "", node)

    def add_scheduling_pod(
        self,
        ns: str,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        created: str,
        scheduled_at: str | None = None,
        ready_at: str | None = None,
        node: str | None = None,
        priority: int = 0,
    ) -> dict[str, Any]:
        """A pod as the scheduler and kubelet leave it: `PodScheduled` False (reason Unschedulable,
        since `created`) until `scheduled_at`, then True; `Ready` True from `ready_at`. A pod without
        `scheduled_at` is never scheduled (Pending, Unschedulable)."""
        scheduled = {
            "type": "PodScheduled",
            "status": "True" if scheduled_at else "False",
            "lastTransitionTime": scheduled_at or created,
        }
        if not scheduled_at:
            scheduled.update(
                reason="Unschedulable",
                message="0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
                "available: 3 No preemption victims found for incoming pod.",
            )
        conditions = [scheduled]
        if ready_at:
            conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ready_at})
        return self._put(
            "",
            "pods",
            ns,
            {
                "metadata": {
                    "name": name,
                    "labels": dict(labels or {}),
                    "creationTimestamp": created,
                },
                "spec": {
                    **({"nodeName": node} if node and scheduled_at else {}),
                    "priority": priority,
                    "containers": [{"name": "main", "image": "example"}],
                },
                "status": {
                    "phase": "Running" if ready_at else "Pending",
                    "conditions": conditions,
                },
            },
        )

    def preempt_pod(self, ns: str, name: str, at: str, event: bool = True) -> None:
        """The scheduler preempts the pod: its `DisruptionTarget` condition (reason
        PreemptionByScheduler) and, with `event`, the `Preempted` Event on it (as the scheduler
        records it: "Preempted by pod <uid> on node <node>")."""
        with self._lock:
            pod = self._get("", "pods", ns, name)
            assert pod is not None, f"no pod {ns}/{name}"
            pod["status"].setdefault("conditions", []).append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "default-scheduler: preempting to accommodate a higher priority pod",
                    "lastTransitionTime": at,
                }
            )
            pod["metadata"]["deletionTimestamp"] = at
            self._put("", "pods", ns, pod)
        if event:
            self._put(
                "",
                "events",
                ns,
                {
                    "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}"},
                    "involvedObject": {
                        "kind": "Pod",
                        "namespace": ns,
                        "name": name,
                        "uid": pod["metadata"]["uid"],
                        "apiVersion": "v1",
                    },
                    "reason": "Preempted",
                    "message": f"Preempted by pod {uuid.uuid4()} on node "
                    f"{pod['spec'].get('nodeName', 'node-1')}",
                    "type": "Normal",
                    "source": {"component": "default-scheduler"},
                    "reportingComponent": "default-scheduler",
                    "action": "Preempting",
                    "firstTimestamp": at,
                    "lastTimestamp": at,
                    "count": 1,
                },
            )

    def delete_pod(self, ns: str, name: str) -> None:
        """The pod is gone (a preempted placeholder with no grace period goes at once)."""
        with self._lock:
            self._remove(("", "pods", ns, name))

    def lease(self, ns: str, name: str) -> dict[str, Any] | None:
        return self._get("coordination.k8s.io", "leases", ns, name)

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Events created so far (core/v1 and events.k8s.io/v1), oldest first."""
        with self._lock:
            found = [
                copy.deepcopy(o)
                for (g, r, ns, _), o in self._objects.items()
                if r == "events" and (namespace is None or ns == namespace)
            ]
        return sorted(found, key=lambda o: int(o["metadata"]["resourceVersion"]))

    # -- faults and the request log ------------------------------------------------------------

    def fail(
        self,
        method: str,
        path_pattern: str,
        status: int,
        times: int | None = 1,
        message: str | None = None,
        when: Callable[[Recorded], bool] | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer the next `times` requests (None = all) matching method ('*' = any), path regex and
        the optional `when(request)` predicate with `status` and a Status body (and a `Retry-After`
        header of `retry_after` seconds when given)."""
        fault = _Fault(method.upper(), re.compile(path_pattern), status, 0.0, times, message, when)
        fault.retry_after = retry_after
        with self._lock:
            self._faults.append(fault)

    def delay(
        self,
        method: str,
        path_pattern: str,
        seconds: float,
        times: int | None = None,
        when: Callable[[Recorded], bool] | None = None,
    ) -> None:
        """Hold the answer to matching requests for `seconds`, then serve them normally."""
        with self._lock:
            self._faults.append(
                _Fault(method.upper(), re.compile(path_pattern), None, seconds, times, None, when)
            )

    def truncate(
        self,
        method: str,
        path_pattern: str,
        times: int | None = 1,
        when: Callable[[Recorded], bool] | None = None,
    ) -> None:
        """Answer the next `times` matching requests (None = all) with the first half of the JSON body
        (status 200 and a Content-Length that matches what is sent), as a broken proxy would."""
        with self._lock:
            self._truncations.append(
                _Fault(method.upper(), re.compile(path_pattern), None, 0.0, times, None, when)
            )

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._truncations.clear()

    def requests(self, method: str | None = None, path_contains: str = "") -> list[Recorded]:
        """Requests received so far, optionally filtered by method and a path substring."""
        with self._lock:
            return [
                r
                for r in self._requests
                if (method is None or r.method == method.upper()) and path_contains in r.path
            ]

    def writes(self, path_contains: str = "") -> list[Recorded]:
        """Requests that would change state (POST/PUT/PATCH/DELETE), dry-run ones included."""
        return [r for r in self.requests(path_contains=path_contains) if r.method != "GET"]

    def _take_fault(self, request: Recorded, faults: list[_Fault] | None = None) -> _Fault | None:
        with self._lock:
            for fault in self._faults if faults is None else faults:
                if (
                    fault.method in ("*", request.method)
                    and fault.pattern.search(request.path)
                    and fault.remaining != 0
                    and (fault.when is None or fault.when(request))
                ):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    return fault
        return None

    # -- request handling ----------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like the real apiserver
            timeout = 5  # idle keep-alive connections end on their own
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._open.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._open.discard(self.connection)
                with contextlib.suppress(OSError):  # the connection was cut
                    super().finish()

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                query = dict(parse_qsl(parts.query))
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                content_type = self.headers.get("Content-Type", "")
                request = Recorded(
                    self.command,
                    parts.path,
                    query,
                    body,
                    content_type,
                    time.time(),
                    self.headers.get("User-Agent", ""),
                )
                with server._lock:
                    server._requests.append(request)
                retry_after = None
                try:
                    code, answer = server._dispatch(request)
                except ApiError as err:
                    code, answer = err.code, err.status()
                    retry_after = getattr(err, "retry_after", None)
                if isinstance(answer, _WatchStream):
                    answer.send(self)
                    return
                data = json.dumps(answer).encode()
                if server._take_fault(request, server._truncations) is not None:
                    data = data[: len(data) // 2]
                with server._lock:
                    server.bytes_sent += len(data)
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if retry_after is not None:
                        self.send_header("Retry-After", str(retry_after))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before the slow answer came

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        return Handler

    def _dispatch(self, request: Recorded) -> tuple[int, Any]:
        method, path, query, body, content_type = (
            request.method,
            request.path,
            request.query,
            request.body,
            request.content_type,
        )
        discovery = self._discovery(path.rstrip("/")) if method == "GET" else None
        if discovery is not None:
            fault = self._take_fault(request)
            if fault is not None and fault.delay:
                self._stopping.wait(fault.delay)
            if fault is not None and fault.status is not None:
                raise ApiError(
                    fault.status,
                    fault.message
                    or f"Internal error occurred: injected fault {fault.status} for GET {path}",
                )
            return 200, discovery
        m = _PATH.match(path)
        if m is None:
            raise ApiError(404, "the server could not find the requested resource")
        if method == "POST" and m["resource"] in ("tokenreviews", "subjectaccessreviews"):
            return self._faulted_review(request, m["resource"], body)
        group = m["group"] or ""
        route = _Route(
            group,
            m["core"] or m["version"],
            m["ns"],
            m["resource"],
            m["name"],
            m["sub"],
            method,
            query,
        )
        fault = self._take_fault(request)
        if fault is not None:
            if fault.delay:
                self._stopping.wait(fault.delay)
            if fault.status is not None:
                error = ApiError(
                    fault.status,
                    fault.message or self._fault_message(route, fault.status),
                    route.details(),
                )
                error.retry_after = fault.retry_after
                raise error
        known = _KINDS.get((group, route.resource))
        if known is None or (
            route.resource == "capacitybuffers" and not self._serves_buffers(route)
        ):
            raise ApiError(404, "the server could not find the requested resource")
        if query.get("dryRun") not in (None, "All"):
            raise ApiError(
                400, f"invalid dry run option {query['dryRun']!r}; only 'All' is supported"
            )
        with self._lock:
            if route.sub == "scale" and route.resource == "deployments":
                return self._scale(route, body)
            if route.sub is not None:
                raise ApiError(404, "the server could not find the requested resource")
            if route.name is None:
                return self._collection(route, body)
            return self._object(route, body, content_type)

    def _faulted_review(self, request: Recorded, resource: str, body: Any) -> tuple[int, Any]:
        """A review's answer after its injected fault (a delay, a failure) if any."""
        fault = self._take_fault(request)
        if fault is not None and fault.delay:
            self._stopping.wait(fault.delay)
        if fault is not None and fault.status is not None:
            raise ApiError(fault.status, fault.message or f"injected fault {fault.status}")
        return 201, self._review(resource, body)

    def _review(self, resource: str, body: Any) -> dict[str, Any]:
        """A TokenReview (is the token one of `tokens`?) or a SubjectAccessReview (may the user or
        one of its groups `get` the non-resource path, by `non_resource_grants`?), answered."""
        spec = (body or {}).get("spec") or {}
        if resource == "tokenreviews":
            user = self.tokens.get(spec.get("token", ""))
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
            return {**body, "status": status}
        attributes = spec.get("nonResourceAttributes") or {}
        subjects = [spec.get("user", ""), *(spec.get("groups") or ())]
        path, verb = attributes.get("path"), attributes.get("verb")
        allowed = verb == "get" and any((s, path) in self.non_resource_grants for s in subjects)
        reason = "allowed by the test's grants" if allowed else ""
        return {**body, "status": {"allowed": allowed, "reason": reason}}

    def _serves_buffers(self, route: _Route) -> bool:
        """capacitybuffers exist at this path: a served version, and the path of the resource's scope."""
        return route.version in self.capacity_buffer_versions and (route.namespace is not None) == (
            self.capacity_buffer_scope == "Namespaced"
        )

    def _group_resources(self) -> dict[str, tuple[tuple[str, ...], list[tuple[str, str, bool]]]]:
        groups = dict(_DISCOVERY)
        if self.buffer_group_versions:
            groups[BUFFER_GROUP] = (self.buffer_group_versions, [])
        return groups

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """The discovery documents: None when `path` is not one, a 404 for a group or version not served."""
        parts = path.split("/")[1:]
        if not parts or parts[0] != "apis" or len(parts) > 3:
            return None
        groups = self._group_resources()
        if len(parts) == 1:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._api_group(g, v) for g, (v, _) in groups.items()],
            }
        if parts[1] not in groups or (len(parts) == 3 and parts[2] not in groups[parts[1]][0]):
            raise ApiError(404, "the server could not find the requested resource")
        if len(parts) == 2:
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                **self._api_group(parts[1], groups[parts[1]][0]),
            }
        group, version = parts[1], parts[2]
        resources = list(groups[group][1])
        if group == BUFFER_GROUP:
            if version in self.capacity_buffer_versions:
                namespaced = self.capacity_buffer_scope == "Namespaced"
                resources += [
                    ("capacitybuffers", "CapacityBuffer", namespaced),
                    ("capacitybuffers/status", "CapacityBuffer", namespaced),
                ]
            if self.provisioning_requests and version in ("v1", "v1beta1"):
                resources += [("provisioningrequests", "ProvisioningRequest", True)]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": [
                {
                    "name": name,
                    "singularName": "" if "/" in name else kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": ["get", "patch", "update"]
                    if "/" in name
                    else ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
                for name, kind, namespaced in resources
            ],
        }

    def _api_group(self, group: str, versions: tuple[str, ...]) -> dict[str, Any]:
        preferred = self.preferred_version if group == BUFFER_GROUP else versions[0]
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "name": group,
            "versions": listed,
            "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
        }

    @staticmethod
    def _fault_message(route: _Route, status: int) -> str:
        what = f'{route.qualified} "{route.name}"' if route.name else route.qualified
        if status == 403:
            resource = route.resource + (f"/{route.sub}" if route.sub else "")
            verb = (
                ("watch" if _is_watch(route.query) else "list")
                if route.method == "GET" and route.name is None
                else _VERBS.get(route.method, "get")
            )
            where = (
                f' in the namespace "{route.namespace}"'
                if route.namespace
                else " at the cluster scope"
            )
            return (
                f'{what} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource "{resource}" '
                f'in API group "{route.group}"{where}'
            )
        if status == 404:
            return f"{what} not found"
        if status == 409:
            return (
                f"Operation cannot be fulfilled on {what}: the object has been modified; "
                "please apply your changes to the latest version and try again"
            )
        return f"Internal error occurred: injected fault {status} for {route.method} {what}"

    def _key(self, route: _Route, name: str | None = None) -> tuple[str, str, str, str]:
        return (route.group, route.resource, route.namespace or "", name or route.name or "")

    def _existing(self, route: _Route) -> dict[str, Any]:
        obj = self._objects.get(self._key(route))
        if obj is None:
            raise ApiError(404, f'{route.qualified} "{route.name}" not found', route.details())
        return obj

    def _check_version(
        self, route: _Route, current: dict[str, Any], new_meta: dict[str, Any] | None
    ) -> None:
        wanted = (new_meta or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, self._fault_message(route, 409), route.details())

    def _commit(self, route: _Route, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` with a new resourceVersion unless this is a dry run; return what was stored."""
        if route.query.get("dryRun") == "All":
            return copy.deepcopy(obj)
        return self._put(route.group, route.resource, route.namespace or "", copy.deepcopy(obj))

    def _object(self, route: _Route, body: Any, content_type: str) -> tuple[int, Any]:
        code, answer = self._object_verb(route, body, content_type)
        if route.resource == "capacitybuffers" and answer.get("kind") == "CapacityBuffer":
            answer["apiVersion"] = (
                f"{BUFFER_GROUP}/{route.version}"  # one stored object, served in every version
            )
        return code, answer

    def _object_verb(self, route: _Route, body: Any, content_type: str) -> tuple[int, Any]:
        if route.method == "GET":
            return 200, copy.deepcopy(self._existing(route))
        if route.method == "DELETE":
            self._existing(route)
            if route.query.get("dryRun") != "All":
                self._remove(self._key(route))
            return 200, {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Success",
                "details": route.details(),
            }
        if route.method == "PUT":
            current = self._existing(route)
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request was not a JSON object")
            self._check_version(route, current, body.get("metadata"))
            new = copy.deepcopy(body)
            new.setdefault("metadata", {})
            for keep in ("uid", "creationTimestamp"):
                new["metadata"][keep] = current["metadata"][keep]
            new["metadata"]["name"] = route.name
            return 200, self._commit(route, new)
        if route.method == "PATCH":
            current = self._existing(route)
            self._check_patch(route, body, content_type)
            self._check_version(route, current, body.get("metadata"))
            return 200, self._commit(route, merge_patch(current, body))
        raise ApiError(405, f"{route.method} is not supported on {route.qualified}")

    def _check_patch(self, route: _Route, body: Any, content_type: str) -> None:
        kind = content_type.split(";")[0].strip()
        if kind == "application/strategic-merge-patch+json" and route.resource == "capacitybuffers":
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            raise ApiError(415, f"this test server only understands merge patches, not {kind!r}")
        if not isinstance(body, dict):
            raise ApiError(400, "the patch body is not a JSON object")

    def _collection(self, route: _Route, body: Any) -> tuple[int, Any]:
        kind, api_version, _ = _KINDS[(route.group, route.resource)]
        if route.method == "POST":
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request was not a JSON object")
            meta = body.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            if not meta.get("name"):
                raise ApiError(422, f"{kind} is invalid: metadata.name: Required value")
            involved = (body.get("involvedObject") or {}).get("namespace") or ""
            if (
                route.resource == "events"
                and not route.group
                and not body.get("eventTime")
                and (
                    involved != (route.namespace or "")
                    if involved
                    else (route.namespace or "") not in ("", "default")
                )
            ):
                raise ApiError(
                    422,
                    f'Event "{meta["name"]}" is invalid: involvedObject.namespace: Invalid value: '
                    f'"{involved}": does not match event.namespace',
                )
            if meta.get("resourceVersion"):
                raise ApiError(400, "resourceVersion should not be set on objects to be created")
            if self._key(route, meta["name"]) in self._objects:
                raise ApiError(
                    409,
                    f'{route.qualified} "{meta["name"]}" already exists',
                    {**route.details(), "name": meta["name"]},
                )
            return 201, self._commit(route, body)
        if route.method != "GET":
            raise ApiError(
                405, f"{route.method} is not supported on the {route.qualified} collection"
            )
        selector = route.query.get("labelSelector", "")
        fields = route.query.get("fieldSelector", "")
        if _is_watch(route.query):
            return 200, _WatchStream(self, route, kind, api_version)
        items = sorted(
            (
                copy.deepcopy(o)
                for (g, r, ns, _), o in self._objects.items()
                if g == route.group
                and r == route.resource
                and (route.namespace in (None, ns))
                and _matches(o["metadata"].get("labels") or {}, selector)
                and _fields_match(o, fields)
            ),
            key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
        )
        start = int(route.query.get("continue") or 0)
        limit = int(route.query.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self._next_rv())}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return 200, {
            "kind": f"{kind}List",
            "apiVersion": api_version,
            "metadata": meta,
            "items": page,
        }

    def _scale(self, route: _Route, body: Any) -> tuple[int, Any]:
        """The scale subresource: an autoscaling/v1 Scale view of the Deployment's replicas."""
        deployment = self._existing(route)
        view = self._scale_view(deployment)
        if route.method == "GET":
            return 200, view
        if route.method not in ("PATCH", "PUT"):
            raise ApiError(405, f"{route.method} is not supported on deployments/scale")
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was not a JSON object")
        self._check_version(route, deployment, body.get("metadata"))
        new_view = merge_patch(view, body) if route.method == "PATCH" else body
        replicas = (new_view.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(
                422,
                f'Scale.autoscaling "{route.name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas!r}: must be greater than or equal to 0",
            )
        updated = copy.deepcopy(deployment)
        updated["spec"]["replicas"] = replicas
        if route.query.get("dryRun") != "All" and replicas != deployment["spec"]["replicas"]:
            updated["metadata"]["generation"] = deployment["metadata"].get("generation", 1) + 1
            updated = self._commit(route, updated)
        elif route.query.get("dryRun") != "All":
            updated = deployment  # no change: the apiserver does not bump resourceVersion
        return 200, self._scale_view(updated)

    @staticmethod
    def _scale_view(deployment: dict[str, Any]) -> dict[str, Any]:
        meta = deployment["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            },
            "spec": {"replicas": deployment["spec"]["replicas"]},
            "status": {
                "replicas": deployment["status"].get("replicas", 0),
                "selector": ",".join(
                    f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
                ),
            },
        }


def _is_watch(query: dict[str, str]) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


class _WatchStream:
    """One watch request's answer: chunked JSON lines of the changes after its resourceVersion."""

    def __init__(self, server: FakeApiServer, route: _Route, kind: str, api_version: str) -> None:
        self.server, self.route, self.kind, self.api_version = server, route, kind, api_version
        query = route.query
        self.labels, self.fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        self.since = int(query.get("resourceVersion") or 0)
        self.bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        self.ends = time.monotonic() + float(query.get("timeoutSeconds") or 1800)

    def _matches(self, obj: Any) -> bool:
        return (
            obj is not None
            and _matches(obj["metadata"].get("labels") or {}, self.labels)
            and _fields_match(obj, self.fields)
        )

    def _mine(self, key: tuple[str, str, str, str]) -> bool:
        group, resource, ns, _ = key
        return (group, resource) == (self.route.group, self.route.resource) and (
            self.route.namespace in (None, ns)
        )

    def _event(self, rv: int, old: Any, new: Any) -> dict[str, Any] | None:
        """The event a filtered watch sends for one change (None: the change is not its business)."""
        was, now = self._matches(old), self._matches(new)
        if was and now:
            return {"type": "MODIFIED", "object": new}
        if now:
            return {"type": "ADDED", "object": new}
        if was:
            gone = copy.deepcopy(new if new is not None else old)
            if new is None:  # a deletion carries the version it was deleted at
                gone["metadata"]["resourceVersion"] = str(rv)
            return {"type": "DELETED", "object": gone}
        return None

    def _write(self, handler: BaseHTTPRequestHandler, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()
        with self.server._lock:
            self.server.bytes_sent += len(data)

    def send(self, handler: BaseHTTPRequestHandler) -> None:
        """Stream the events to `handler` until the timeout, the server's stop or the client's leaving."""
        server = self.server
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.flush()
        with server._lock:
            hang = server._hangs > 0
            server._hangs -= 1 if hang else 0
        try:
            if hang:
                server._stopping.wait()
                return
            self._stream(handler)
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client stopped watching

    def _stream(self, handler: BaseHTTPRequestHandler) -> None:
        server = self.server
        if self.since and self.since < server._compacted:
            status = ApiError(
                410, f"too old resource version: {self.since} ({server._compacted})"
            ).status()
            self._write(handler, {"type": "ERROR", "object": {**status, "reason": "Expired"}})
            return
        with server._lock:
            seen = next(
                (i for i, (rv, *_) in enumerate(server._history) if rv > self.since),
                len(server._history),
            )
        next_bookmark = time.monotonic() + (server.bookmark_every or 0)
        while time.monotonic() < self.ends and not server._stopping.is_set():
            with server._lock:
                if len(server._history) == seen:
                    server._changed.wait(0.05)
                changes, seen = server._history[seen:], len(server._history)
                mark = server._last_rv
            for rv, key, old, new in changes:
                event = self._event(rv, old, new) if self._mine(key) else None
                if event is not None:
                    self._write(handler, event)
            if self.bookmarks and server.bookmark_every and time.monotonic() >= next_bookmark:
                next_bookmark = time.monotonic() + server.bookmark_every
                meta = {"resourceVersion": str(mark)}
                self._write(
                    handler,
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": self.kind,
                            "apiVersion": self.api_version,
                            "metadata": meta,
                        },
                    },
                )
