"""A real Prometheus for tests: a real series (tests/data) written as OpenMetrics, backfilled with
promtool and served by the `prometheus` binary on a free loopback port.

The data is shifted so that it ends on the 5-minute grid just before the wall clock, as a live
server's would. Series served (all gauges):

- `ph_demand{job="web"}`: the whole dataset (`DEMAND_DATASET`), the series tests compare against;
- `ph_demand{job="api"}`: twice the same values, so `ph_demand` alone yields two series;
- `ph_gappy{job="web"}`: the last two days with `GAP` (two hours, one day before the end) removed;
- `ph_nonfinite{job="web"}`: the last day, with NaN, +Inf and -Inf samples among the values;
- `ph_all_nan{job="web"}`: the last hour, every sample NaN.

`GatewayProxy` puts a header-checking, failure-injecting reverse proxy in front of it, standing in
for the bearer-token gateways and tenant headers real deployments have.
"""

from __future__ import annotations

import csv
import math
import shutil
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import requests
from testdata import series_path

DEMAND_DATASET = series_path("nab_aws_asg_cpu_5min")
STEP = 300.0

DEMAND = 'ph_demand{job="web"}'
MULTIPLE = "ph_demand"
GAPPY = 'ph_gappy{job="web"}'
NONFINITE = 'ph_nonfinite{job="web"}'
ALL_NAN = 'ph_all_nan{job="web"}'
NONFINITE_COUNT = 3

PROMETHEUS_CONFIG = "global:\n  scrape_interval: 1m\nscrape_configs: []\n"


@dataclass(frozen=True)
class Series:
    """One series to backfill: integer POSIX-second timestamps (ascending) and values."""

    name: str
    labels: dict[str, str]
    times: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class PromServer:
    """A running test Prometheus and what it holds."""

    url: str
    end: float
    """The last sample's time (POSIX seconds, a multiple of `STEP`)."""
    demand_times: np.ndarray
    demand_values: np.ndarray
    """`ph_demand{job="web"}` exactly as written."""
    gap: tuple[float, float]
    """(first missing, last missing) sample times of `ph_gappy`."""
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: Path | None = None
    """Set when the server speaks TLS (https URL): the self-signed certificate to trust."""


def missing_binaries() -> list[str]:
    """Return the names of the Debian binaries the fixture needs that are not on PATH."""
    return [name for name in ("prometheus", "promtool") if shutil.which(name) is None]


