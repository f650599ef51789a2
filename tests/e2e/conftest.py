"""Fixtures of the e2e tier (`make e2e`): one real control plane per session (see cluster.py).

The binaries come from `make e2e-bins` (tests/e2e/build.sh); without them every test here fails
with the command that builds them. A failed test's report ends with the tail of every
component's log (all logs stay in the session's temp dir).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # cluster.py & co., and tests/deploy_render.py

from cluster import Cluster, bins_dir, missing_binaries  # noqa: E402
from karpenter import Karpenter, KarpenterError  # noqa: E402

NODE_READY_DELAY = float(os.environ.get("PH_E2E_NODE_READY_DELAY", "1"))
"""Seconds kwok takes to turn a new node Ready once its Node object exists."""
BOOT_DELAY = float(os.environ.get("PH_E2E_BOOT_DELAY", "15"))
"""Seconds Karpenter's kwok provider takes to create the Node of a NodeClaim it launched (the
KWOKNodeClass's nodeRegistrationDelay): with NODE_READY_DELAY, a new node's boot time."""

_CLUSTER: list[Cluster] = []


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    bins = bins_dir()
    missing = missing_binaries(bins)
    if missing:
        pytest.fail(
            f"the e2e binaries {', '.join(missing)} are not in {bins}: run `make e2e-bins` first "
            "(it builds them from their Go modules, once)",
            pytrace=False,
        )
    workdir = tmp_path_factory.mktemp("cluster")
    with Cluster(workdir, bins, node_ready_delay=NODE_READY_DELAY) as running:
        _CLUSTER.append(running)
        yield running
    _CLUSTER.clear()


@pytest.fixture(scope="session")
def karpenter(cluster: Cluster) -> Iterator[Karpenter]:
    """Karpenter with its kwok provider on the session's cluster, started by the first test that
    needs it; a Karpenter that was not built or does not start fails those tests (with why)."""
    running = Karpenter(cluster, boot_delay=BOOT_DELAY)
    try:
        running.start()
    except KarpenterError as exc:
        pytest.fail(f"Karpenter is needed here and did not start: {exc}", pytrace=False)
    yield running
    running.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _CLUSTER:
        report.sections.append(("control-plane logs (tails)", _CLUSTER[0].logs()))
        for extra in getattr(item, "_e2e_logs", []):
            report.sections.append((f"log {extra.name}", extra.read_text(errors="replace")[-8000:]))
