"""`predictive-headroom run`: the daemon (or one refit and one reconcile with `--once`).

Settings come from the environment (`PH_*`, see settings.Settings); the Kubernetes credentials
from the pod's ServiceAccount, else KUBECONFIG / ~/.kube/config.

Exit codes: 0 after a clean stop (or, with `--once`, when every pool was forecast and served);
1 with `--once` when any pool's forecast or any read or write failed; 2 for a bad config, bad
settings or missing credentials.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient
from pydantic import ValidationError

from predictive_headroom.app.fit import default_forecaster
from predictive_headroom.app.inputs import with_plan_inputs
from predictive_headroom.commands import CommandError, daemon_choice, load_config
from predictive_headroom.core.components import Part
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import PlanSettings
from predictive_headroom.core.spend import policy_spend
from predictive_headroom.core.vocabulary import NoForecastWhy
from predictive_headroom.daemon.access import Guard
from predictive_headroom.daemon.closedloop import LoopSettings
from predictive_headroom.daemon.early_stop import exit_on_stop_until_serving, restore
from predictive_headroom.daemon.httpserver import PROBES, HttpServer
from predictive_headroom.daemon.leadership import AlwaysLeader, Elector
from predictive_headroom.daemon.logs import setup_logging
from predictive_headroom.daemon.loop import Daemon
from predictive_headroom.daemon.scheduling import Runner
from predictive_headroom.daemon.tls import default_names, server_certificate
from predictive_headroom.daemon.wiring import DaemonOptions, Edges
from predictive_headroom.kube.access import KubeAccessReviewer
from predictive_headroom.kube.cluster import KubeClusterReader, load_kube_config
from predictive_headroom.kube.discovery import CapacityBufferDiscovery
from predictive_headroom.kube.leader import LeaderElector
from predictive_headroom.kube.pods import KubePodReader
from predictive_headroom.kube.targets import TargetActuator
from predictive_headroom.kube.watch_options import WatchOptions
from predictive_headroom.kube.watched import (
    Caches,
    WatchedClusterReader,
    WatchedPodReader,
    WatchedTargets,
)
from predictive_headroom.policy.config import Policy
from predictive_headroom.policy.lint import Level, policy_findings
from predictive_headroom.policy.settings import Settings
from predictive_headroom.protocols import ActuatorError, Source, SourceError, TargetCondition
from predictive_headroom.report.build import ReportInputs, build_report
from predictive_headroom.report.store import load_past_reports, remove_leftovers, write_report
from predictive_headroom.sources.prometheus import from_settings

logger = logging.getLogger(__name__)

HELP = "run the daemon: refit forecasts on schedule and keep each pool's placeholder pod count at its plan"
EXAMPLE = "predictive-headroom run --config config/example.yaml --once --dry-run   # one refit and one reconcile, nothing written"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", "-c", required=True, help="policy YAML file (re-read when it changes)"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="one refit and one reconcile, then exit (1 if any pool's forecast, read or write failed); "
        "no leader election",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="log 'DRY-RUN would scale ...' and send writes with dryRun=All (also PH_DRY_RUN=true)",
    )


def report_writer(settings: Settings, source_name: str) -> Any:
    """The after-refit hook writing the report into PH_REPORT_DIR, keeping PH_REPORT_KEEP of them
    (what a write killed midway left there is removed now, at start)."""
    remove_leftovers(settings.report_dir)

    def write(
        policy: Policy,
        forecasts: Mapping[str, Forecast | NoForecast],
        histories: Mapping[str, History],
        at: float,
        loop: Mapping[str, Mapping[str, Any]] | None,
        plan_settings: Mapping[str, PlanSettings],
        promises: Mapping[str, Mapping[str, Any]] | None = None,
        parts: Mapping[str, Mapping[str, Part]] | None = None,
        targets: Mapping[str, Sequence[TargetCondition]] | None = None,
    ) -> Path:
        past = load_past_reports(settings.report_dir)
        inputs = ReportInputs(
            plan_settings,
            histories,
            forecasts,
            loop=loop or {},
            promises=promises or {},
            parts=parts or {},
            targets=targets or {},
        )
        report = build_report(
            policy, with_plan_inputs(policy, inputs, at), at, past=past, source=source_name
        )
        return write_report(settings.report_dir, report, settings.report_keep)

    return write


def build_daemon(
    args: argparse.Namespace,
    settings: Settings,
    policy: Policy,
    elector_for: Callable[[ApiClient], Elector] | None = None,
) -> tuple[Daemon, ApiClient]:
    """The daemon with its real collaborators (Prometheus, Prophet, the Kubernetes API) and its API client.

    `elector_for(api)` builds the leader elector (default: always leader); its `write_budget` fences
    every write of the actuator.
    """
    source: Source | None = None
    if any(p.forecast and p.forecast.enabled for p in policy.pools):
        if not settings.prometheus_url:
            raise CommandError(
                "the config has forecasting pools: set PH_PROMETHEUS_URL to the Prometheus holding their history"
            )
        try:
            source = from_settings(settings)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
    try:
        api = load_kube_config()
    except ActuatorError as exc:
        raise CommandError(str(exc)) from None
    discovery = CapacityBufferDiscovery(api)  # which CapacityBuffer version the cluster serves
    elector = elector_for(api) if elector_for is not None else AlwaysLeader()
    cluster, pods, caches = cluster_reads(api, settings, watch=settings.watch and not args.once)
    actuator = TargetActuator(api, discovery=discovery, fence=elector.write_budget)
    edges = Edges(
        source=source,
        forecaster=default_forecaster(),
        actuator=actuator if caches is None else WatchedTargets(actuator, caches, api, discovery),
        cluster=cluster,
        elector=elector,
        pods=pods,
        caches=caches,
        target_apis=discovery,
        report_writer=report_writer(settings, getattr(source, "display_url", ""))
        if source
        else None,
    )
    return Daemon(args.config, policy, edges, daemon_options(args, settings)), api


def cluster_reads(
    api: ApiClient, settings: Settings, watch: bool
) -> tuple[
    KubeClusterReader | WatchedClusterReader, KubePodReader | WatchedPodReader, Caches | None
]:
    """The node and pod readers: through list-and-watch caches when `watch` (PH_WATCH, not
    `--once`), else listing every reconcile."""
    node_namespaces = tuple(n.strip() for n in settings.node_pod_namespaces.split(",") if n.strip())
    nodes, pods = KubeClusterReader(api), KubePodReader(api, node_namespaces=node_namespaces)
    if not watch:
        return nodes, pods, None
    caches = Caches(WatchOptions(quiet_deadline=settings.watch_deadline))
    return WatchedClusterReader(nodes, caches), WatchedPodReader(pods, caches, api), caches


def daemon_options(args: argparse.Namespace, settings: Settings) -> DaemonOptions:
    """The daemon's timings and dry run from the flags and the environment (`PH_*`)."""
    wait_namespaces = [n.strip() for n in settings.pod_wait_namespaces.split(",") if n.strip()]
    return DaemonOptions(
        dry_run=args.dry_run or settings.dry_run,
        interval=settings.reconcile_interval,
        deadline=settings.reconcile_deadline,
        retune_window=settings.retune_window,
        choice=daemon_choice(settings),
        loop=LoopSettings(
            window_seconds=settings.loop_window,
            max_samples=settings.loop_max_samples,
            observe_placeholders=settings.observe_placeholders,
            wait_namespaces=tuple(wait_namespaces),
            read_node_pods=settings.disruption_read_pods,
        ),
    )


