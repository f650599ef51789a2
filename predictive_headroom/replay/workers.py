"""Independent jobs in worker processes, results in the order given: the backtest's walk-forward
refits (each uses only the data up to its own instant, so none waits for another).

Each worker is a process of its own, forked from this one once it has imported the caller's
`preload` modules (Prophet, scikit-learn), so the workers share those pages with it (and with each
other) instead of each holding a copy; where fork is not the safe default (not Linux), a fork
server imports them once and the workers share its pages. All workers are forked at the start,
one after another, before any job has returned. A worker killed
while it runs a job (the kernel's OOM killer, a signal) costs that job one retry on a fresh
worker; a second death raises `WorkerDied` naming the job. An exception raised by the job itself
is raised here unchanged, as it would be in this process. A worker ends when this process does,
however it ends (SIGKILL, `os._exit`, as pytest-xdist's workers exit): without that, an idle worker
waits on its queue forever and keeps the fork server alive beside it.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import BaseContext
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 4
"""The default number of workers is the CPUs this process may use, at most this many: each
worker holds a model library of its own (about 150 MB) and the refits are few."""
RETRIES = 1
"""A job whose worker died is run again this many times before `WorkerDied`."""


def default_workers() -> int:
    """The CPUs this process may run on (`os.sched_getaffinity`), at most `MAX_WORKERS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cpus))


def _end_with_parent() -> None:
    """In a worker, at its start: exit as soon as the process that started the pool has ended
    (the parent's sentinel, `multiprocessing.parent_process()`, closes whichever way it ends)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def _context(preload: Sequence[str]) -> BaseContext:
    """How workers start: on Linux forked from this process after it imported `preload` (the
    workers share its pages), elsewhere from a fork server that imported them."""
    if sys.platform.startswith("linux"):
        for module in preload:
            importlib.import_module(module)
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    return context


class WorkerDied(Exception):
    """The worker process running job `index` died twice (killed, out of memory); `name` says
    which job it was, as the caller named it."""

    def __init__(self, index: int, name: str) -> None:
        super().__init__(
            f"{name}: its worker process died twice (killed, or out of memory?); "
            "run again, or with --workers 1 to fit in this process"
        )
        self.index = index
        self.name = name


def in_workers(
    job: Callable[[T], R],
    inputs: Sequence[T],
    workers: int,
    *,
    name: Callable[[int], str] = lambda k: f"job {k + 1}",
    done: Callable[[int, R], None] | None = None,
    preload: Sequence[str] = (),
) -> list[R]:
    """`[job(x) for x in inputs]`, run in up to `workers` processes (one: in this process, in
    order); `done(k, result)` is called as each finishes (in completion order). `job` and the
    inputs must be picklable; `name(k)` names job k in `WorkerDied`."""
    if workers <= 1 or len(inputs) <= 1:
        out = []
        for k, x in enumerate(inputs):
            out.append(job(x))
            if done is not None:
                done(k, out[-1])
        return out
    context = _context(preload)

    def fresh() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_end_with_parent)

    results: list[Any] = [None] * len(inputs)
    tries = [0] * len(inputs)
    queue = deque(range(len(inputs)))
    idle = [fresh() for _ in range(min(workers, len(inputs)))]
    running: dict[Future[R], tuple[int, ProcessPoolExecutor]] = {}
    # The objects made so far are left out of garbage collection while the workers run, so a
    # forked worker's collector never writes to (and so copies) the pages it shares with this one.
    gc.freeze()
    try:
        while queue or running:
            while queue and idle:
                k, pool = queue.popleft(), idle.pop()
                tries[k] += 1
                running[pool.submit(job, inputs[k])] = (k, pool)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                k, pool = running.pop(future)
                try:
                    results[k] = future.result()
                except BrokenProcessPool:
                    pool.shutdown(wait=False)
                    if tries[k] > RETRIES:
                        raise WorkerDied(k, name(k)) from None
                    queue.appendleft(k)
                    pool = fresh()
                else:
                    if done is not None:
                        done(k, results[k])
                idle.append(pool)
    finally:
        gc.unfreeze()
        for pool in [*idle, *(p for _, p in running.values())]:
            pool.shutdown(wait=False, cancel_futures=True)
    return results


__all__ = ["MAX_WORKERS", "WorkerDied", "default_workers", "in_workers"]
