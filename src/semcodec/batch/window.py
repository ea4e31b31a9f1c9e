"""The window of tasks in flight that every executor keeps: outcomes in task order, a few
tasks per worker ahead, so a million inputs never hold a million futures."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from semcodec.batch.outcome import Done, Outcome

#: tasks in flight per worker: enough to keep workers busy, few enough for a million inputs
WINDOW_PER_WORKER = 4
_END = object()


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
