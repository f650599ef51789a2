"""The HTTP port under strangers' tokens (measured, not asserted; issue 55 item 2).

The daemon's main port (TLS, the access `Guard` asking the API stand-in `tests/fake_apiserver.py`
with the daemon's own review settings) is hit by `--junk` clients, each from its own loopback
address (127.0.1.k) over one kept-alive connection (a new one when the server closes it), each
sending `/metrics` with a new made-up token as soon as its previous request is answered (after
`--pause` seconds when it was refused). The API server holds every
stranger's TokenReview `--review-delay` seconds (a slow API server; 0 answers at once). Meanwhile
an authorised reader (its token known from one scrape before) scrapes `/metrics`, and a probe
gets the main port's `/healthz`, each over a new connection, every `--every` seconds: first
for `--baseline` seconds without strangers (the machine's own latency), then for `--seconds`
with them.

Printed: the reader's scrape and the probe's latency (p50, p95, max, and how many took longer
than the 10 s Prometheus waits by default), TokenReviews the API server received a second (mean
and the busiest second), and the strangers' answers by status. The junk clients run in their own
process so their TLS work does not share the server's interpreter lock.

    .venv/bin/python bench/auth_front_bench.py [--junk 50] [--seconds 30] [--review-delay 1]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import http.client
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fake_apiserver import FakeApiServer  # noqa: E402

from predictive_headroom.daemon.access import Guard  # noqa: E402
from predictive_headroom.daemon.httpserver import HttpServer  # noqa: E402
from predictive_headroom.daemon.tls import self_signed, server_context  # noqa: E402
from predictive_headroom.kube.access import KubeAccessReviewer  # noqa: E402

READER = "system:serviceaccount:monitoring:prometheus"
TIMEOUT = 30.0


class _Status:
    def readiness(self) -> tuple[bool, str]:
        return True, "fine"

    def status(self) -> dict[str, object]:
        return {}


def _connect(port: int, source: str = "127.0.0.1") -> http.client.HTTPSConnection:
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    return http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=TIMEOUT, context=tls, source_address=(source, 0)
    )


def _ask(conn: http.client.HTTPSConnection, path: str, token: str | None) -> int:
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    answer = conn.getresponse()
    answer.read()
    return answer.status


def _get(port: int, path: str, token: str | None) -> int:
    """The status of one GET over a new TLS connection."""
    conn = _connect(port)
    try:
        return _ask(conn, path, token)
    finally:
        conn.close()


def _junk(port: int, clients: int, until: float, pause: float, counts: dict[int, int]) -> None:
    """`clients` threads sending made-up tokens until the wall-clock time `until`."""
    lock = threading.Lock()

    def client(k: int) -> None:
        source, n = f"127.0.1.{k + 1}", 0
        conn = _connect(port, source)
        while time.time() < until:
            n += 1
            try:
                code = _ask(conn, "/metrics", f"junk-{k}-{n}")
            except (OSError, http.client.HTTPException):
                code = 0
                conn.close()
                conn = _connect(port, source)
            with lock:
                counts[code] = counts.get(code, 0) + 1
            if code in (0, 429, 503):
                time.sleep(pause)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT + until - time.time())


def _timed(port: int, path: str, token: str | None) -> float:
    began = time.monotonic()
    try:
        _get(port, path, token)
    except OSError:
        return TIMEOUT
    return time.monotonic() - began


def _scrapes(port: int, until: float, every: float) -> tuple[list[float], list[float]]:
    """The reader's scrape and the probe's latencies, one of each every `every` s until `until`."""
    scrapes, probes = [], []
    while time.time() < until:
        scrapes.append(_timed(port, "/metrics", "reader-token"))
        probes.append(_timed(port, "/healthz", None))
        time.sleep(max(0.0, every - scrapes[-1] - probes[-1]))
    return scrapes, probes


def _figures(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    late = sum(1 for s in ordered if s > 10.0)
    slowest = seconds.index(ordered[-1])
    return (
        f"{name}: n={len(ordered)} p50 {statistics.median(ordered):.3f} s, p95 {p95:.3f} s, "
        f"max {ordered[-1]:.3f} s (the {slowest + 1}th), over 10 s: {late}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junk", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--review-delay", type=float, default=1.0)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--baseline", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before the first scrape")
    args = parser.parse_args()
    with FakeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        api.tokens = {"reader-token": {"username": READER}}
        api.non_resource_grants = {(READER, "/metrics")}
        cert, key = self_signed(["localhost"], datetime.datetime.now(datetime.UTC))
        (Path(tmp) / "c").write_bytes(cert)
        (Path(tmp) / "k").write_bytes(key)
        context, _ = server_context(Path(tmp) / "c", Path(tmp) / "k", ["localhost"])
        guard = Guard(KubeAccessReviewer(api.api_client()))
        server = HttpServer(
            _Status(), lambda: b"ph_up 1\n", "127.0.0.1", 0, tls=context, guard=guard
        )
        server.start()
        port = server.port
        assert _get(port, "/metrics", "reader-token") == 200
        quiet = _scrapes(port, time.time() + args.baseline, args.every)
        if args.review_delay:
            api.delay(
                "POST",
                "tokenreviews",
                args.review_delay,
                when=lambda r: r.body["spec"]["token"] != "reader-token",
            )
        began = time.time()
        until = began + args.seconds
        counts = multiprocessing.Manager().dict()
        junk = multiprocessing.get_context("fork").Process(
            target=_junk, args=(port, args.junk, until, args.pause, counts)
        )
        junk.start()
        time.sleep(args.settle)  # let the strangers arrive first
        scrapes, probes = _scrapes(port, until, args.every)
        junk.join(TIMEOUT + 5)
        stamps = [
            r.at
            for r in api.requests("POST", "tokenreviews")
            if r.body["spec"]["token"] != "reader-token" and began <= r.at <= until
        ]
        per_second = collections.Counter(int(t - began) for t in stamps)
        server.stop()
    print(
        f"{args.junk} junk-token clients, {args.seconds:.0f} s, stranger reviews held "
        f"{args.review_delay:g} s by the API server"
    )
    print(_figures("without strangers: authorised /metrics scrape", quiet[0]))
    print(_figures("without strangers: main port /healthz", quiet[1]))
    print(_figures("authorised /metrics scrape", scrapes))
    print(_figures("main port /healthz", probes))
    busiest = max(per_second.values(), default=0)
    print(
        f"TokenReviews seen by the API server: {len(stamps)} ({len(stamps) / args.seconds:.1f}/s, "
        f"busiest second {busiest})"
    )
    print("strangers' answers:", dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
