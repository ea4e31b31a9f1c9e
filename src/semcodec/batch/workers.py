"""A worker's start, written once for the local pool and the cluster: one torch thread, the
parent's bf16 decision, the heap kept, every model loaded once."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys


def import_torch() -> None:
    """Import torch with Python's cyclic collector paused, then freeze what exists out of later
    collections: torch's import makes about a million objects that every full collection would
    rescan (a 64x64 encode: 0.5 s less CPU). Only a process's owner does this: the command
    line, or a batch worker."""
    if "torch" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        import torch  # noqa: F401
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def one_torch_thread() -> None:
    """One torch thread per task: the workers already share the CPUs between them."""
    import_torch()  # as the commands import it (collector paused)
    import torch

    torch.set_num_threads(1)


def load_models(models: tuple[str, ...], bf16: str | None = None) -> None:
    """The parent's bf16 decision (where it is not inherited), the heap kept, then every model
    loaded once."""
    from semcodec import runtime

    if bf16 is not None:
        os.environ[runtime.BF16_ENV] = bf16
    runtime.keep_heap()  # one torch thread per task (measured with one task per worker; local:NxT runs T)
    from semcodec.encoder.codec import get_codec

    for name in models:
        with contextlib.suppress(Exception):  # a bad model is reported per file when used
            get_codec(name)


def start_worker(models: tuple[str, ...], bf16: str | None = None, *, sigint: bool = True) -> None:
    """A worker's start, for -j and --cluster alike (``sigint=False``: Ctrl-C is left to the
    parent, which stops the pool)."""
    if not sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_torch_thread()
    load_models(models, bf16)


def init_pool_worker(models: tuple[str, ...]) -> None:
    """The local pool's initializer: one torch thread, models loaded once, Ctrl-C to the parent."""
    start_worker(models, sigint=False)


def decide_before_workers() -> None:
    """Make the bf16 decision once, here, and hand it to every worker (files must not depend
    on which worker encoded them): forked workers inherit it, spawned ones read the env."""
    import_torch()
    from semcodec import runtime

    os.environ.setdefault(runtime.BF16_ENV, "1" if runtime.bf16_decision().use else "0")
