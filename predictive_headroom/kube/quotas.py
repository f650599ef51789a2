"""The quota cap's cluster read: a namespace's ResourceQuotas and the pool's own placeholder pods.

What is kept of a ResourceQuota (`quota_seen`): its name, `status.hard` and `status.used` as
amounts (`spec.hard` before the quota controller filled the status), its `scopes` and its
`scopeSelector` expressions; of a placeholder pod (`placeholder_pod`): its name and
PriorityClass. `quota_room` puts them together for `core.quota` (the placeholders counted in
`used`, the PriorityClass they run at); `list_quota_room` lists both, for the daemon without
watch caches and while a cache cannot answer (`kube.watched.WatchedPodReader.quota_room`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from predictive_headroom.core.context import QuotaRoom, QuotaSeen
from predictive_headroom.kube.api import CallOptions, _Op
from predictive_headroom.kube.cluster import list_items
from predictive_headroom.kube.quantity import amounts
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.target import POOL_LABEL
from predictive_headroom.protocols import ActuatorError

logger = logging.getLogger(__name__)

PAGE = 500
"""Items a list page holds."""

OWN_PODS = "status.phase!=Failed,status.phase!=Succeeded"
"""The pods a quota counts (not ended). Written apart from `kube.pods.LIVE_PODS` (same meaning)
so an adopted Deployment's pods get their own cache, of what this module keeps of a pod."""


def quota_seen(quota: dict[str, Any]) -> QuotaSeen | None:
    """What the quota cap reads of one ResourceQuota's JSON (None without a name); an amount that
    is not a quantity is left out (logged)."""
    meta, spec, status = (quota.get(k) or {} for k in ("metadata", "spec", "status"))
    name = meta.get("name")
    if not name:
        return None
    hard, bad = amounts("status.hard", status.get("hard") or spec.get("hard") or {})
    used, bad_used = amounts("status.used", status.get("used") or {})
    for problem in bad + bad_used:
        logger.warning("ResourceQuota %s: %s (left out)", name, problem)
    selector = tuple(
        (str(e.get("scopeName", "")), str(e.get("operator", "")), tuple(e.get("values") or ()))
        for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or ()
    )
    return QuotaSeen(str(name), dict(hard), dict(used), tuple(spec.get("scopes") or ()), selector)


def placeholder_pod(pod: dict[str, Any]) -> tuple[str, str | None] | None:
    """(name, PriorityClass) of one pod's JSON (None without a name)."""
    name = (pod.get("metadata") or {}).get("name")
    if not name:
        return None
    return str(name), (pod.get("spec") or {}).get("priorityClassName") or None


def own_selector(pool: Pool) -> str:
    """The label selector of `pool`'s placeholder pods (none for an adopted Deployment)."""
    return "" if pool.placeholder.existing else f"{POOL_LABEL}={pool.name}"


def quota_room(
    pool: Pool, quotas: Iterable[QuotaSeen], pods: Iterable[tuple[str, str | None]]
) -> QuotaRoom:
    """The room for `pool` from its namespace's `quotas` and the pods `own_selector` lists (an
    adopted Deployment's told by name: `<deployment>-<hash>-<5 characters>`)."""
    if pool.placeholder.existing:
        owned = re.compile(rf"^{re.escape(pool.target.name)}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}$")
        pods = [p for p in pods if owned.match(p[0])]
    own = list(pods)
    priority = next((p[1] for p in own if p[1]), None)
    return QuotaRoom(tuple(quotas), len(own), priority)


def list_quota_room(core: Any, options: CallOptions, pool: Pool) -> QuotaRoom:
    """`quota_room` from a list of the namespace's ResourceQuotas and of the pool's live pods
    (`core`: a `CoreV1Api`); a 403 names the missing permission."""
    ns = pool.target.namespace
    op = _Op("list", "resourcequotas", "", "ResourceQuota", ns, "", pool.name)
    items = list_items(
        op, options, core.list_namespaced_resource_quota, ActuatorError, PAGE, namespace=ns
    )
    seen = [q for q in map(quota_seen, items) if q is not None]
    if not seen:  # no quota in the namespace: its own pods count for nothing, so not listed
        return quota_room(pool, seen, ())
    pod_op = _Op("list", "pods", "", "Pod", ns, own_selector(pool), pool.name)
    pods = list_items(
        pod_op,
        options,
        core.list_namespaced_pod,
        ActuatorError,
        PAGE,
        namespace=ns,
        label_selector=own_selector(pool) or None,
        field_selector=OWN_PODS,
    )
    return quota_room(pool, seen, (p for p in map(placeholder_pod, pods) if p is not None))
