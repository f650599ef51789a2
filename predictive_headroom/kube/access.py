"""Who may read the daemon's HTTP port, asked of the API server as kube-rbac-proxy and
controller-runtime's secure metrics serving do: a TokenReview for the bearer token, then a
SubjectAccessReview for `get` on the request's path as a non-resource URL. Read-only for the
cluster (both reviews are created and answered, never stored); the daemon's ServiceAccount needs
`create` on tokenreviews and subjectaccessreviews (the ClusterRole `system:auth-delegator` has
exactly these)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient

from predictive_headroom.kube.api import CallOptions, _call, _Op
from predictive_headroom.protocols import AccessReviewError, ActuatorError, Caller

REVIEW_OPTIONS = CallOptions(timeout=2.0, attempts=2, backoff_initial=0.2, backoff_max=1.0)
"""A reader waits for the answer: 2 s a try, one retry (a review the API server has not answered
in 2 s is not worth holding a review thread for)."""


class KubeAccessReviewer:
    """TokenReview and SubjectAccessReview through the daemon's API client (`AccessReviewer`)."""

    def __init__(self, api_client: ApiClient, options: CallOptions = REVIEW_OPTIONS) -> None:
        self.options = options
        self._authn = kubernetes.client.AuthenticationV1Api(api_client)
        self._authz = kubernetes.client.AuthorizationV1Api(api_client)

    def authenticate(self, token: str) -> Caller | None:
        """The caller holding `token`, None when the API server does not authenticate it."""
        body = kubernetes.client.V1TokenReview(
            spec=kubernetes.client.V1TokenReviewSpec(token=token)
        )
        op = _Op("create", "tokenreviews", "authentication.k8s.io", "TokenReview", "", "", "")
        answer = self._ask(op, self._authn.create_token_review, body)
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return None
        user = status.user
        extra = tuple(sorted((k, tuple(v or ())) for k, v in (user.extra or {}).items()))
        return Caller(user.username or "", user.uid or "", tuple(user.groups or ()), extra)

    def authorize(self, caller: Caller, path: str) -> tuple[bool, str]:
        """Whether `caller` may `get` the non-resource URL `path`, and the API server's reason."""
        spec = kubernetes.client.V1SubjectAccessReviewSpec(
            user=caller.user,
            uid=caller.uid or None,
            groups=list(caller.groups) or None,
            extra={k: list(v) for k, v in caller.extra} or None,
            non_resource_attributes=kubernetes.client.V1NonResourceAttributes(
                path=path, verb="get"
            ),
        )
        body = kubernetes.client.V1SubjectAccessReview(spec=spec)
        op = _Op(
            "create",
            "subjectaccessreviews",
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            "",
            "",
        )
        answer = self._ask(op, self._authz.create_subject_access_review, body)
        status = answer.status
        return bool(status and status.allowed), (status.reason or "") if status else ""

    def _ask(self, op: _Op, fn: Callable[..., Any], body: object) -> Any:
        """One review, with the call options' timeout and retry; AccessReviewError when it fails."""
        try:
            return _call(op, self.options, fn, body=body)
        except ActuatorError as exc:
            raise AccessReviewError(str(exc)) from exc
