"""Speed benchmark, timing: the median and the timed call that the codec runs and the
networks alone share (one module, so that neither imports the other)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["median", "time_call"]


def median(xs: Sequence[float]) -> float:
    """Median, robust to one slow run on a shared machine."""
    return float(statistics.median(xs))


def time_call(fn: Callable[[], Any], repeats: int) -> tuple[float, float, list[float]]:
    """Median wall and CPU seconds of ``fn`` after one untimed warm-up call, and the runs."""
    fn()
    runs, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return median(runs), median(cpus), runs
