"""`--current N` and `--current-from NS/NAME` of `tune` and `backtest`: the fixed placeholders the
user runs today, replayed beside the product (`backtest.against_fixed`)."""

from __future__ import annotations

import argparse
from typing import Any

from predictive_headroom.backtest.against_fixed import MAX_CURRENT
from predictive_headroom.commands import CommandError


def current_arg(text: str) -> list[int]:
    """argparse type: `20` or `10,20,40` whole numbers of placeholders, 0 to 100,000."""
    out = []
    for part in text.split(","):
        try:
            n = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r} is not a whole number of placeholders; give the replicas of "
                "your fixed placeholder Deployment, e.g. --current 20 (or 10,20,40)"
            ) from None
        if not 0 <= n <= MAX_CURRENT:
            raise argparse.ArgumentTypeError(
                f"{n} placeholders is outside 0 to {MAX_CURRENT:,}; give the replicas of your "
                "fixed placeholder Deployment, e.g. --current 20"
            )
        out.append(n)
    return out


def add_current_arguments(parser: argparse.ArgumentParser) -> None:
    """`--current` (repeatable, comma-separated) and `--current-from`."""
    parser.add_argument(
        "--current",
        type=current_arg,
        action="append",
        metavar="N[,N...]",
        help="the replicas of the fixed placeholder Deployment you run today: each N is replayed "
        "on the same history and simulated cluster, beside what predictive headroom keeps",
    )
    parser.add_argument(
        "--current-from",
        metavar="NS/NAME",
        help="read N from that Deployment's spec.replicas with your kubeconfig (like --current)",
    )


def currents_from_args(args: argparse.Namespace) -> tuple[int, ...]:
    """Every N of `--current` and `--current-from`, in order, without repeats. Raises
    CommandError naming the object and the verb when the Deployment cannot be read."""
    given = [n for group in getattr(args, "current", None) or [] for n in group]
    if getattr(args, "current_from", None):
        given.append(read_current(args.current_from))
    return tuple(dict.fromkeys(given))


def read_current(ref: str) -> int:
    """`spec.replicas` of the Deployment `NS/NAME`, read with the kubeconfig (KUBECONFIG or
    ~/.kube/config; in a pod, its ServiceAccount)."""
    ns, _, name = ref.partition("/")
    if not ns or not name or "/" in name:
        raise CommandError(
            f"--current-from {ref!r}: give the Deployment as NAMESPACE/NAME, e.g. "
            "--current-from headroom/overprovisioning"
        )
    what = f"--current-from {ref}: cannot get deployments.apps {name} in namespace {ns}"
    return _replicas(_read(ns, name, what), what)


def _read(ns: str, name: str, what: str) -> Any:
    import kubernetes.client

    from predictive_headroom.kube.cluster import load_kube_config
    from predictive_headroom.kube.errors import (
        CLIENT_ERRORS,
        Forbidden,
        KubeError,
        NotFound,
        mapped,
    )
    from predictive_headroom.protocols import ActuatorError

    try:
        client = load_kube_config()
    except ActuatorError as exc:
        raise CommandError(f"{what}: {exc}") from None
    try:
        with client:
            try:
                api = kubernetes.client.AppsV1Api(client)
                return api.read_namespaced_deployment(name, ns, _request_timeout=30)
            except CLIENT_ERRORS as exc:
                raise mapped(exc, str(exc)) from exc
    except NotFound:
        raise CommandError(
            f"{what}: not found (404); check the namespace and name "
            f"(kubectl -n {ns} get deployment {name})"
        ) from None
    except Forbidden:
        raise CommandError(
            f"{what}: forbidden (403); your credentials need get on deployments in {ns}, "
            "or pass the replicas as --current N"
        ) from None
    except KubeError as exc:
        raise CommandError(f"{what}: {exc.status or 'no answer'} {exc.reason or exc}") from None


def _replicas(deployment: Any, what: str) -> int:
    from predictive_headroom.kube.cluster import read_replicas

    n, odd = read_replicas(deployment.spec.replicas if deployment.spec else None, True)
    if odd:
        raise CommandError(f"{what}: {odd}; pass the replicas as --current N")
    if n > MAX_CURRENT:
        raise CommandError(f"{what}: {n} replicas is above {MAX_CURRENT:,}")
    return n
