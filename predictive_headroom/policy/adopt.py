"""Adopting a placeholder Deployment that exists already (`placeholder.existing: true`).

The daemon takes such a Deployment over as it is: it writes only its `/scale`, never its selector
or pod template. Before that it checks that the Deployment is a placeholder at all: every container
runs a pause image and its pods run under a PriorityClass below 0 (so the scheduler preempts them
first). `PodTemplate` is what the daemon read of it; `pause_problem` says, purely, why it is not a
placeholder, naming what was found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from predictive_headroom.policy.target import Target

PAUSE_REPOSITORY = re.compile(r"^([a-z0-9._]+-)?pause(-[a-z0-9._]+)?$")
"""The last path part of a pause image's repository: `pause` (registry.k8s.io/pause and its
mirrors), `pause-amd64` (the old per-architecture images), `mirrored-pause` (Rancher's mirror)."""


@dataclass(frozen=True)
class PodTemplate:
    """What a Deployment's pods run, as its pod template says, and the value of their
    PriorityClass as read from the API server."""

    containers: tuple[tuple[str, str], ...]
    """(name, image) of every container and init container."""
    priority_class: str | None
    """`spec.template.spec.priorityClassName` (None: unset)."""
    priority: int | None = None
    """That class's value (None: not read, see `priority_unread`)."""
    priority_unread: str | None = None
    """Why the class's value could not be read (the API error), when it could not."""
    requests: tuple[tuple[str, float], ...] = ()
    """What one pod requests, summed over its containers (cores for cpu, bytes for memory),
    sorted by resource; zero requests left out."""


def is_pause_image(image: str) -> bool:
    """True when `image` (`[registry/]path/name[:tag][@digest]`) names a pause image. Pure."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return PAUSE_REPOSITORY.match(last.split(":", 1)[0]) is not None


def pause_problem(target: Target, pool: str, template: PodTemplate) -> str | None:
    """None when `template` is a placeholder's (pause containers only, a PriorityClass below 0);
    else why the pool's existing Deployment is refused, naming what was found and what to do.
    Pure."""
    found = []
    others = [
        f"{name} runs {image}" for name, image in template.containers if not is_pause_image(image)
    ]
    if not template.containers:
        found.append("its pod template has no containers")
    if others:
        found.append(f"container {', '.join(others)} (not a pause image)")
    if template.priority_class is None:
        found.append(
            "its pods name no priorityClassName (they run at the default priority, so the "
            "scheduler would not preempt them for real pods)"
        )
    elif template.priority is not None and template.priority >= 0:
        found.append(
            f"its PriorityClass {template.priority_class} has value {template.priority}, not "
            "below 0 (real pods would not preempt its pods)"
        )
    unread = _unread_class(template)
    if unread and not found:
        return (
            f"pool {pool}: Deployment {target.namespace}/{target.name} (placeholder.existing) "
            f"cannot be checked: {unread}; refused, never written until it can be"
        )
    if unread:
        found.append(unread)
    if not found:
        return None
    return (
        f"pool {pool}: Deployment {target.namespace}/{target.name} (placeholder.existing) is not a "
        f"pause placeholder: {'; '.join(found)}; refused, never written. Point target at the "
        "placeholder Deployment (pause containers, a PriorityClass below 0)"
    )


def _unread_class(template: PodTemplate) -> str | None:
    """Why the pods' PriorityClass could not be checked, and for a refused read which permission
    the daemon lacks and how the chart grants it; None when it was read (or none is named)."""
    name, unread = template.priority_class, template.priority_unread
    if name is None or unread is None:
        return None
    grant = (
        f" (the chart grants it with priorityClass: {{create: false, name: {name}}})"
        if unread.startswith("forbidden")
        else ""
    )
    return (
        f"its PriorityClass {name} could not be read ({unread}){grant}, so whether its pods are "
        "preempted first is not known"
    )


def requests_mismatch(pool: str, requested: dict[str, float], template: PodTemplate) -> str | None:
    """None when the pool's `placeholder.requests` (`requested`, as `Placeholder.amounts`) say
    what the adopted pods request; else a warning naming both: the daemon prices headroom and
    counts shares with the policy's. Pure."""
    found = dict(template.requests)
    differ = sorted(
        name
        for name in set(requested) | set(found)
        if abs(requested.get(name, 0.0) - found.get(name, 0.0))
        > 1e-9 * max(1.0, found.get(name, 0.0))
    )
    if not differ:
        return None

    def said(amounts: dict[str, float]) -> str:
        return ", ".join(f"{n} {amounts[n]:g}" for n in differ if n in amounts) or "nothing"

    return (
        f"pool {pool}: placeholder.requests say {said(requested)}, the adopted Deployment's pods "
        f"request {said(found)} (cpu in cores, memory in bytes): the cost of headroom and any "
        "share: are counted with placeholder.requests; set them to what the pods request"
    )
