"""`RefitQueue`: reloads while a refit runs coalesce, and a reload whose config the running refit
already fits asks for nothing more (issue 45: a busy machine ran the newest config's fit twice)."""

from __future__ import annotations

import logging

import pytest

from predictive_headroom.daemon.refit_requests import RefitQueue


def test_asks_while_one_waits_merge_into_it() -> None:
    queue = RefitQueue()
    assert queue.ask(["web"]) is True  # the caller starts a refit
    assert queue.ask(["api"]) is False  # merged
    assert queue.take(object()) == ["api", "web"]
    assert queue.ask(None) is True  # the next one
    assert queue.take(object()) is None  # every pool


def test_a_reload_applied_before_the_running_refit_started_asks_for_nothing_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = RefitQueue()
    newest, older = object(), object()
    queue.ask(["web"])
    queue.take(newest)  # the refit starts with the config in force: the newest
    with caplog.at_level(logging.INFO):
        # the reload that swapped that config in asks only now (a slow reconcile thread)
        assert queue.not_running(newest, ["web"]) == []
    assert "the refit running now already fits this config" in caplog.text
    assert queue.not_running(older, ["web"]) == ["web"], "another config is refitted"
    queue.finished()
    assert queue.not_running(newest, ["web"]) == ["web"], "nothing runs: refit"


def test_only_the_pools_the_running_refit_fits_are_covered() -> None:
    queue = RefitQueue()
    config = object()
    queue.ask(["web"])
    queue.take(config)
    assert queue.not_running(config, ["api", "web"]) == ["api"]
    queue.ask(None)
    queue.take(config)  # every pool
    assert queue.not_running(config, ["api", "web"]) == []
