"""Issue 45 items 1 and 2, shown: the real daemon (`run`) against the API stand-in, then `curl`.

`python tests/show_safe_adoption.py` prints what a person would see: team-b/payments-api (7
replicas, no pool label) refused and left at 7, and /report.json answered 401 without a token,
403 to an account without the right, 200 to one with it; plain HTTP on the TLS port gets nothing;
the probes answer on their own port. Not a test (tests/test_http_auth.py and
tests/test_ownership.py assert the same); needs `curl`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from fake_apiserver import FakeApiServer
from test_daemon import write_kubeconfig

READER = "system:serviceaccount:monitoring:prometheus-k8s"


def _port(log: Path, pattern: str) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.2)
    raise SystemExit(f"the daemon did not start:\n{log.read_text()}")


def _sh(command: str) -> None:
    print("$", command)
    out = subprocess.run(command, shell=True, capture_output=True, text=True)
    print(out.stdout.strip()[:800], "\n")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ph-show-"))
    report = tmp / "reports" / "20261127T000000Z"
    report.mkdir(parents=True)
    (report / "report.json").write_text(json.dumps({"pools": [{"name": "payments"}]}))
    (report / "index.html").write_text("<html>report</html>")
    with FakeApiServer() as api:
        api.tokens = {
            "reader-token": {"username": READER},
            "other-token": {"username": "system:serviceaccount:team-b:app"},
        }
        api.non_resource_grants = {(READER, p) for p in ("/metrics", "/report.json", "/last-run")}
        api.add_deployment("team-b", "payments-api", 7, pool=None)
        pool = {"name": "payments", "target": {"namespace": "team-b", "name": "payments-api"}}
        policy = tmp / "policy.yaml"
        policy.write_text(yaml.safe_dump({"pools": [{**pool, "maxReplicas": 5}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PH_", "KUBERNETES_"))}
        env.update(
            KUBECONFIG=str(write_kubeconfig(tmp / "kubeconfig", api)),
            PH_LISTEN_HOST="127.0.0.1",
            PH_LISTEN_PORT="0",
            PH_LEADER_ELECTION="false",
            PH_RECONCILE_INTERVAL="5",
            PH_LOG_FORMAT="text",
            PH_REPORT_DIR=str(tmp / "reports"),
        )
        log = tmp / "daemon.log"
        with log.open("wb") as out:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "predictive_headroom", "run", "--config", str(policy)],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            main_port = _port(log, r"on port (\d+) \(https")
            probes = _port(log, r"/healthz, /readyz on port (\d+)")
            while "refused" not in log.read_text():
                time.sleep(0.2)
            url = f"https://127.0.0.1:{main_port}"
            code = "-w ' -> HTTP %{http_code}\\n'"
            _sh(f"curl -sk {code} {url}/report.json")
            _sh(f"curl -sk {code} -H 'Authorization: Bearer other-token' {url}/report.json")
            _sh(f"curl -sk {code} -H 'Authorization: Bearer reader-token' {url}/report.json")
            _sh(f"curl -s {code} http://127.0.0.1:{main_port}/report.json")
            _sh(f"curl -s {code} http://127.0.0.1:{probes}/healthz")
            _sh(
                f"curl -sk -H 'Authorization: Bearer reader-token' {url}/metrics "
                "| grep -E '^predictive_headroom_(target_refused|errors_total.*ownership)'"
            )
            _sh(f"curl -sk -H 'Authorization: Bearer reader-token' {url}/last-run")
            print("team-b/payments-api replicas:", api.replicas("team-b", "payments-api"))
            print("writes to it:", len(api.writes("payments-api")))
            events = api.events("team-b")
            print(
                "Events:", [(e["type"], e["reason"], e["involvedObject"]["name"]) for e in events]
            )
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
