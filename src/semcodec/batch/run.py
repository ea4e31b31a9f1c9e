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
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from semcodec.batch.report import FileRecord, Report, bits_per_pixel
from semcodec.batch.verify import Existing
from semcodec.batch.workers import (
    WINDOW_PER_WORKER,
    Done,
    Outcome,
    load_models,
    one_torch_thread,
    run_here,
    windowed,
)
from semcodec.cli.common import (
    EXIT_FAILURE,
    STDIO,
    debug_enabled,
    debug_option,
    describe_error,
    error,
    import_torch,
    warning,
    with_name,
)
from semcodec.cli.dataset import DatasetOptions
from semcodec.errors import SemcodecError
from semcodec.imageio import OutputExists, atomic_write_bytes, remove_stale_temps
from semcodec.progress import Progress

# the in-process batch's tile progress (Codec.progress); None in worker processes
_TILE_PROGRESS: Callable[[str, int, int], None] | None = None


def tile_progress() -> Callable[[str, int, int], None] | None:
    """What a worker function hands to Codec.progress: the batch's bar in this process only."""
    return _TILE_PROGRESS


def _decide_before_workers() -> None:
    """Make the bf16 decision once, here, and hand it to every worker (files must not depend
    on which worker encoded them): forked workers inherit it, spawned ones read the env."""
    import_torch()
    from semcodec import runtime

    os.environ.setdefault(runtime.BF16_ENV, "1" if runtime.bf16_decision().use else "0")


def _init_worker(models: tuple[str, ...]) -> None:
    """Pool initializer: one torch thread per worker, models loaded once, Ctrl-C left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_torch_thread()
    load_models(models)


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
            self.jobs, mp_context=_mp_context(), initializer=_init_worker, initargs=(self.models,)
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
) -> Iterator[Iterator[Outcome]]:
    """Outcomes in task order: from this process, a pool of ``jobs`` workers, or a cluster."""
    if cluster is not None and tasks:
        from semcodec.batch.cluster import cluster_outcomes

        _decide_before_workers()
        with cluster_outcomes(fn, tasks, cluster, models, debug_enabled()) as outcomes:
            yield outcomes
        return
    if jobs == 0:
        jobs = os.cpu_count() or 1
    if jobs <= 1 or len(tasks) <= 1:
        yield (run_here(fn, task) for task in tasks)
        return
    _decide_before_workers()
    pool = LocalPool(fn, min(jobs, len(tasks)), models)
    interrupted = True
    try:
        yield windowed(pool.submit, pool.result, tasks, WINDOW_PER_WORKER * pool.jobs)
        interrupted = False
    finally:
        pool.close(interrupted)


def _stdout_binary() -> io.BufferedIOBase:
    """The binary stdout, for .sem or image data written to a pipe."""
    return sys.stdout.buffer


def read_input(name: str, stdin_data: bytes | None) -> bytes:
    """Bytes of a file argument (``-`` is stdin, read once by the caller)."""
    if name == STDIO:
        assert stdin_data is not None
        return stdin_data
    try:
        return Path(name).read_bytes()
    except OSError as exc:  # the same words as an image the encoder cannot read
        raise SemcodecError(f"cannot read {name!r}: {exc.strerror or exc}") from None


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


_TERMINAL = "refusing to write binary data to a terminal (use -o FILE or a pipe)"


def check_io_args(inputs: Sequence[str], output: str | None, output_dir: Path | None) -> None:
    """Usage rules shared by encode and decode (exit 2)."""
    if output is not None and output_dir is not None:
        raise click.UsageError("-o and -d cannot be used together")
    if output is not None and len(inputs) > 1:
        raise click.UsageError("-o takes one input; use -d DIR for several")
    if STDIO in inputs and len(inputs) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    to_stdout = output == STDIO or (output is None and output_dir is None and STDIO in inputs)
    if to_stdout and _stdout_binary().isatty():
        raise click.UsageError(_TERMINAL)
    if output_dir is not None and not output_dir.is_dir():
        raise SemcodecError(f"output directory {str(output_dir)!r} does not exist")


def plan_problem(
    inp: str, out: str, force: bool, taken: set[str], *, make_dirs: bool = False
) -> str | None:
    """Why writing ``out`` for ``inp`` must be refused before any work is done, or None."""
    if out == STDIO:
        if _stdout_binary().isatty():  # `segment` plans without check_io_args
            return _TERMINAL
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
    if not make_dirs and not parent.is_dir():
        return f"cannot write {out!r}: directory {str(parent)!r} does not exist"
    if not force and os.path.lexists(out):
        return str(OutputExists(f"cannot write {out!r}: file exists (use --force to overwrite)"))
    return None


@dataclass(frozen=True)
class WriteRules:
    """How outputs that exist are treated, and whether missing folders are made."""

    force: bool = False
    skip_existing: bool = False
    make_dirs: bool = False


@dataclass(frozen=True)
class Target:
    """One planned output: to be written (``replace``: over an invalid file, --force), or a
    valid file already there (``existing``), which is kept."""

    path: str
    existing: Existing | None = None
    replace: bool = False


@dataclass(frozen=True)
class Checks:
    """How --skip-existing finds an output valid: the main one (knowing its input) and the extra."""

    main: Callable[[str, str], Existing]
    extra: Callable[[str], Existing]

    def of(self, plan: Planned) -> tuple[Callable[[str], Existing], Callable[[str], Existing]]:
        """The checks of one input's main and extra output, each taking the output's path."""
        return (lambda path: self.main(plan.input, path)), self.extra


#: why an output was skipped: valid before the run started, or completed by another process
#: (another run over the same folder) while this one was going
REASON_EXISTS = "exists"
REASON_OTHER = "written by another process"


def plan_target(
    inp: str, out: str, rules: WriteRules, taken: set[str], check: Callable[[str], Existing]
) -> Target | str:
    """The output's plan, or why it must be refused; --skip-existing checks an existing file."""
    problem = plan_problem(inp, out, True, taken, make_dirs=rules.make_dirs)
    if problem is not None:
        return problem
    if out == STDIO or not os.path.lexists(out):
        return Target(out)
    if rules.skip_existing:
        try:
            return Target(out, existing=check(out))
        except (OSError, ValueError) as exc:  # CorruptData is a ValueError
            if not rules.force:
                return f"cannot skip {out!r}: {describe_error(exc)} (use --force to replace it)"
    if rules.force:
        return Target(out, replace=True)
    return str(OutputExists(f"cannot write {out!r}: file exists (use --force to overwrite)"))


