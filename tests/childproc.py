"""What the tests that start semcodec as a separate process share: its environment, and
Ctrl-C as a user's shell delivers it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def child_env(threads: int | None = 1) -> dict[str, str]:
    """The child's environment: this checkout's package first, ``threads`` per process (None:
    the parent's setting), so a child never runs an installed copy or oversubscribes the cores."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": SRC + (os.pathsep + path if path else "")}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def ctrl_c_as_at_a_terminal() -> None:
    """A ``preexec_fn``: undo an inherited SIGINT=ignore (a suite started with ``&`` or nohup),
    as a user's shell does for a foreground command; Python then turns Ctrl-C into
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
