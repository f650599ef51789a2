"""A real Kubernetes control plane on loopback for the e2e tier and the real-stack benchmarks.

`Cluster(workdir, bins).start()` runs, each as a child process with its log in `workdir/logs/`:

- etcd (no fsync: the data dies with the test) and kube-apiserver on free loopback ports, with
  certificates made here by the openssl CLI, a service-account signing key and
  `--authorization-mode=Node,RBAC`;
- kube-scheduler and kube-controller-manager, each with its own client certificate and
  kubeconfig (the users RBAC's bootstrap policy grants their roles to);
- kwok, which plays every node labelled `kwok.x-k8s.io/node=fake` (the label Karpenter's kwok
  provider puts on its nodes): a node turns Ready `node_ready_delay` seconds after it is created,
  and pods bound to a ready node run at once.

Nodes are made by `add_nodes` (tainted not-ready until kwok reports them Ready, as a booting
kubelet's node is) or by Karpenter with its kwok provider (`tests/e2e/karpenter.py`). `stop()` ends every process by its PID (SIGTERM,
then SIGKILL after a bounded wait); it also runs at interpreter exit, so an interrupted test
leaves nothing behind. `restart_apiserver()` stops and starts kube-apiserver on the same port.
"""

from __future__ import annotations

import atexit
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"
REQUIRED = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
KWOK_LABEL = "type"
KWOK_VALUE = "kwok"
KWOK_MANAGED = ("kwok.x-k8s.io/node", "fake")
"""The label kwok selects the nodes it plays by (Karpenter's kwok provider sets it)."""
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
SERVICE_CIDR = "10.0.0.0/24"
START_TIMEOUT = 90.0
"""Seconds each component gets to come up (generous: the machine's CPU is shared)."""


class ClusterError(RuntimeError):
    """A component did not start or stopped; the message names it and ends with its log tail."""


def bins_dir() -> Path:
    """Where `make e2e-bins` put the binaries (PH_E2E_BINS, else what build.sh --dir says)."""
    if os.environ.get("PH_E2E_BINS"):
        return Path(os.environ["PH_E2E_BINS"])
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--dir"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def missing_binaries(bins: Path) -> list[str]:
    """The required binaries not (yet) built into `bins`."""
    return [name for name in REQUIRED if not os.access(bins / name, os.X_OK)]


def autoscaler_blocked(bins: Path) -> str | None:
    """Why cluster-autoscaler was not built (build.sh's message), None when it was."""
    if os.access(bins / "cluster-autoscaler", os.X_OK):
        return None
    marker = bins / "cluster-autoscaler.blocked"
    return marker.read_text().strip() if marker.exists() else "cluster-autoscaler was not built"


_PORTS = random.Random()


def free_port() -> int:
    """A loopback TCP port free right now, below Linux's ephemeral range (32768-60999): a port
    the kernel picked would be handed out again as the local port of some outgoing connection
    before the component gets to bind it."""
    for _ in range(200):
        port = _PORTS.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ClusterError("no free loopback port in 20000-32000")