def deliver(out: str, data: bytes, force: bool, make_dirs: bool = False) -> None:
    """Write one output: atomically to a file, or to stdout."""
    if make_dirs and out != STDIO:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
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
        """Progress within one image (Codec.progress): the stage that began (total 0) or a
        tiled image's tiles; shown even for a single file."""
        if self.tty:
            self.enabled = True
            self.detail = f"{stage} tile {done}/{total}" if total else stage
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


@dataclass(frozen=True)
class _Tasks:
    """The workers' tasks, each made as it is handed out: a million inputs never hold a
    million tasks. With ``checks`` (--skip-existing) an input whose outputs another process
    completed meanwhile is not computed again."""

    plans: list[Planned]
    make: Callable[[str, bytes | None], Any]
    stdin_data: bytes | None
    checks: Checks | None = None

    def __len__(self) -> int:
        return len(self.plans)

    def __iter__(self) -> Iterator[Any]:
        for plan in self.plans:
            if self.checks is not None and appeared(plan, self.checks):
                yield Done(Outcome(True))
            else:
                yield self.make(plan.input, self.stdin_data)


def found_valid(target: Target, check: Callable[[str], Existing]) -> Target:
    """The target, kept if a valid file is at its path now (an invalid one is left to the write)."""
    if target.existing is not None or target.path == STDIO or not os.path.lexists(target.path):
        return target
    try:
        return Target(target.path, existing=check(target.path))
    except (OSError, ValueError):  # CorruptData is a ValueError
        return target


def appeared(plan: Planned, checks: Checks) -> bool:
    """Whether another process has completed every output of ``plan`` since it was planned
    (each output found valid is kept from now on)."""
    main, extra = checks.of(plan)
    plan.main = found_valid(plan.main, main)
    if plan.extra is not None:
        plan.extra = found_valid(plan.extra, extra)
    return plan.skipped


