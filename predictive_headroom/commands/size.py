"""`predictive-headroom size`: placeholder requests that fill a fraction of a pool's nodes.

Reads the nodes and the DaemonSet pods on them, from the cluster (kubeconfig) or from the output
of `kubectl get nodes,pods -A -o json`, and prints per node shape what one placeholder should
request to hold `--fraction` (default 0.9) of a node after its DaemonSets, the values to paste,
and what that means for the pool's `demandPerReplica`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from predictive_headroom.commands import (
    CommandError,
    add_output_argument,
    print_json,
    print_table,
    share_arg,
)
from predictive_headroom.commands.validate import load_any
from predictive_headroom.core.sizing import (
    INSTANCE_TYPE_LABELS,
    Shape,
    app_pods_per_placeholder,
    common_placeholder,
    is_accelerated,
    node_shapes,
)
from predictive_headroom.policy.chart import DEFAULT_NAMESPACE, DEFAULT_RELEASE
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.load import read_config_text
from predictive_headroom.policy.units import parse_quantity, unit_problem

HELP = (
    "suggest placeholder requests from the nodes: a fraction (default 0.9) of a node's "
    "allocatable after its DaemonSets, per node shape"
)
EXAMPLE = (
    "predictive-headroom size -l karpenter.sh/nodepool=default --app-pod cpu=500m,memory=1Gi --demand-per-pod 40\n"
    "kubectl get nodes,pods -A -o json > nodes.json; predictive-headroom size --from-file nodes.json"
)
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--from-file",
        metavar="JSON",
        help="output of `kubectl get nodes,pods -A -o json` (default: read the cluster from your kubeconfig)",
    )
    source.add_argument("--context", help="kubeconfig context to read (default: the current one)")
    parser.add_argument(
        "--selector",
        "-l",
        default="",
        help="node labels of the pool, e.g. karpenter.sh/nodepool=gpu (k=v,k2=v2)",
    )
    parser.add_argument(
        "--config", "-c", help="policy or Helm values file: take --pool's nodeSelector"
    )
    parser.add_argument("--pool", help="pool whose placeholder.nodeSelector selects the nodes")
    parser.add_argument(
        "--fraction",
        type=share_arg,
        default=0.9,
        help="share of a node's free allocatable one placeholder holds (default 0.9)",
    )
    parser.add_argument(
        "--app-pod",
        metavar="REQUESTS",
        help="requests of one app pod, e.g. cpu=500m,memory=1Gi: how many fit in one placeholder",
    )
    parser.add_argument(
        "--demand-per-pod",
        type=float,
        help="demand one app pod serves (in the unit of forecast.query): gives demandPerReplica",
    )
    add_output_argument(parser)


def _pairs(text: str, what: str) -> dict[str, str]:
    out = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        key, sep, value = term.partition("=")
        if not sep or not key or not value:
            raise CommandError(f"{what} {text!r}: expected key=value pairs, e.g. {_EXAMPLES[what]}")
        out[key.strip()] = value.strip()
    return out


_EXAMPLES = {"--selector": "karpenter.sh/nodepool=gpu", "--app-pod": "cpu=500m,memory=1Gi"}


def _selector(args: argparse.Namespace) -> dict[str, str]:
    selector = _pairs(args.selector, "--selector")
    if args.pool or args.config:
        if not (args.pool and args.config):
            raise CommandError("--pool and --config go together: the pool is read from the file")
        pool = _pool(args.config, args.pool)
        chosen = pool.placeholder.node_selector or (
            pool.proportional.node_selector if pool.proportional else {}
        )
        selector = {**chosen, **selector}
    return selector


def _pool(path: str, name: str) -> Pool:
    """Pool `name` of a policy or Helm values file (every problem of the file if it is not valid)."""
    text = read_config_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None  # load_any reports it with its line
    pools = data.get("pools") if isinstance(data, dict) else None
    # Only the nodeSelector matters here: a pool without a target is a chart pool.
    targetless = isinstance(pools, list) and any(
        isinstance(p, dict) and "target" not in p for p in pools
    )
    kind = "values" if targetless else None
    policy, _ = load_any(text, path, kind, DEFAULT_RELEASE, DEFAULT_NAMESPACE)
    if policy is None:
        raise CommandError(f"{path} has no pools; pass the values file that defines pool {name!r}")
    try:
        return policy.pool(name)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None


# A new file of its own: never the path given, which may be the user's values file.
_NODES_HINT = (
    "--from-file takes the nodes and pods as kubectl prints them: "
    "`kubectl get nodes,pods -A -o json > nodes.json`, then `--from-file nodes.json` "
    "(a policy or values file goes to --config)"
)


def _items_from_file(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON ({exc}); {_NODES_HINT}") from None
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise CommandError(f"{path}: expected a Kubernetes List with items; {_NODES_HINT}")
    return items


PAGE_SIZE = 500
"""Items a page of the node and pod lists."""
CALLS_TIMEOUT = 30.0
"""Seconds one list request may take."""


def _items_from_cluster(context: str | None, selector: dict[str, str]) -> list[dict[str, Any]]:
    """The nodes matching `selector` and every pod, as JSON, listed in pages by the package's
    pager (`kube.cluster.list_items`: a page whose continue token expired restarts the list)."""
    import kubernetes.client

    from predictive_headroom.kube.api import CallOptions
    from predictive_headroom.kube.cluster import list_cluster_wide, load_kube_config
    from predictive_headroom.kube.errors import KubeError, Unreachable
    from predictive_headroom.protocols import ActuatorError

    options = CallOptions(timeout=CALLS_TIMEOUT, attempts=1, events=False)
    label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    try:
        core = kubernetes.client.CoreV1Api(load_kube_config(context))
        nodes = list_cluster_wide(core.list_node, "nodes", options, PAGE_SIZE, label_selector)
        pods = list_cluster_wide(core.list_pod_for_all_namespaces, "pods", options, PAGE_SIZE)
    except Unreachable as exc:
        raise CommandError(f"cannot reach the API server: {exc}") from None
    except KubeError as exc:
        raise CommandError(
            f"the API server refused to list nodes or pods ({exc.status} {exc.reason}); "
            "`size` needs get/list on nodes and pods, or use --from-file"
        ) from None
    except ActuatorError as exc:
        raise CommandError(str(exc)) from None
    return [{"kind": "Node", **n} for n in nodes] + [{"kind": "Pod", **p} for p in pods]


def _advice(shape: Shape, args: argparse.Namespace, app_pod: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": shape.name,
        "nodes": len(shape.nodes),
        "allocatable": {k: str(v) for k, v in shape.allocatable.items()},
        "daemonsets": {k: str(v) for k, v in shape.daemonsets.items() if k in shape.allocatable},
        "daemonset_pods": shape.daemonset_pods,
        "placeholder_requests": shape.placeholder,
        "free_pod_slots": shape.free_pods,
        "instance_type": shape.instance_type,
        "accelerator": is_accelerated(shape),
    }
    if app_pod:
        fit = app_pods_per_placeholder(shape.placeholder, app_pod)
        out["app_pods_per_placeholder"] = fit
        if args.demand_per_pod is not None:
            out["demand_per_replica"] = fit * args.demand_per_pod
    return out


def run(args: argparse.Namespace) -> int:
    selector = _selector(args)
    app_pod = _pairs(args.app_pod or "", "--app-pod")
    for name, value in app_pod.items():
        if unit_problem(name, value):
            raise CommandError(f"--app-pod {name}={value}: {unit_problem(name, value)}")
    if args.demand_per_pod is not None and not app_pod:
        raise CommandError("--demand-per-pod needs --app-pod (the requests of that pod)")
    items = (
        _items_from_file(args.from_file)
        if args.from_file
        else _items_from_cluster(args.context, selector)
    )
    try:
        shapes = node_shapes(items, selector, args.fraction)
    except ValueError as exc:
        raise CommandError(f"--fraction: {exc}") from None
    if not shapes:
        where = f" with labels {selector}" if selector else ""
        raise CommandError(
            f"no schedulable nodes{where}; check --selector (kubectl get nodes --show-labels)"
        )
    advice = [_advice(s, args, app_pod) for s in shapes]
    if args.output == "json":
        general = [s for s in shapes if not is_accelerated(s)]
        shared = common_placeholder(general) if len(general) > 1 else None
        print_json(
            {
                "fraction": args.fraction,
                "selector": selector,
                "shapes": advice,
                "general_shared_requests": shared,
            }
        )
        return 0
    _print(advice, shapes, args.fraction)
    return 0


def _print(advice: list[dict[str, Any]], shapes: list[Shape], fraction: float) -> None:
    rows = [
        [
            a["shape"],
            a["nodes"],
            _fmt(a["allocatable"]),
            f"{_fmt(a['daemonsets'])} ({a['daemonset_pods']} pods)",
            _fmt(a["placeholder_requests"]),
        ]
        for a in advice
    ]
    print_table(
        ["shape", "nodes", "allocatable", "DaemonSets (per node)", f"placeholder ({fraction:.0%})"],
        rows,
    )
    for a in advice:
        print(
            f"\n{a['shape']}: paste into the pool (one placeholder per node holds {fraction:.0%} of it):"
        )
        print("  placeholder:")
        print(
            "    requests: {"
            + ", ".join(f"{k}: {v}" for k, v in a["placeholder_requests"].items())
            + "}"
        )
        print("    spread: {mode: antiAffinity}")
        if len(advice) > 1 and a.get("instance_type"):
            print(f"    nodeSelector: {{{INSTANCE_TYPE_LABELS[0]}: {a['instance_type']}}}")
        if "demand_per_replica" in a:
            print(
                f"  forecast.demandPerReplica: {a['demand_per_replica']:g}  "
                f"({a['app_pods_per_placeholder']} app pods fit in one placeholder)"
            )
        elif "app_pods_per_placeholder" in a:
            print(
                f"  {a['app_pods_per_placeholder']} app pods fit in one placeholder: demandPerReplica "
                "is that many times the demand one app pod serves (--demand-per-pod gives the number)"
            )
    if len(advice) > 1:
        _print_mixed(shapes)
    if not any("demand_per_replica" in a for a in advice):
        print(
            "\ndemandPerReplica is the demand the room of one placeholder serves: with placeholders "
            "this size, the demand one node's worth of app pods serves (pass --app-pod and "
            "--demand-per-pod to compute it)."
        )


def _print_mixed(shapes: list[Shape]) -> None:
    """What to do when the nodes differ: a placeholder has one size, so one pool per shape, or
    general shapes sharing requests that fit each of them; accelerator shapes never merged."""
    gpu = [s for s in shapes if is_accelerated(s)]
    general = [s for s in shapes if not is_accelerated(s)]
    print(
        f"\nThe nodes have {len(shapes)} shapes and a pool's placeholders have one size: give each "
        "shape its own pool (the requests above, with its nodeSelector)"
        + (", or let the general-purpose shapes share one." if len(general) > 1 else ".")
    )
    if len(general) > 1:
        shared = common_placeholder(general)
        print(
            f"  general-purpose shapes ({', '.join(s.name for s in general)}) in one pool: "
            "requests: {" + ", ".join(f"{k}: {v}" for k, v in shared.items()) + "} "
            "(the smaller of each resource: it fits on each of them, and holds less than "
            "the suggested share of the larger ones)"
        )
    if gpu:
        print(
            f"  accelerator shapes ({', '.join(s.name for s in gpu)}): a pool each, never merged "
            "with general ones: a placeholder requesting the accelerator cannot start on a "
            "general node, and one without it would keep an accelerator node up for nothing."
        )


def _fmt(resources: dict[str, Any]) -> str:
    def human(key: str, value: Any) -> str:
        amount = float(parse_quantity(value))
        return f"{amount / 2**30:.1f}Gi" if key == "memory" else f"{amount:g}"

    shown = [(k, v) for k, v in resources.items() if k in ("cpu", "memory") or "/" in k]
    return ", ".join(f"{k} {human(k, v)}" for k, v in shown) or "none"
