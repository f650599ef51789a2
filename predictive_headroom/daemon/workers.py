"""Running one function over many items on a few threads that never hold up the process's exit.

`concurrent.futures` joins its worker threads when the interpreter exits, so a worker waiting on a
slow API call would delay a SIGTERM stop; these are daemon threads, started per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
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
