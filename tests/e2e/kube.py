"""Small helpers over the `kubernetes` client for the e2e tier: server-side apply with strict field
validation (what `kubectl apply --server-side --validate=strict` sends), a ServiceAccount token by
the TokenRequest API, and a kubeconfig holding it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes.client
import yaml
from cluster import kubeconfig
from kubernetes.client import ApiClient, ApiException

FIELD_MANAGER = "predictive-headroom-e2e"
T = TypeVar("T")
Object = dict[str, Any]


class Kube:
    """Apply and read arbitrary objects by apiVersion and kind, through API discovery."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def resource(self, api_version: str, kind: str, refresh: bool = False) -> tuple[str, bool]:
        """(plural, namespaced) of `kind` in `api_version`, from the server's discovery."""
        if refresh or api_version not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            found = self.call("GET", base)
            self._resources[api_version] = {
                r["kind"]: (r["name"], r["namespaced"])
                for r in found.get("resources", [])
                if "/" not in r["name"]
            }
        try:
            return self._resources[api_version][kind]
        except KeyError:
            raise LookupError(f"the API server serves no {kind} in {api_version}") from None

    def path(self, obj: Object, namespace: str | None = None) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        meta = obj["metadata"]
        if namespaced:
            ns = meta.get("namespace") or namespace
            if not ns:
                raise ValueError(f"{kind} {meta['name']} needs a namespace")
            return f"{base}/namespaces/{ns}/{plural}/{meta['name']}"
        return f"{base}/{plural}/{meta['name']}"

    def raw(
        self, method: str, path: str, body: str | None = None,
        query: list[tuple[str, str]] | None = None, content_type: str = "application/json",
    ) -> bytes:  # fmt: skip
        """One request with the client's credentials; the answer's bytes (ApiException when it
        is not 2xx)."""
        method, url, headers, data, post = self.api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(method, url, headers, body if body is not None else data, post)
        response.read()
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        return bytes(response.data or b"")

    def call(
        self, method: str, path: str, body: str | None = None,
        query: list[tuple[str, str]] | None = None, content_type: str = "application/json",
    ) -> Any:  # fmt: skip
        """`raw`, decoded from JSON."""
        return json.loads(self.raw(method, path, body, query, content_type) or b"null")

    def apply(self, obj: Object, namespace: str | None = None) -> Object:
        """Server-side apply `obj` with fieldValidation=Strict (an unknown or duplicate field
        is an error, not a warning)."""
        obj = dict(obj)
        if namespace and not obj["metadata"].get("namespace"):
            _, namespaced = self.resource(obj["apiVersion"], obj["kind"])
            if namespaced:
                obj["metadata"] = {**obj["metadata"], "namespace": namespace}
        return self.call(
            "PATCH",
            self.path(obj, namespace),
            body=json.dumps(obj),
            query=[
                ("fieldManager", FIELD_MANAGER),
                ("fieldValidation", "Strict"),
                ("force", "true"),
            ],
            content_type="application/apply-patch+yaml",
        )

    def get(self, obj: Object) -> Object | None:
        try:
            return self.call("GET", self.path(obj))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


def ensure_namespace(api: ApiClient, name: str) -> None:
    core = kubernetes.client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    wait_for(
        lambda: _has_default_sa(core, name), 60, f"the default ServiceAccount of namespace {name}"
    )


def _has_default_sa(core: Any, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def token_kubeconfig(
    api: ApiClient, server: str, ca: Path, namespace: str, service_account: str, out: Path,
    seconds: int = 3600,
) -> Path:  # fmt: skip
    """A kubeconfig whose user is `service_account`'s token from the TokenRequest API."""
    core = kubernetes.client.CoreV1Api(api)
    request = {"spec": {"expirationSeconds": seconds}}
    token = core.create_namespaced_service_account_token(service_account, namespace, request)
    config = kubeconfig(server, ca, {"token": token.status.token}, name=service_account)
    out.write_text(yaml.safe_dump(config))
    return out


def wait_for(check: Callable[[], T], timeout: float, what: str, every: float = 0.25) -> T:
    """Poll `check` until it returns something truthy; AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