@dataclass
class Planned:
    """One input whose outputs are planned: its task runs unless every output is kept."""

    input: str
    main: Target
    extra: Target | None = None

    @property
    def skipped(self) -> bool:
        """Every output exists and is valid: nothing to do."""
        return self.main.existing is not None and (
            self.extra is None or self.extra.existing is not None
        )


def _plan(
    inp: str,
    out: str,
    extra_out: str | None,
    rules: WriteRules,
    taken: set[str],
    check: Callable[[str, str], Existing],
    check_extra: Callable[[str], Existing],
) -> Planned | str:
    """Plan an input's output (and the extra one), or say why it cannot be processed."""
    main = plan_target(inp, out, rules, taken, lambda path: check(inp, path))
    if isinstance(main, str):
        return main
    extra = None
    if extra_out is not None:
        extra = plan_target(inp, extra_out, rules, taken, check_extra)
        if isinstance(extra, str):
            return extra
    return Planned(inp, main, extra)


def _overwrites(target: Target, rules: WriteRules) -> bool:
    """Whether the write replaces a file at its path: --force alone, or an invalid file that
    --skip-existing --force replaces; otherwise it never clobbers (another process's file)."""
    return target.replace or (rules.force and not rules.skip_existing)


def _write(
    target: Target | None, data: bytes | None, rules: WriteRules, check: Callable[[str], Existing]
) -> Target | None:
    """Write one planned output unless it is kept; with --skip-existing a valid file that
    another process put there first is kept instead (returned with ``existing`` set)."""
    if target is None or target.existing is not None or data is None:
        return target
    if rules.skip_existing and target.replace:  # replaced by another process meanwhile?
        target = found_valid(target, check)
        if target.existing is not None:
            return target
    try:
        deliver(target.path, data, _overwrites(target, rules), rules.make_dirs)
    except OutputExists:
        if not rules.skip_existing:
            raise
        return _kept_or_replaced(target, data, rules, check)
    return target


def _kept_or_replaced(
    target: Target, data: bytes, rules: WriteRules, check: Callable[[str], Existing]
) -> Target:
    """A file appeared at the output's name during the run: kept when valid, replaced when
    not and --force is given, else refused as --skip-existing refuses it before any work."""
    try:
        return Target(target.path, existing=check(target.path))
    except (OSError, ValueError) as exc:
        if not rules.force:
            raise SemcodecError(
                f"cannot skip {target.path!r}: {describe_error(exc)} (use --force to replace it)"
            ) from None
    deliver(target.path, data, True, rules.make_dirs)
    return target


def _no_check(path: str) -> Existing:
    """The check of an output that --skip-existing cannot trust: never valid."""
    raise ValueError(f"cannot check {path!r}")


def _record(name: str, out: str, outcome: Outcome) -> FileRecord:
    """The report's record of a processed input."""
    if not outcome.ok:
        return FileRecord(
            name, out, "failed", seconds=round(outcome.seconds, 6), error=outcome.error
        )
    w, h = outcome.info.get("width"), outcome.info.get("height")
    size = len(outcome.data)
    return FileRecord(
        name,
        out,
        "ok",
        bytes=size,
        width=w,
        height=h,
        bpp=bits_per_pixel(size, w, h),
        layers=dict(outcome.info.get("layers", {})),
        seconds=round(outcome.seconds, 6),
    )


def _skipped_record(name: str, plan: Planned, seconds: float, reason: str) -> FileRecord:
    """The report's record of an input whose outputs were found valid."""
    found = plan.main.existing
    assert found is not None
    return FileRecord(
        name,
        plan.main.path,
        "skipped",
        reason=reason,
        bytes=found.bytes,
        width=found.width,
        height=found.height,
        bpp=bits_per_pixel(found.bytes, found.width, found.height),
        layers=dict(found.layers),
        seconds=round(seconds, 6),
    )


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
    dataset: DatasetOptions | None = None,
    command: str = "",
    check: Callable[[str, str], Existing] | None = None,
    check_extra: Callable[[str], Existing] | None = None,
) -> None:
    """Check every output first, process the rest (in parallel if asked), write and report."""
    dataset = dataset or DatasetOptions()
    rules = WriteRules(force, dataset.skip_existing, dataset.keep_tree)
    to_stdout = STDIO in outputs or dataset.report == STDIO
    batch = Batch(len(inputs), quiet, debug_enabled(ctx), to_stdout=to_stdout)
    try:
        log = Report(dataset.report, command, len(inputs))
    except OSError as exc:
        raise SemcodecError(f"cannot write the report: {describe_error(exc)}") from None
    interrupted = True
    try:
        checks = Checks(check or (lambda _i, o: _no_check(o)), check_extra or _no_check)
        _run(batch, log, inputs, outputs, make_task, worker, report, rules, jobs, models,
             extra_out, dataset.cluster, checks)  # fmt: skip
        interrupted = False
    finally:
        log.close(interrupted)
    batch.finish(ctx)


