"""The batch runner of encode and decode: every output is checked before any work, files are
processed in this process or a pool of workers, written atomically and reported one line each.

A failing file is reported and the batch goes on; the exit status says whether any failed.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..errors import SemcodecError
from ..imageio import OutputExists, atomic_write_bytes
from ..progress import Progress
from .common import (
    EXIT_FAILURE,
    STDIO,
    debug_enabled,
    debug_option,
    describe_error,
    error,
    warning,
    with_name,
)


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


def guarded(fn: Callable[[Any], Outcome], task: Any) -> Outcome:
    """Run one file's work, turning any failure into a reportable outcome (the batch goes on)."""
    try:
        return fn(task)
    except Exception as exc:  # noqa: BLE001 - reported per file, the batch continues
        return Outcome(False, error=describe_error(exc), trace=traceback.format_exc())


# the in-process batch's tile progress (Codec.progress); None in worker processes
_TILE_PROGRESS: Callable[[str, int, int], None] | None = None


def tile_progress() -> Callable[[str, int, int], None] | None:
    """What a worker function hands to Codec.progress: the batch's bar in this process only."""
    return _TILE_PROGRESS


def _decide_before_workers() -> None:
    """Make the bf16 decision once, here, and hand it to every worker (files must not depend
    on which worker encoded them): forked workers inherit it, spawned ones read the env."""
    from .. import runtime

    os.environ.setdefault(runtime.BF16_ENV, "1" if runtime.bf16_decision().use else "0")


def _init_worker(models: tuple[str, ...]) -> None:
    """Pool initializer: one torch thread per worker, models loaded once, Ctrl-C left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)
    from ..codec import get_codec

    for name in models:
        with contextlib.suppress(Exception):  # a bad model is reported per file when used
            get_codec(name)


def _mp_context() -> mp.context.BaseContext:
    """fork on Linux (workers start instantly, torch threads reset by the initializer), else spawn."""
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context("spawn")


@contextlib.contextmanager
def processed(
    fn: Callable[[Any], Outcome], tasks: list[Any], jobs: int, models: tuple[str, ...]
) -> Iterator[Iterator[Outcome]]:
    """Outcomes in task order, from this process or from a pool of ``jobs`` workers."""
    if jobs == 0:
        jobs = os.cpu_count() or 1
    if jobs <= 1 or len(tasks) <= 1:
        yield (fn(task) for task in tasks)
        return
    _decide_before_workers()
    pool = _mp_context().Pool(min(jobs, len(tasks)), initializer=_init_worker, initargs=(models,))
    try:
        yield pool.imap(fn, tasks, chunksize=1)
        pool.close()
        pool.join()
    finally:
        pool.terminate()


def _stdout_binary() -> io.BufferedIOBase:
    """The binary stdout, for .sem or image data written to a pipe."""
    return sys.stdout.buffer


def read_input(name: str, stdin_data: bytes | None) -> bytes:
    """Bytes of a file argument (``-`` is stdin, read once by the caller)."""
    if name == STDIO:
        assert stdin_data is not None
        return stdin_data
    return Path(name).read_bytes()


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (existing or not)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.abspath(a) == os.path.abspath(b)


def output_name(inp: str, output: str | None, output_dir: Path | None, suffix: str) -> str:
    """Where one input's output goes: -o, -d DIR/<stem><suffix>, or next to the input; - is stdout."""
    if output is not None:
        return output
    if inp == STDIO:
        if output_dir is not None:
            raise click.UsageError("cannot name the output of stdin ('-') in a directory; use -o")
        return STDIO
    try:
        target = Path(inp).with_suffix(suffix)
    except ValueError:  # no file name to replace the suffix of, e.g. '..'
        target = Path(inp + suffix)
    return str(output_dir / target.name) if output_dir is not None else str(target)


def check_io_args(inputs: Sequence[str], output: str | None, output_dir: Path | None) -> None:
    """Usage rules shared by encode and decode (exit 2)."""
    if output is not None and output_dir is not None:
        raise click.UsageError("-o and -d cannot be used together")
    if output is not None and len(inputs) > 1:
        raise click.UsageError("-o takes one input; use -d DIR for several")
    if STDIO in inputs and len(inputs) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    if output_dir is not None and not output_dir.is_dir():
        raise SemcodecError(f"output directory {str(output_dir)!r} does not exist")


def plan_problem(inp: str, out: str, force: bool, taken: set[str]) -> str | None:
    """Why writing ``out`` for ``inp`` must be refused before any work is done, or None."""
    if out == STDIO:
        if _stdout_binary().isatty():
            return "refusing to write binary data to a terminal (use -o FILE or a pipe)"
        return None
    if inp != STDIO and _same_file(inp, out):
        return f"output {out!r} is the input file"
    key = os.path.abspath(out)
    if key in taken:
        return f"output {out!r} would be written twice in this batch"
    taken.add(key)
    if Path(out).is_dir():
        return f"cannot write {out!r}: is a directory"
    parent = Path(out).parent
    if not parent.is_dir():
        return f"cannot write {out!r}: directory {str(parent)!r} does not exist"
    if not force and os.path.lexists(out):
        return str(OutputExists(f"cannot write {out!r}: file exists (use --force to overwrite)"))
    return None


