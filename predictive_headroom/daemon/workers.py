"""Running one function over many items on a few threads that never hold up the process's exit.

`concurrent.futures` joins its worker threads when the interpreter exits, so a worker waiting on a
slow API call would delay a SIGTERM stop; these are daemon threads, started per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_bounded(fn: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """`[fn(item) for item in items]`, at most `workers` at a time, in the order of `items`.

    `fn` must not raise (the daemon's per-pool work catches everything); an exception escaping it
    is re-raised here after every item has been tried.
    """
    results: dict[int, R] = {}
    failures: list[BaseException] = []
    pending = iter(enumerate(items))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                nxt = next(pending, None)
            if nxt is None:
                return
            index, item = nxt
            try:
                results[index] = fn(item)
            except BaseException as exc:  # surfaced to the caller below
                failures.append(exc)

    threads = [
        threading.Thread(target=work, name=f"{name}-{k}", daemon=True)
        for k in range(min(workers, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [results[i] for i in range(len(items))]


def submit_bounded(
    fn: Callable[[T], R], items: Sequence[T], workers: int, name: str
) -> list[Future[R]]:
    """Start `fn(item)` for every item, at most `workers` at a time, on daemon threads; return at
    once with one Future per item (holding its result or its exception)."""
    futures: list[Future[R]] = [Future() for _ in items]

    def one(pair: tuple[Future[R], T]) -> None:
        future, item = pair
        try:
            future.set_result(fn(item))
        except BaseException as exc:  # the Future carries it to whoever waits
            future.set_exception(exc)

    pairs = list(zip(futures, items, strict=True))
    threading.Thread(
        target=map_bounded, args=(one, pairs, workers, name), name=name, daemon=True
    ).start()
    return futures


class SingleFlight:
    """Runs at most one call per key at a time, each on a daemon thread, and waits for it at most
    so long: a hung call holds its own thread, never the caller, and is not started again while it
    still runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Future[object]] = {}

    def run(self, key: str, fn: Callable[[], object], timeout: float) -> bool:
        """Start `fn()` unless the last call for `key` still runs; wait for it up to `timeout`
        seconds. True when it finished in time (its exception, if any, is raised here); False
        when it still runs (its outcome is then dropped)."""
        with self._lock:
            running = self._running.get(key)
            if running is not None and not running.done():
                return False
            future = self._running[key] = Future()

        def work() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # kept in the Future; the caller goes on without it
                future.set_exception(exc)

        threading.Thread(target=work, name=f"single-{key}", daemon=True).start()
        try:
            failure = future.exception(timeout=timeout)
        except FutureTimeout:
            return False
        if failure is not None:
            raise failure
        return True