def read_dataset(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a `timestamp,value` dataset into integer POSIX seconds and float values (independent
    of the project's own CSV reader, so tests compare two readings)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    times = np.array([int(datetime.fromisoformat(t).timestamp()) for t, _ in rows], dtype=np.int64)
    values = np.array([float(v) for _, v in rows], dtype=float)
    return times, values


def fixture_series(end: int) -> tuple[list[Series], tuple[float, float]]:
    """Build the served series, shifted to end at `end` on the 5-minute grid; also return the gap."""
    times, values = read_dataset(DEMAND_DATASET)
    times = times - times[-1] + end
    assert np.all(times % int(STEP) == 0), (
        f"{DEMAND_DATASET.name} is not on a regular 5-minute grid"
    )
    last_day, last_two = times >= end - 86_400, times >= end - 2 * 86_400
    gap = (float(end - 86_400 - 7_200), float(end - 86_400 - STEP))
    keep = last_two & ~((times >= gap[0]) & (times <= gap[1]))
    weird = values[last_day].copy()
    weird[[10, 20, 30]] = [math.nan, math.inf, -math.inf]
    last_hour = times >= end - 3_600
    series = [
        Series("ph_demand", {"job": "web"}, times, values),
        Series("ph_demand", {"job": "api"}, times, values * 2),
        Series("ph_gappy", {"job": "web"}, times[keep], values[keep]),
        Series("ph_nonfinite", {"job": "web"}, times[last_day], weird),
        Series("ph_all_nan", {"job": "web"}, times[last_hour], np.full(last_hour.sum(), math.nan)),
    ]
    return series, gap


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_openmetrics(path: Path, series: Sequence[Series]) -> None:
    """Write `series` as OpenMetrics gauges (families grouped, timestamps in seconds, `# EOF`)."""
    lines: list[str] = []
    typed: set[str] = set()
    for s in sorted(series, key=lambda s: s.name):
        if s.name not in typed:
            lines.append(f"# TYPE {s.name} gauge")
            typed.add(s.name)
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        prefix = f"{s.name}{{{labels}}} "
        lines.extend(
            f"{prefix}{_number(v)} {int(t)}"
            for t, v in zip(s.times.tolist(), s.values.tolist(), strict=False)
        )
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def backfill(openmetrics: Path, data_dir: Path) -> None:
    """Create TSDB blocks from an OpenMetrics file with promtool (31-day blocks: few blocks, fast)."""
    cmd = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet"]
    # A hidden flag in Debian's 2.42; without it promtool writes one block per 2 h (30 s, not 0.3 s).
    cmd += ["--max-block-duration=744h", str(openmetrics), str(data_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"promtool backfill failed ({done.returncode}): {done.stderr.strip()}")


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bcrypt_hash(password: str) -> str:
    """Return a bcrypt hash of `password` for Prometheus's web config (libxcrypt via `crypt`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # Python 3.11 only (the project pins it); Debian's libxcrypt does bcrypt.

        return crypt.crypt(
            password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)
        )  # cost 4: fast to check


def self_signed_certificate(workdir: Path) -> tuple[Path, Path] | None:
    """Write a certificate and key for 127.0.0.1 with the openssl CLI; None when openssl is missing."""
    if shutil.which("openssl") is None:
        return None
    cert, key = workdir / "tls.crt", workdir / "tls.key"
    cmd = [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ]
    cmd += ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
    cmd += ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    return cert, key


@contextmanager
def running_prometheus(
    data_dir: Path,
    workdir: Path,
    web_config: Path | None = None,
    auth: tuple[str, str] | None = None,
    ca_file: Path | None = None,
) -> Iterator[str]:
    """Run `prometheus` on `data_dir` (no scrape targets, 400-day retention); yield its base URL
    (https when `web_config` turns TLS on; pass its certificate as `ca_file`)."""
    config = workdir / "prometheus.yml"
    config.write_text(PROMETHEUS_CONFIG, encoding="utf-8")
    port = free_port()
    cmd = [
        "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=400d",
        "--log.level=warn",
    ]
    if web_config is not None:
        cmd.append(f"--web.config.file={web_config}")
    log_path = workdir / "prometheus.log"
    url = f"{'https' if ca_file else 'http'}://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(url, proc, log_path, auth, ca_file)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(
    url: str,
    proc: subprocess.Popen[bytes],
    log_path: Path,
    auth: tuple[str, str] | None,
    ca_file: Path | None,
) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"prometheus exited with {proc.returncode}:\n{log_path.read_text()[-2000:]}"
            )
        try:
            verify = str(ca_file) if ca_file else True
            if (
                requests.get(f"{url}/-/ready", auth=auth, verify=verify, timeout=1).status_code
                == 200
            ):
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"prometheus at {url} not ready after 30 s:\n{log_path.read_text()[-2000:]}")


@contextmanager
def prometheus_with_demand(
    workdir: Path, now: float, username: str = "", password: str = ""
) -> Iterator[PromServer]:
    """Backfill the fixture series ending just before `now` and serve them; with `username` and
    `password`, the server requires that basic auth for every request and, when the openssl CLI
    is available to make a certificate, speaks TLS."""
    end = int(now // STEP * STEP - STEP)
    series, gap = fixture_series(end)
    openmetrics, data_dir = workdir / "demand.om.txt", workdir / "data"
    write_openmetrics(openmetrics, series)
    backfill(openmetrics, data_dir)
    web_config = ca_file = None
    if username:
        web_config = workdir / "web.yml"
        text = f"basic_auth_users:\n  {username}: {bcrypt_hash(password)}\n"
        if tls := self_signed_certificate(workdir):
            ca_file = tls[0]
            text += f"tls_server_config:\n  cert_file: {tls[0]}\n  key_file: {tls[1]}\n"
        web_config.write_text(text, encoding="utf-8")
    auth = (username, password) if username else None
    with running_prometheus(data_dir, workdir, web_config, auth, ca_file) as url:
        demand = series[0]
        times = demand.times.astype(float)
        yield PromServer(url, float(end), times, demand.values, gap, username, password, ca_file)


class GatewayProxy:
    """A tiny reverse proxy in front of a test Prometheus, standing in for an authenticating gateway
    (OAuth proxy, Mimir tenant header): it answers 401 unless the request carries `required`
    headers, can fail the next requests with given statuses, and counts the requests it got."""

    def __init__(self, upstream: str, required: dict[str, str] | None = None) -> None:
        self.upstream = upstream
        self.required = dict(required or {})
        self.fail_next: list[int] = []
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.requests += 1
                if any(self.headers.get(k) != v for k, v in proxy.required.items()):
                    return self._send(401, b"Unauthorized\n", "text/plain")
                if proxy.fail_next:
                    body = b'{"status":"error","errorType":"unavailable","error":"gateway says try later"}'
                    return self._send(proxy.fail_next.pop(0), body, "application/json")
                answer = requests.get(proxy.upstream + self.path, timeout=30)
                self._send(
                    answer.status_code, answer.content, answer.headers.get("Content-Type", "")
                )

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> GatewayProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
