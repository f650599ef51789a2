"""The object whose replica count the daemon sets (`Target`), and the API versions of it this code
knows how to write.

A Deployment is always `apps/v1`. A CapacityBuffer (`autoscaling.x-k8s.io`) is served as `v1alpha1`
(Cluster Autoscaler 1.34) and `v1beta1` (Cluster Autoscaler 1.35, Karpenter 1.14); `v1` does not
exist yet and is accepted for when it does, as `spec.replicas` is expected to keep its meaning.
Which one a cluster serves is found by API discovery at start (see `kube.discovery`), unless
`target.apiVersion` pins one.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from predictive_headroom.policy.echo import cut

CAPACITY_BUFFER_GROUP = "autoscaling.x-k8s.io"
CAPACITY_BUFFER_PLURAL = "capacitybuffers"
CAPACITY_BUFFER_VERSIONS = ("v1", "v1beta1", "v1alpha1")
"""The CapacityBuffer versions this code reads and writes (`spec.replicas`), newest first (`v1`
is not published yet)."""
BUFFER_LIMITS_VERSIONS = ("v1", "v1beta1", "v1alpha1")
"""The CapacityBuffer versions whose spec has `limits` (total requests the buffer's chunks stay
within), where the daemon also writes a pool's `limits:`; a version without it is left out here."""

POOL_LABEL = "predictive-headroom.io/pool"
"""The label that makes an object a pool's own: the daemon writes only targets carrying
`predictive-headroom.io/pool: <pool name>` (the chart and the kustomize bases set it)."""
REFUSED_NAMESPACES = ("kube-system",)
"""Namespaces no target may be in: the cluster's own components live there."""

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class Target(BaseModel):
    """The object whose replica count the daemon sets."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        allow_inf_nan=False,
    )

    kind: Literal["Deployment", "CapacityBuffer"] = "Deployment"
    namespace: str = Field(pattern=DNS_LABEL.pattern, description="namespace of the target")
    name: str = Field(
        pattern=DNS_SUBDOMAIN.pattern, description="name of the Deployment or CapacityBuffer"
    )
    api_version: str | None = Field(
        default=None,
        json_schema_extra={
            "enum": ["apps/v1", *(f"{CAPACITY_BUFFER_GROUP}/{v}" for v in CAPACITY_BUFFER_VERSIONS)]
        },
        description=(
            "CapacityBuffer only: pin one API version (e.g. autoscaling.x-k8s.io/v1beta1); "
            "unset = the server's preferred version among the supported ones"
        ),
    )

    @field_validator("namespace")
    @classmethod
    def _not_refused(cls, value: str) -> str:
        if value in REFUSED_NAMESPACES:
            raise ValueError(
                f"{value!r}: targets in {value} are refused (the cluster's own components live "
                "there); put the placeholder Deployment or CapacityBuffer in a namespace of its own"
            )
        return value

    @field_validator("api_version")
    @classmethod
    def _known_api_version(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if info.data.get("kind", "Deployment") == "Deployment":
            if value != "apps/v1":
                raise ValueError(
                    f"{value!r}: a Deployment is written through apps/v1; remove target.apiVersion "
                    "(it only chooses a CapacityBuffer version)"
                )
            return value
        supported = [f"{CAPACITY_BUFFER_GROUP}/{v}" for v in CAPACITY_BUFFER_VERSIONS]
        if value not in supported:
            raise ValueError(
                f"{value!r} is not a CapacityBuffer version this daemon supports; use one of "
                f"{', '.join(supported)}, or leave it unset to use the server's preferred one"
            )
        return value

    @property
    def pinned_version(self) -> str | None:
        """The CapacityBuffer version pinned by `apiVersion` (e.g. 'v1beta1'), else None."""
        if self.kind != "CapacityBuffer" or self.api_version is None:
            return None
        return self.api_version.rpartition("/")[2]


def adopt_command(target: Target, pool: str) -> str:
    """The command that makes `target` pool `pool`'s own (its pool label). Pure."""
    return (
        f"kubectl label {target.kind.lower()} -n {target.namespace} {target.name} "
        f"{POOL_LABEL}={pool} --overwrite"
    )


def ownership_problem(target: Target, pool: str, label: str | None) -> str | None:
    """None when the object `target` names, whose `predictive-headroom.io/pool` label is `label`
    (None: no such label), is pool `pool`'s own; else why it is not, naming the object, the label
    and how to adopt it. Pure."""
    if label == pool:
        return None
    found = "has no such label" if label is None else f"has {POOL_LABEL}={cut(label)}"
    return (
        f"pool {pool}: {target.kind} {target.namespace}/{target.name} is not this pool's: it lacks "
        f"the label {POOL_LABEL}={pool} (it {found}); refused, never written. If it is a "
        f"placeholder for this pool, adopt it: {adopt_command(target, pool)}"
    )