def run(args: argparse.Namespace) -> int:
    # First: a SIGTERM from here until `serve` installs its handler exits 0, not -15 (the command
    # line installed it already when this process was started as the daemon).
    previous = exit_on_stop_until_serving(["run", *(["--once"] if args.once else [])])
    try:
        return _run(args)
    finally:
        restore(previous)


def _run(args: argparse.Namespace) -> int:
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"PH_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise CommandError(f"invalid environment settings: {problems}") from None
    setup_logging(settings.log_level, settings.log_format)
    policy = load_config(args.config)
    log_findings(policy, args.config, time.time())
    elector_for = None
    if settings.leader_election and not args.once:  # one shot by hand: no leader election

        def elector_for(api: ApiClient) -> Elector:
            return LeaderElector.from_settings(api, settings)

    daemon, api = build_daemon(args, settings, policy, elector_for)
    if isinstance(daemon.caches, Caches):
        daemon.caches.on_relist = daemon.metrics.watch_relisted
        daemon.caches.on_backoff = daemon.metrics.watch_backed_off
    daemon.target_apis.update(policy.pools)  # logs the CapacityBuffer version each such pool uses
    if args.once:
        return once(daemon)
    runner = Runner(daemon, settings.reconcile_interval)
    if isinstance(daemon.elector, LeaderElector):
        # Followers refit and plan too (warm forecasts on failover); a new leader reconciles at once;
        # a replica whose loop is stuck lets the Lease go.
        def started() -> None:
            daemon.leadership_changed(True)
            runner.reconcile_now()

        daemon.elector.on_started = started
        daemon.elector.on_stopped = lambda: daemon.leadership_changed(False)
        daemon.elector.healthy = daemon.health
        daemon.elector.on_unreadable = lambda _what: daemon.metrics.error("lease")
    return serve(daemon, runner, settings, api)


def log_findings(policy: Policy, path: str, now: float) -> None:
    """Log what `validate` warns of (and notes) in the policy in force, one line each, so a
    policy that loads but can never be right is said where the daemon runs."""
    for finding in policy_findings(policy, now):
        level = logging.WARNING if finding.level == Level.WARNING else logging.INFO
        logger.log(level, "config %s: %s (as validate says)", path, finding)
    for finding in policy_spend(policy):  # what each pool can cost a day, before it acts
        level = logging.WARNING if finding.level == Level.WARNING else logging.INFO
        logger.log(level, "config %s: %s (what it can cost a day)", path, finding)


