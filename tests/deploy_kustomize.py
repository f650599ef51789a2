"""A small kustomize renderer for the features deploy/kustomize uses, for machines without kustomize.

Supported kustomization fields: `resources` (files and directories), `configMapGenerator` (files,
`behavior: create|replace`, `options.labels`, the name hash suffix computed as kustomize v5 does,
and references rewritten in pod templates), `patches` (inline RFC 6902 JSON patches selected by
kind/name, and a strategic-merge `$patch: delete` that removes the objects selected) and `images`. Anything else raises `UnsupportedKustomization`, so the loader never
silently renders something different from `kubectl kustomize`; tests compare the two when a
kustomize binary is present.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "configMapGenerator", "patches", "images"}
Object = dict[str, Any]


class UnsupportedKustomization(ValueError):
    """The kustomization uses a feature this loader does not implement."""


@dataclass
class _Build:
    objects: list[Object] = field(default_factory=list)
    generated: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name) of ConfigMaps


def kustomize_hash(configmap: Object) -> str:
    """The 10-character name suffix kustomize v5 derives from a ConfigMap's data.

    kustomize hashes the JSON of {kind, name, data}; v5 looks the name up with a path that never
    matches, so the name it hashes is always empty.
    """
    encoded = json.dumps(
        {"kind": "ConfigMap", "name": "", "data": configmap.get("data", {})},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    # Go's json.Marshal escapes these three for HTML safety.
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def _load_yaml_docs(path: Path) -> list[Object]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def _generate_configmap(root: Path, spec: Object) -> Object:
    unknown = set(spec) - {"name", "namespace", "files", "behavior", "options"}
    if unknown:
        raise UnsupportedKustomization(f"{root}: configMapGenerator keys {sorted(unknown)}")
    data: dict[str, str] = {}
    for entry in spec.get("files", []):
        key, _, rel = entry.partition("=") if "=" in entry else (Path(entry).name, "", entry)
        data[key] = (root / rel).read_text(encoding="utf-8")
    metadata: Object = {"name": spec["name"]}
    if spec.get("namespace"):
        metadata["namespace"] = spec["namespace"]
    labels = (spec.get("options") or {}).get("labels")
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_json_patch(doc: Object, operations: list[Object]) -> None:
    """Apply RFC 6902 `add`, `replace` and `remove` operations to `doc` in place."""
    for op in operations:
        *parents, last = _pointer(op["path"])
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        kind = op["op"]
        if isinstance(node, list):
            if kind == "add":
                node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
            elif kind == "replace":
                node[int(last)] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del node[int(last)]
            else:
                raise UnsupportedKustomization(f"JSON patch op {kind!r}")
        else:
            if kind in ("add", "replace"):
                if kind == "replace" and last not in node:
                    raise KeyError(f"replace at {op['path']}: no such member")
                node[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del node[last]
            else:
                raise UnsupportedKustomization(f"JSON patch op {kind!r}")


def _matches(obj: Object, target: Object) -> bool:
    unknown = set(target) - {"kind", "name", "namespace"}
    if unknown:
        raise UnsupportedKustomization(f"patch target selectors {sorted(unknown)}")
    meta = obj["metadata"]
    return (
        target.get("kind", obj["kind"]) == obj["kind"]
        and target.get("name", meta["name"]) == meta["name"]
        and target.get("namespace", meta.get("namespace")) == meta.get("namespace")
    )


def _pod_specs(obj: Object) -> list[Object]:
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return [obj["spec"]["template"]["spec"]]
    return []


def _containers(pod: Object) -> list[Object]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def _set_images(objects: list[Object], images: list[Object]) -> None:
    for obj in objects:
        for pod in _pod_specs(obj):
            for container in _containers(pod):
                image = container["image"]
                name, _, tag = (
                    image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
                )
                for rule in images:
                    if rule["name"] == name:
                        new_name = rule.get("newName", name)
                        new_tag = rule.get("newTag", tag)
                        container["image"] = f"{new_name}:{new_tag}" if new_tag else new_name


def _rename_configmap_refs(obj: Object, namespace: str | None, old: str, new: str) -> None:
    if obj["metadata"].get("namespace") != namespace:
        return
    for pod in _pod_specs(obj):
        for volume in pod.get("volumes", []):
            if volume.get("configMap", {}).get("name") == old:
                volume["configMap"]["name"] = new
            for source in volume.get("projected", {}).get("sources", []):
                if source.get("configMap", {}).get("name") == old:
                    source["configMap"]["name"] = new
        for container in _containers(pod):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef")
                if ref and ref.get("name") == old:
                    ref["name"] = new
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref and ref.get("name") == old:
                    ref["name"] = new


def _build(directory: Path) -> _Build:
    kfile = directory / "kustomization.yaml"
    spec = yaml.safe_load(kfile.read_text(encoding="utf-8"))
    unknown = set(spec) - SUPPORTED_KEYS
    if unknown:
        raise UnsupportedKustomization(f"{kfile}: fields {sorted(unknown)} are not supported")
    build = _Build()
    for entry in spec.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            sub = _build(path)
            build.objects.extend(sub.objects)
            build.generated |= sub.generated
        else:
            build.objects.extend(_load_yaml_docs(path))
    for gen in spec.get("configMapGenerator", []):
        cm = _generate_configmap(directory, gen)
        key = (cm["metadata"].get("namespace"), cm["metadata"]["name"])
        existing = [
            o
            for o in build.objects
            if o["kind"] == "ConfigMap"
            and (o["metadata"].get("namespace"), o["metadata"]["name"]) == key
        ]
        behavior = gen.get("behavior", "create")
        if behavior == "create":
            if existing:
                raise ValueError(f"{kfile}: ConfigMap {key} already exists; use behavior: replace")
            build.objects.append(cm)
        elif behavior == "replace":
            if not existing:
                raise ValueError(f"{kfile}: no ConfigMap {key} to replace")
            old = existing[0]
            cm["metadata"] = {**old["metadata"], **cm["metadata"]}
            build.objects[build.objects.index(old)] = cm
        else:
            raise UnsupportedKustomization(f"{kfile}: configMapGenerator behavior {behavior!r}")
        build.generated.add(key)
    for patch in spec.get("patches", []):
        if set(patch) - {"target", "patch"}:
            raise UnsupportedKustomization(f"{kfile}: patches keys {sorted(set(patch))}")
        operations = yaml.safe_load(patch["patch"])
        targets = [o for o in build.objects if _matches(o, patch["target"])]
        if not targets:
            raise ValueError(f"{kfile}: patch target {patch['target']} matches no object")
        if isinstance(operations, dict) and operations.get("$patch") == "delete":
            build.objects = [o for o in build.objects if not any(o is t for t in targets)]
            continue
        if not isinstance(operations, list):
            raise UnsupportedKustomization(
                f"{kfile}: only JSON 6902 patches (a list of operations) and `$patch: delete`"
            )
        for obj in targets:
            apply_json_patch(obj, operations)
    _set_images(build.objects, spec.get("images", []))
    return build


def render_kustomization(directory: str | Path) -> list[Object]:
    """Render the kustomization in `directory` to its list of objects, like `kubectl kustomize`."""
    build = _build(Path(directory).resolve())
    objects = copy.deepcopy(build.objects)
    for cm in objects:
        if cm["kind"] != "ConfigMap":
            continue
        namespace, name = cm["metadata"].get("namespace"), cm["metadata"]["name"]
        if (namespace, name) not in build.generated:
            continue
        new = f"{name}-{kustomize_hash(cm)}"
        cm["metadata"]["name"] = new
        for obj in objects:
            _rename_configmap_refs(obj, namespace, name, new)
    return objects