def deliver(out: str, data: bytes, force: bool) -> None:
    """Write one output: atomically to a file, or to stdout."""
    if out == STDIO:
        stream = _stdout_binary()
        view = memoryview(data)
        while view:  # a pipe closed mid-write can return a short count instead of raising
            view = view[stream.write(view) :]
        stream.flush()
    else:
        atomic_write_bytes(out, data, force)


def display(path: str, stdio: str) -> str:
    """How a file argument is shown in messages."""
    return stdio if path == STDIO else path


class BatchProgress(Progress):
    """The batch's bar on a terminal: shown for several files, or for one tiled image's tiles."""

    def __init__(self, total: int, enabled: bool) -> None:
        super().__init__(total, enabled=enabled)
        self.tty = self.enabled
        self.enabled = self.tty and total > 1

    def tiles(self, stage: str, done: int, total: int) -> None:
        """Progress within one tiled image (Codec.progress): shown even for a single file."""
        if self.tty:
            self.enabled = True
            self.detail = f"{stage} tile {done}/{total}"
            self.draw()

    def step(self) -> None:
        """One more file done."""
        self.advance(1)


@dataclass
class Batch:
    """Per-run bookkeeping: failures, progress and the summary line."""

    total: int
    quiet: bool
    debug: bool
    to_stdout: bool = False
    failed: int = 0
    progress: BatchProgress = field(init=False)

    def __post_init__(self) -> None:
        """Show the (empty) bar at once on a terminal."""
        self.progress = BatchProgress(self.total, not self.quiet)
        self.progress.draw()

    def fail(self, name: str, message: str, trace: str = "") -> None:
        """Report one failed file (traceback first with --debug) and count it."""
        self.failed += 1
        self.progress.clear()
        if self.debug and trace:
            click.echo(trace.rstrip(), err=True)
        error(with_name(name, message))
        self.progress.draw()

    def warn(self, name: str, message: str) -> None:
        """A per-file warning on stderr, unless --quiet."""
        if not self.quiet:
            self.progress.clear()
            warning(with_name(name, message))
            self.progress.draw()

    def line(self, text: str) -> None:
        """A per-file result line: stdout, or stderr when stdout carries the data."""
        if not self.quiet:
            self.progress.clear()
            click.echo(text, err=self.to_stdout)
            self.progress.draw()

    def finish(self, ctx: click.Context) -> None:
        """Summary and exit 1 if anything failed."""
        self.progress.close(keep=False)
        if self.failed:
            if self.total > 1:
                error(f"{self.failed} of {self.total} files failed")
            ctx.exit(EXIT_FAILURE)


def run_batch(
    ctx: click.Context,
    inputs: Sequence[str],
    outputs: list[str],
    make_task: Callable[[str, bytes | None], Any],
    worker: Callable[[Any], Outcome],
    report: Callable[[str, str, Outcome], str],
    *,
    force: bool,
    quiet: bool,
    jobs: int,
    models: tuple[str, ...],
    extra_out: str | None = None,
) -> None:
    """Check every output first, process the rest (in parallel if asked), write and report."""
    batch = Batch(len(inputs), quiet, debug_enabled(ctx), to_stdout=STDIO in outputs)
    stdin_data = stdin_bytes() if STDIO in inputs else None
    taken: set[str] = set()
    runnable: list[tuple[str, str]] = []
    tasks = []
    for inp, out in zip(inputs, outputs, strict=True):
        problem = plan_problem(inp, out, force, taken)
        if problem is None and extra_out is not None:
            problem = plan_problem(inp, extra_out, force, taken)
        if problem is not None:
            batch.fail(display(inp, "<stdin>"), problem)
            batch.progress.step()
            continue
        runnable.append((inp, out))
        tasks.append(make_task(inp, stdin_data))
    global _TILE_PROGRESS
    _TILE_PROGRESS = batch.progress.tiles if jobs <= 1 or len(tasks) <= 1 else None
    with processed(worker, tasks, jobs, models) as outcomes:
        for (inp, out), outcome in zip(runnable, outcomes, strict=True):
            name = display(inp, "<stdin>")
            if outcome.ok:
                try:
                    deliver(out, outcome.data, force)
                    if extra_out is not None and outcome.extra is not None:
                        atomic_write_bytes(extra_out, outcome.extra, force)
                except BrokenPipeError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported per file
                    outcome = Outcome(
                        False, error=describe_error(exc), trace=traceback.format_exc()
                    )
            if outcome.ok:
                for text in outcome.warnings:
                    batch.warn(name, text)
                batch.line(report(name, display(out, "<stdout>"), outcome))
            else:
                batch.fail(name, outcome.error, outcome.trace)
            batch.progress.step()
    batch.finish(ctx)


def stdin_bytes() -> bytes:
    """All of stdin, read once."""
    return sys.stdin.buffer.read()


io_options = [
    click.option(
        "-o", "--output", metavar="OUT", help="Output file ('-' for stdout); one input only."
    ),
    click.option(
        "-d",
        "--output-dir",
        type=click.Path(file_okay=False, path_type=Path),
        metavar="DIR",
        help="Write outputs into DIR (must exist).",
    ),
    click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=0),
        default=1,
        show_default=True,
        help="Parallel worker processes for several inputs (0: one per CPU).",
    ),
    click.option("-f", "--force", is_flag=True, help="Overwrite existing outputs."),
    click.option("--quiet", is_flag=True, help="No per-file lines, warnings or progress bar."),
    debug_option,
]