def advertise_address() -> str:
    """This machine's address for the API server to advertise as the `kubernetes` endpoints (the
    EndpointSlice the chart looks up to narrow egress): the one it would route outside from (no
    packet is sent), or 127.0.0.1 when it has none, in which case the API server publishes no
    endpoints (their validation refuses loopback addresses). It still listens on 127.0.0.1 only."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.250", 9))  # TEST-NET-1: only a route lookup
            address = str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"
    return "127.0.0.1" if address.startswith("127.") else address


@dataclass
class Proc:
    """One child process and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, wait: float = 15.0) -> None:
        """Signal the process by its PID; SIGKILL it when it has not ended within `wait` s."""
        if self.popen.poll() is not None:
            return
        try:
            os.kill(self.popen.pid, sig)
            self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=wait)
        except ProcessLookupError:
            pass

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(pki: Path) -> None:
    """A CA, the API server's serving certificate, one client certificate per component and the
    service-account key pair, in `pki`."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3",
             "-subj", "/CN=predictive-headroom-e2e-ca", cwd=pki)  # fmt: skip
    (pki / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    subjects = {
        "server": ("/CN=kube-apiserver", "server.ext"),
        "admin": ("/O=system:masters/CN=e2e-admin", "client.ext"),
        "scheduler": ("/CN=system:kube-scheduler", "client.ext"),
        "controller-manager": ("/CN=system:kube-controller-manager", "client.ext"),
        "kwok": ("/O=system:masters/CN=kwok", "client.ext"),
        "karpenter": ("/O=system:masters/CN=karpenter", "client.ext"),
        "apiserver-etcd": ("/CN=apiserver-etcd", "client.ext"),
    }
    for name, (subject, ext) in subjects.items():
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                 cwd=pki)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "3", "-extfile", ext,
                 cwd=pki)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def kubeconfig(server: str, ca: Path, user: dict[str, str], name: str = "e2e") -> dict[str, Any]:
    """A one-context kubeconfig; `user` holds client-certificate/client-key or token."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def kwok_stages(node_ready_delay: float) -> list[dict[str, Any]]:
    """kwok's Stages: a node turns Ready after `node_ready_delay` s and keeps a heartbeat (node
    Lease); a pod on a kwok node runs as soon as it is bound, and is gone when deleted."""
    node_status = """conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ Now | Quote }}
  lastTransitionTime: {{ Now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ NodeName | Quote }}
  type: Hostname
allocatable:
{{ YAML .status.allocatable 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: v1.34.9-kwok
  containerRuntimeVersion: kwok
phase: Running
"""
    ready = '.status.conditions.[] | select( .type == "Ready" ) | .status'
    node = {"apiGroup": "v1", "kind": "Node"}
    pod = {"apiGroup": "v1", "kind": "Pod"}
    return [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "node-initialize"},
            "spec": {
                "resourceRef": node,
                "selector": {
                    "matchExpressions": [{"key": ready, "operator": "NotIn", "values": ["True"]}]
                },
                "delay": {"durationMilliseconds": int(node_ready_delay * 1000)},
                "next": {"statusTemplate": node_status},
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "node-heartbeat-with-lease"},
            "spec": {
                "resourceRef": node,
                "selector": {
                    "matchExpressions": [
                        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                        {"key": ready, "operator": "In", "values": ["True"]},
                    ]
                },
                "delay": {"durationMilliseconds": 20000, "jitterDurationMilliseconds": 25000},
                "next": {"statusTemplate": node_status},
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-ready"},
            "spec": {
                "resourceRef": pod,
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                        {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                        {"key": ".spec.nodeName", "operator": "Exists"},
                    ]
                },
                "next": {
                    "statusTemplate": """{{ $now := Now }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
                },
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-delete"},
            "spec": {
                "resourceRef": pod,
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
                    ]
                },
                "next": {"finalizers": {"empty": True}, "delete": True},
            },
        },
    ]


@dataclass
class Cluster:
    """The control plane; see the module docstring. Use as a context manager or start()/stop()."""

    workdir: Path
    bins: Path
    node_ready_delay: float = 20.0
    scheduler: bool = True
    controller_manager: bool = True
    kwok: bool = True
    extra_apiserver_args: list[str] = field(default_factory=list)
    procs: dict[str, Proc] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- processes --------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        """Start `argv` as the component `name` (log `logs/<name>.log`, appended to), with `env`
        added to this process's environment; it is stopped with the others."""
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, start_new_session=True, env={**os.environ, **(env or {})},
            )  # fmt: skip
        proc = Proc(name, popen, log)
        self.procs[name] = proc
        return proc

    def wait(self, proc: Proc, ready: Callable[[], bool], what: str) -> None:
        """Poll `ready` until true; ClusterError with the log tail when `proc` exits or
        START_TIMEOUT passes."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ClusterError(
                    f"{proc.name} exited with code {proc.popen.returncode} before {what}; its log "
                    f"({proc.log}) ends:\n{proc.tail()}"
                )
            try:
                if ready():
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.3)
        raise ClusterError(
            f"{proc.name} did not become ready ({what}) within {START_TIMEOUT:g}s; its log "
            f"({proc.log}) ends:\n{proc.tail()}"
        )

    def _get(self, path: str, timeout: float = 3.0) -> tuple[int, bytes]:
        """GET `path` on the API server as the admin (client certificate)."""
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        try:
            with urllib.request.urlopen(self.server + path, context=ctx, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def start(self) -> Cluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        make_certificates(self.pki)
        for name in ("etcd", "etcd-peer", "apiserver", "scheduler", "controller-manager", "kwok"):
            self.ports[name] = free_port()
        self._write_kubeconfigs()
        self._start_etcd()
        self._start_apiserver()
        if self.controller_manager:
            self._start_controller_manager()
        if self.scheduler:
            self._start_scheduler()
        if self.kwok:
            self._start_kwok()
        if self.controller_manager:
            self._wait_default_service_account()

    def _write_kubeconfigs(self) -> None:
        for name in ("admin", "scheduler", "controller-manager", "kwok"):
            config = kubeconfig(
                self.server,
                self.pki / "ca.crt",
                {
                    "client-certificate": str(self.pki / f"{name}.crt"),
                    "client-key": str(self.pki / f"{name}.key"),
                },
            )
            (self.workdir / f"{name}.kubeconfig").write_text(yaml.safe_dump(config))

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        proc = self.spawn(
            "etcd",
            [
                str(self.bins / "etcd"),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(client + "/health", timeout=2) as resp:
                return b'"true"' in resp.read()

        self.wait(proc, healthy, "GET /health says true")

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki
        return [
            str(self.bins / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            f"--advertise-address={advertise_address()}",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={pki / 'server.crt'}",
            f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--authorization-mode=Node,RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--profiling=false",
            "--v=1",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self) -> None:
        proc = self.spawn("kube-apiserver", self._apiserver_argv())
        self.wait(proc, lambda: self._get("/readyz")[0] == 200, "GET /readyz is 200")

    def restart_apiserver(self, down: float = 0.0) -> None:
        """Stop kube-apiserver (SIGTERM), wait `down` seconds, start it again on the same port."""
        self.procs["kube-apiserver"].stop()
        time.sleep(down)
        self._start_apiserver()

    def _start_controller_manager(self) -> None:
        pki = self.pki
        config = self.workdir / "controller-manager.kubeconfig"
        proc = self.spawn(
            "kube-controller-manager",
            [
                str(self.bins / "kube-controller-manager"),
                f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['controller-manager']}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
                "--leader-elect=false",
                "--node-startup-grace-period=10m",
                "--node-monitor-period=1s",
                "--concurrent-deployment-syncs=10",
                "--concurrent-replicaset-syncs=10",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
        )
        self.wait(proc, lambda: self._started(proc, "Started controller"), "a controller started")

    def _start_scheduler(self) -> None:
        config = self.workdir / "scheduler.kubeconfig"
        proc = self.spawn(
            "kube-scheduler",
            [
                str(self.bins / "kube-scheduler"),
                f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['scheduler']}",
                "--leader-elect=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
        )
        self.wait(proc, lambda: self._healthz(self.ports["scheduler"]), "its /healthz is ok")

    def _start_kwok(self) -> None:
        config = self.workdir / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(kwok_stages(self.node_ready_delay), sort_keys=False))
        proc = self.spawn(
            "kwok",
            [
                str(self.bins / "kwok"),
                f"--kubeconfig={self.workdir / 'kwok.kubeconfig'}",
                f"--config={config}",
                f"--manage-nodes-with-label-selector={KWOK_MANAGED[0]}={KWOK_MANAGED[1]}",
                f"--server-address=127.0.0.1:{self.ports['kwok']}",
                "--node-lease-duration-seconds=40",
            ],
        )
        self.wait(proc, lambda: self._healthz(self.ports["kwok"], tls=False), "its /healthz is ok")

    def _healthz(self, port: int, tls: bool = True) -> bool:
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            url = f"https://127.0.0.1:{port}/healthz"
        else:
            ctx, url = None, f"http://127.0.0.1:{port}/healthz"
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return resp.status == 200

    @staticmethod
    def _started(proc: Proc, text: str) -> bool:
        return text in proc.log.read_text(errors="replace")

    def _wait_default_service_account(self) -> None:
        """Pods need the namespace's `default` ServiceAccount, which the controller-manager makes."""
        proc = self.procs["kube-controller-manager"]
        self.wait(
            proc,
            lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            "the default ServiceAccount exists",
        )

    def stop(self) -> None:
        """End every process by its PID, the last started first."""
        for proc in reversed(list(self.procs.values())):
            proc.stop()

    def logs(self, lines: int = 30) -> str:
        """The tail of every component's log, for a failed test."""
        return "\n".join(
            f"--- {proc.name} (pid {proc.popen.pid}, {'running' if proc.alive() else f'exit {proc.popen.returncode}'}) "
            f"{proc.log}\n{proc.tail(lines)}"
            for proc in self.procs.values()
        )

    # -- objects ----------------------------------------------------------------------------

    def api(self) -> Any:
        """A `kubernetes` ApiClient as the admin."""
        import kubernetes.client
        import kubernetes.config

        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(self.admin_kubeconfig), client_configuration=configuration
        )
        configuration.retries = False
        return kubernetes.client.ApiClient(configuration)

    def add_nodes(
        self,
        names: list[str],
        cpu: int = 8,
        memory: str = "32Gi",
        labels: dict[str, str] | None = None,
    ) -> None:
        """Create kwok nodes with `cpu` slots; they are Ready `node_ready_delay` s later."""
        import kubernetes.client

        core = kubernetes.client.CoreV1Api(self.api())
        for name in names:
            core.create_node(node_body(name, cpu, memory, labels))


def node_body(
    name: str, cpu: int = 8, memory: str = "32Gi", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A kwok node as a booting kubelet registers it: not ready, tainted not-ready."""
    capacity = {"cpu": str(cpu), "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                KWOK_LABEL: KWOK_VALUE,
                KWOK_MANAGED[0]: KWOK_MANAGED[1],
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [NOT_READY_TAINT]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "booting",
                }
            ],
        },
    }
