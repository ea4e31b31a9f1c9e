"""What processing one file comes to: plain data that crosses process boundaries."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from semcodec.errors import describe_error


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


@dataclass(frozen=True)
class Done:
    """A task that needs no worker: its outcome is known already (another process wrote its
    outputs meanwhile), so it is settled in its turn without being computed."""

    outcome: Outcome


def guarded(fn: Callable[[Any], Outcome], task: Any) -> Outcome:
    """Run one file's work, turning any failure into a reportable outcome (the batch goes on)."""
    started = time.perf_counter()
    try:
        outcome = fn(task)
    except Exception as exc:  # noqa: BLE001 - reported per file, the batch continues
        outcome = Outcome(False, error=describe_error(exc), trace=traceback.format_exc())
    outcome.seconds = time.perf_counter() - started
    return outcome
