"""Shared pytest fixtures.

Real Prometheus servers (see promfixture.py): `prometheus_server` serves the demand fixture
series without authentication over http, `prometheus_basic_auth` the same series behind basic
auth and TLS (https with a self-signed `server.ca_file`; plain http if the openssl CLI is
missing). Each starts at most once per test session (per worker under `pytest -n`), and only when
a test asks for it; a test that asks for one is marked `prometheus`, so `make test-fast` skips it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from pipe_progress import (  # noqa: F401  (hooks: a progress line every 20 s through a pipe)
    pytest_collection_finish,
    pytest_configure,
    pytest_runtest_logreport,
    pytest_unconfigure,
    pytest_xdist_node_collection_finished,
)
from promfixture import PromServer, missing_binaries, prometheus_with_demand

PROMETHEUS_FIXTURES = {"prometheus_server", "prometheus_basic_auth"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts a real Prometheus carries the `prometheus` marker."""
    for item in items:
        if PROMETHEUS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.prometheus)


# No test reads or writes the user's refit cache (~/.cache/predictive-headroom/refits): the CLI's
# cache is off unless a test points PH_CACHE_DIR at its own directory (subprocesses inherit this).
os.environ["PH_CACHE_DIR"] = "off"

# The e2e tier (tests/e2e, a real control plane built with Go) runs only under `make e2e`.
collect_ignore = [] if os.environ.get("PH_E2E") else ["e2e"]


def _require_prometheus() -> None:
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"needs the Debian package 'prometheus' ({', '.join(missing)} not on PATH; `make test` installs it)"
        )


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    """A real Prometheus holding the fixture series, ending just before now."""
    _require_prometheus()
    with prometheus_with_demand(tmp_path_factory.mktemp("prometheus"), time.time()) as server:
        yield server


@pytest.fixture(scope="session")
def prometheus_basic_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    """Like `prometheus_server`, but every request needs basic auth (`server.username`/`password`),
    over TLS when `server.ca_file` is set."""
    _require_prometheus()
    workdir = tmp_path_factory.mktemp("prometheus-auth")
    with prometheus_with_demand(
        workdir, time.time(), username="headroom", password="s3cret-Pa55"
    ) as server:
        yield server