def _run(
    batch: Batch,
    log: Report,
    inputs: Sequence[str],
    outputs: list[str],
    make_task: Callable[[str, bytes | None], Any],
    worker: Callable[[Any], Outcome],
    report: Callable[[str, str, Outcome], str],
    rules: WriteRules,
    jobs: int,
    models: tuple[str, ...],
    extra_out: str | None,
    cluster: str | None,
    checks: Checks,
) -> None:
    """Plan every input (failing or skipping what needs no work), then process the rest."""
    stdin_data = stdin_bytes() if STDIO in inputs else None
    if rules.skip_existing:
        _clear_debris([*outputs, *([extra_out] if extra_out else [])], batch)
    taken: set[str] = set()
    runnable: list[Planned] = []
    for inp, out in zip(inputs, outputs, strict=True):
        name = display(inp, "<stdin>")
        started = time.perf_counter()
        plan = _plan(inp, out, extra_out, rules, taken, checks.main, checks.extra)
        if isinstance(plan, str):
            batch.fail(name, plan)
            log.add(FileRecord(inp, out, "failed", error=plan))
        elif plan.skipped:
            batch.line(f"{name} -> {display(out, '<stdout>')}: skipped (exists, valid)")
            log.add(_skipped_record(inp, plan, time.perf_counter() - started, REASON_EXISTS))
        else:
            runnable.append(plan)
            continue
        batch.progress.step()
    tasks = _Tasks(runnable, make_task, stdin_data, checks if rules.skip_existing else None)
    global _TILE_PROGRESS
    _TILE_PROGRESS = batch.progress.tiles if jobs <= 1 or len(tasks) <= 1 else None
    with processed(worker, tasks, jobs, models, cluster) as outcomes:
        for plan, outcome in zip(runnable, outcomes, strict=True):
            _settle(batch, log, plan, outcome, report, rules, checks)


def _clear_debris(outputs: list[str], batch: Batch) -> None:
    """Resuming: remove the temporary files a killed run left next to these outputs."""
    removed = remove_stale_temps(out for out in outputs if out != STDIO)
    if removed:
        batch.warn("", f"removed {removed} temporary file(s) left by a killed run")


def _settle(
    batch: Batch,
    log: Report,
    plan: Planned,
    outcome: Outcome,
    report: Callable[[str, str, Outcome], str],
    rules: WriteRules,
    checks: Checks,
) -> None:
    """Write one processed input's outputs, then at once its record, then its line."""
    name = display(plan.input, "<stdin>")
    out = plan.main.path
    if outcome.ok:
        main, extra = checks.of(plan)
        try:
            plan.main = _write(plan.main, outcome.data, rules, main) or plan.main
            plan.extra = _write(plan.extra, outcome.extra, rules, extra)
        except BrokenPipeError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per file
            outcome = Outcome(
                False, error=describe_error(exc), trace=traceback.format_exc(),
                seconds=outcome.seconds,
            )  # fmt: skip
    if outcome.ok and plan.skipped:  # every output completed by another process: none written
        batch.line(f"{name} -> {display(out, '<stdout>')}: skipped ({REASON_OTHER}, valid)")
        log.add(_skipped_record(plan.input, plan, outcome.seconds, REASON_OTHER))
        batch.progress.step()
        return
    log.add(_record(plan.input, out, outcome))  # nothing between the write and its record
    if outcome.ok:
        for text in outcome.warnings:
            batch.warn(name, text)
        batch.line(report(name, display(out, "<stdout>"), outcome))
    else:
        batch.fail(name, outcome.error, outcome.trace)
    batch.progress.step()


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