def once(daemon: Daemon) -> int:
    """One refit and one reconcile; 0 when every pool was forecast (if it forecasts) and served, else 1."""
    daemon.refit()
    result = daemon.reconcile()
    failed = [o.pool for o in result.pools if o.error is not None]
    unfit = [
        name
        for name, fc in daemon.forecasts().items()
        if isinstance(fc, NoForecast)
        and fc.why
        in (
            NoForecastWhy.FIT_ERROR,
            NoForecastWhy.SOURCE_ERROR,
            NoForecastWhy.NOT_FITTED_YET,
            NoForecastWhy.IMPLAUSIBLE_INPUT,
        )
    ]
    problems = []
    if failed:
        problems.append(f"pool(s) with a failed read or write: {', '.join(failed)}")
    if unfit:
        problems.append(
            f"forecast failed for pool(s): {', '.join(unfit)} (the plan used the floors only)"
        )
    if problems:
        logger.error("run --once: %s", "; ".join(problems))
        return 1
    return 0


def http_servers(daemon: Daemon, settings: Settings, api: ApiClient) -> list[HttpServer]:
    """The main port (TLS and the access guard, unless PH_HTTP_AUTH=off) and the probe port,
    both started; CommandError naming the setting when a port or the certificate cannot be had."""
    tls, guard = None, None
    if settings.http_auth:
        try:
            served = server_certificate(
                settings.tls_cert_file, settings.tls_key_file, default_names()
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        tls = served.context
        daemon.metrics.tls_expiry.set_function(served.expiry)
        guard = Guard(KubeAccessReviewer(api))
        logger.info("HTTP port: TLS with %s; authorised callers only", served.source)
    else:
        logger.warning("PH_HTTP_AUTH=off: /metrics, /report and /last-run are served to anyone")
    main = _listen(daemon, settings, settings.listen_port, "PH_LISTEN_PORT", tls=tls, guard=guard)
    try:
        probes = _listen(daemon, settings, settings.probes_port, "PH_PROBE_PORT", routes=PROBES)
    except CommandError:
        main.stop()
        raise
    return [main, probes]


def _listen(
    daemon: Daemon, settings: Settings, port: int, setting: str, **options: Any
) -> HttpServer:
    """One HTTP server of the daemon on `port`, started; CommandError naming `setting` when the
    port cannot be had."""
    try:
        return HttpServer(
            daemon,
            daemon.metrics.exposition,
            settings.listen_host,
            port,
            settings.report_dir,
            **options,
        ).start()
    except OSError as exc:
        raise CommandError(
            f"cannot listen on {settings.listen_host}:{port} ({setting}): {exc}"
        ) from None


STOP_WAIT = 5.0
"""Seconds a stop waits in all for the threads it abandoned (a reconcile, a refit, a watch, a
cache's LIST that hangs) to end; then the process ends without them."""


def serve(daemon: Daemon, runner: Runner, settings: Settings, api: ApiClient) -> int:
    """Run until SIGTERM or SIGINT; returns 0 after a clean stop."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        logger.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    servers = http_servers(daemon, settings, api)
    daemon.elector.start()
    runner.start()
    mode = "DRY-RUN, " if daemon.dry_run else ""
    logger.info(
        "daemon started (%s%d pool(s), reconcile every %gs, config %s)",
        mode,
        len(daemon.policy.pools),
        settings.reconcile_interval,
        daemon.config_path,
    )
    while not stop.wait(1.0):
        pass
    runner.stop()
    ends = time.monotonic() + STOP_WAIT  # one wait for all: a cache stuck in its first LIST
    daemon.elector.stop()
    for server in servers:
        server.stop()
    if isinstance(daemon.caches, Caches):
        daemon.caches.stop(wait=max(0.0, ends - time.monotonic()))
    logger.info("stopped")
    end_without_abandoned_threads(max(0.0, ends - time.monotonic()))
    return 0


def end_without_abandoned_threads(wait: float) -> None:
    """Return once no daemon thread but this one runs (waiting up to `wait` seconds); when one is
    still inside a call then (an API server that does not answer, a Prophet fit), end the process
    at once with exit 0, logs flushed, rather than let the interpreter finalise under it.

    A daemon thread that wakes while the interpreter finalises is ended by CPython from inside its
    blocking call, which aborted the process (`Fatal Python error: Aborted`, exit -6) after an API
    outage (issue 55). The work abandoned here is what a stop abandons anyway: a reconcile's
    writes are single PATCHes applied whole or not at all, an abandoned refit swaps nothing in.
    """
    ends = time.monotonic() + wait
    while True:
        running = [
            t.name
            for t in threading.enumerate()
            if t.daemon and t.is_alive() and t is not threading.current_thread()
        ]
        if not running or time.monotonic() >= ends:
            break
        time.sleep(0.05)
    if running:
        logger.info(
            "exiting now: %d abandoned thread(s) still in a call (%s)",
            len(running),
            ", ".join(sorted(set(running))),
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
