"""BLAS on one thread while the integer grid's numpy kernels run, restored after.

The numpy kernels (``generator.py``, ``enhancer.py``) run their fp32 matrix products on band
threads of their own. The BLAS numpy links would start its own threads inside each of them:
more threads than cores, spinning while they wait for work (a q50 Kodak decode on the loaded
2-core EPYC: 0.7–2.5 s wall instead of 0.15 s, docs/benchmarks.md).

threadpoolctl finds the loaded BLAS libraries and sets their threads; the scan of the process's
libraries is done once (``controller``: numpy's BLAS is loaded with numpy, before any kernel).
Libraries differ in the reach of that setting:

- OpenBLAS on its own threads (numpy's wheels for Linux and Windows), BLIS: one count for the
  whole process. Kernels on several threads share ``GUARD``: the first to enter limits BLAS to
  one thread, the last to leave puts back what the process had. threadpoolctl from 3.8 lets
  only the thread that last set OpenBLAS's count set it again (others are ignored); the guard
  releases that claim around its own calls, which its lock orders.
- MKL and OpenBLAS on OpenMP: a count per thread. The thread that enters is limited, and each
  band thread limits itself as it starts (``limit_this_thread``, the pools' initializer); band
  threads end with their pool.

Where no BLAS library with a thread setting is loaded (Apple's Accelerate, a reference BLAS),
all this does nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from threadpoolctl import OpenBLASController, ThreadpoolController


@cache
def controller() -> ThreadpoolController:
    """numpy's BLAS libraries, found once (a scan of the process's libraries: 0.2–2.6 ms)."""
    assert np.ndarray  # numpy is imported, so its BLAS is loaded before the scan
    return ThreadpoolController().select(user_api="blas")


def blas_threads() -> int | None:
    """The most threads a loaded BLAS library will use now (None: none that can be set)."""
    counts = [lib["num_threads"] for lib in controller().info()]
    return max(counts) if counts else None


def release_claim() -> None:
    """Let any thread set OpenBLAS's process-wide count next (threadpoolctl ≥ 3.8 otherwise
    ignores all but the thread that set it last)."""
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


@dataclass
class OneThreadGuard:
    """Holds BLAS at one thread while anyone is inside; counted, so that overlapping holders
    on several threads neither restore too early nor leave BLAS at one thread after."""

    holders: int = 0
    limiter: Any = None  # threadpoolctl's limiter, which restores the process's setting
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self) -> None:
        """The first holder limits BLAS to one thread."""
        with self.lock:
            if self.holders == 0:
                release_claim()
                self.limiter = controller().limit(limits=1)
                release_claim()
            self.holders += 1

    def leave(self) -> None:
        """The last holder puts back the threads the process had before the first entered."""
        with self.lock:
            self.holders -= 1
            if self.holders == 0:
                limiter, self.limiter = self.limiter, None
                release_claim()
                limiter.restore_original_limits()
                release_claim()

    def forget(self) -> None:
        """A forked child starts with no holders and a free lock (its parent's threads, and
        a lock one of them may have held, are not in it); its BLAS keeps the count it had."""
        self.holders, self.limiter, self.lock = 0, None, threading.Lock()

    def limit_this_thread(self) -> None:
        """One BLAS thread for a band thread (where the count is per thread; elsewhere the
        guard's setting already holds): a pool's initializer, inside the guard."""
        with self.lock:
            release_claim()
            controller().limit(limits=1)
            release_claim()


GUARD = OneThreadGuard()
if hasattr(os, "register_at_fork"):  # batch workers are forked on Linux
    os.register_at_fork(after_in_child=GUARD.forget)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block (a decorator too): our band threads parallelise."""
    GUARD.enter()
    try:
        yield
    finally:
        GUARD.leave()


def limit_this_thread() -> None:
    """A band pool's initializer: BLAS on one thread in this thread."""
    GUARD.limit_this_thread()


@contextmanager
def kernel_pool(threads: int) -> Iterator[Executor | None]:
    """The numpy kernels' threads: BLAS on one thread inside, and a pool of ``threads`` band
    threads that each limit their own BLAS (None for one thread: the caller's thread runs)."""
    with one_blas_thread():
        if threads == 1:
            yield None
            return
        with ThreadPoolExecutor(threads, initializer=limit_this_thread) as pool:
            yield pool
