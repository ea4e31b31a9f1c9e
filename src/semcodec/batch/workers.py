"""What the batch's executors share: a file's outcome, the window of tasks in flight, and a
worker's start (models loaded once). The local pool (``batch``) and the cluster (``cluster``)
both import it, so neither imports the other's module for these."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from semcodec.cli.common import describe_error


@dataclass
class Outcome:
    """What processing one file produced; plain data so it crosses process boundaries."""

    ok: bool
    data: bytes = b""
    extra: bytes | None = None
    info: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    trace: str = ""
    seconds: float = 0.0


def guarded(fn: Callable[[Any], Outcome], task: Any) -> Outcome:
    """Run one file's work, turning any failure into a reportable outcome (the batch goes on)."""
    started = time.perf_counter()
    try:
        outcome = fn(task)
    except Exception as exc:  # noqa: BLE001 - reported per file, the batch continues
        outcome = Outcome(False, error=describe_error(exc), trace=traceback.format_exc())
    outcome.seconds = time.perf_counter() - started
    return outcome


#: tasks in flight per worker: enough to keep workers busy, few enough for a million inputs
WINDOW_PER_WORKER = 4
_END = object()


@dataclass(frozen=True)
class Done:
    """A task that needs no worker: its outcome is known already (another process wrote its
    outputs meanwhile), so it is settled in its turn without being computed."""

    outcome: Outcome


def run_here(fn: Callable[[Any], Outcome], task: Any) -> Outcome:
    """One task's outcome in this process (a ``Done`` one is not computed)."""
    return task.outcome if isinstance(task, Done) else fn(task)


def windowed(
    submit: Callable[[Any], Any],
    result: Callable[[Any], Outcome],
    tasks: Iterable[Any],
    window: int,
) -> Iterator[Outcome]:
    """Outcomes in task order with at most ``window`` tasks submitted and not yet collected."""

    def hand_out(task: Any) -> Any:
        """Submit a task to the workers, or keep a ``Done`` one as it is."""
        return task if isinstance(task, Done) else submit(task)

    pending: deque[Any] = deque()
    queue = iter(tasks)
    for task in itertools.islice(queue, window):
        pending.append(hand_out(task))
    while pending:
        head = pending.popleft()
        nxt = next(queue, _END)
        if nxt is not _END:
            pending.append(hand_out(nxt))
        yield head.outcome if isinstance(head, Done) else result(head)


def one_torch_thread() -> None:
    """One torch thread per task: the workers already share the CPUs between them."""
    from semcodec.cli.common import import_torch

    import_torch()  # as the commands import it (collector paused)
    import torch

    torch.set_num_threads(1)


def load_models(models: tuple[str, ...], bf16: str | None = None) -> None:
    """A worker's start, for -j and --cluster alike: the parent's bf16 decision (where it is
    not inherited), the heap kept, then every model loaded once."""
    from semcodec import runtime

    if bf16 is not None:
        os.environ[runtime.BF16_ENV] = bf16
    runtime.keep_heap()  # one task at a time per worker process
    from semcodec.encoder.codec import get_codec

    for name in models:
        with contextlib.suppress(Exception):  # a bad model is reported per file when used
            get_codec(name)
