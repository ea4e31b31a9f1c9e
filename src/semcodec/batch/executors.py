"""The executors of a batch: this process, or a pool of worker processes on this machine that
runs a killed worker's tasks again (the Dask cluster is ``batch.cluster``)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from semcodec.batch.outcome import Outcome
from semcodec.batch.window import WINDOW_PER_WORKER, run_here, windowed
from semcodec.batch.workers import decide_before_workers, init_pool_worker
from semcodec.defaults import DEFAULT_CLUSTER_TIMEOUT


def _mp_context() -> mp.context.BaseContext:
    """fork on Linux (workers start instantly, torch threads reset by the initializer), else spawn."""
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context("spawn")


#: how often a task lost with a dead worker process is run again before it is failed
RETRIES = 1


@dataclass
class _Submitted:
    """A task handed to the local pool: the pool it went to and how often it was retried."""

    task: Any
    future: Future
    pool: ProcessPoolExecutor
    tries: int = 0


class LocalPool:
    """Worker processes on this machine; a task lost with a killed worker runs again in a
    fresh pool (once), so a batch neither hangs nor loses files when a worker dies."""

    def __init__(self, fn: Callable[[Any], Outcome], jobs: int, models: tuple[str, ...]) -> None:
        self.fn, self.jobs, self.models = fn, jobs, models
        self.pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        """A pool whose workers load the models once and leave Ctrl-C to this process."""
        return ProcessPoolExecutor(
            self.jobs,
            mp_context=_mp_context(),
            initializer=init_pool_worker,
            initargs=(self.models,),
        )

    def _fresh(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        """The pool to use after ``broken`` broke: a new one, started once per breakage."""
        if self.pool is broken:
            broken.shutdown(wait=False, cancel_futures=True)
            self.pool = self._start()
        return self.pool

    def submit(self, task: Any, tries: int = 0) -> _Submitted:
        """Hand one task to the pool (a broken pool is replaced first)."""
        pool = self.pool
        try:
            return _Submitted(task, pool.submit(self.fn, task), pool, tries)
        except BrokenProcessPool:
            return self.submit(task, tries) if self._fresh(pool) is not pool else self._dead(task)

    def _dead(self, task: Any) -> _Submitted:
        """A submission that can only fail (the pool cannot be restarted)."""
        future: Future = Future()
        future.set_exception(BrokenProcessPool("cannot start worker processes"))
        return _Submitted(task, future, self.pool, RETRIES)

    def result(self, item: _Submitted) -> Outcome:
        """The task's outcome; run again in a fresh pool if its worker process died."""
        try:
            return item.future.result()
        except BrokenProcessPool:
            if item.tries >= RETRIES:
                return Outcome(False, error="its worker process died (killed, or out of memory)")
            self._fresh(item.pool)
            return self.result(self.submit(item.task, item.tries + 1))

    def close(self, interrupted: bool) -> None:
        """Wait for the workers, or on an interrupt stop them at once."""
        if interrupted:
            for process in list(getattr(self.pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    process.kill()
        self.pool.shutdown(wait=not interrupted, cancel_futures=True)


@contextlib.contextmanager
def processed(
    fn: Callable[[Any], Outcome],
    tasks: Collection[Any],
    jobs: int,
    models: tuple[str, ...],
    cluster: str | None = None,
    debug: bool = False,
    cluster_timeout: float = DEFAULT_CLUSTER_TIMEOUT,
) -> Iterator[Iterator[Outcome]]:
    """Outcomes in task order: from this process, a pool of ``jobs`` workers, or a cluster."""
    if cluster is not None and tasks:
        from semcodec.batch.cluster import cluster_outcomes

        decide_before_workers()
        with cluster_outcomes(fn, tasks, cluster, models, debug, cluster_timeout) as outcomes:
            yield outcomes
        return
    if jobs == 0:
        jobs = os.cpu_count() or 1
    if jobs <= 1 or len(tasks) <= 1:
        yield (run_here(fn, task) for task in tasks)
        return
    decide_before_workers()
    pool = LocalPool(fn, min(jobs, len(tasks)), models)
    interrupted = True
    try:
        yield windowed(pool.submit, pool.result, tasks, WINDOW_PER_WORKER * pool.jobs)
        interrupted = False
    finally:
        pool.close(interrupted)
