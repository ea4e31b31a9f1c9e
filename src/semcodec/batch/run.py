"""The batch loop of encode, decode and segment: every output is planned before any work, inputs are
processed in this process, a pool of workers or a cluster, and each one's outputs are written
atomically, recorded and shown, one file after another in input order.

A failing file is reported and the batch goes on; what is shown, and how, is the caller's
(``Sink``): the command line draws its bar and prints its lines.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from semcodec.batch.deliver import write_target
from semcodec.batch.executors import processed
from semcodec.batch.outcome import Done, Outcome
from semcodec.batch.plan import (
    REASON_EXISTS,
    REASON_OTHER,
    Checks,
    Planned,
    WriteRules,
    appeared,
    no_check,
    plan_input,
)
from semcodec.batch.report import FileRecord, Report, file_record, skipped_record
from semcodec.batch.stdio import STDIO, display, stdin_bytes
from semcodec.batch.verify import Existing
from semcodec.defaults import DEFAULT_CLUSTER_TIMEOUT
from semcodec.errors import SemcodecError, describe_error
from semcodec.imageio import remove_stale_temps
from semcodec.stages import TileProgress

# the in-process batch's tile progress (Codec calls' progress); None in worker processes
_TILE_PROGRESS: TileProgress | None = None


def tile_progress() -> TileProgress | None:
    """What a worker function passes as progress: the batch's bar in this process only."""
    return _TILE_PROGRESS


class Sink(Protocol):
    """Who shows the batch as it goes (the command line's terminal)."""

    def fail(self, name: str, message: str, trace: str = "") -> None:
        """One failed file."""

    def warn(self, name: str, message: str) -> None:
        """A warning about one file (``name`` empty: about the batch)."""

    def line(self, text: str) -> None:
        """One file's result line."""

    def step(self) -> None:
        """One more input settled."""

    def tiles(self, stage: str, done: int, total: int) -> None:
        """Progress within one image computed in this process."""


def _never_valid(_inp: str, out: str) -> Existing:
    """The main output's check when none is given: never valid."""
    return no_check(out)


@dataclass(frozen=True)
class BatchConfig:
    """One batch: its inputs and outputs, the work per input, where it runs and the rules of
    writing (``make_task`` bundles an input for ``worker``, ``describe`` words a done file's line;
    ``checks`` tell --skip-existing whether an output found in place is valid)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    make_task: Callable[[str, bytes | None], Any]
    worker: Callable[[Any], Outcome]
    describe: Callable[[str, str, Outcome], str]
    models: tuple[str, ...] = ()
    rules: WriteRules = WriteRules()
    jobs: int = 1
    cluster: str | None = None
    cluster_timeout: float = DEFAULT_CLUSTER_TIMEOUT  # seconds a scheduler has to answer
    extra_out: str | None = None
    report: str | None = None
    command: str = ""
    checks: Checks = field(default_factory=lambda: Checks(_never_valid, no_check))
    debug: bool = False

    @property
    def to_stdout(self) -> bool:
        """Whether stdout carries data (an output or the report): lines then go to stderr."""
        return STDIO in self.outputs or self.report == STDIO


def run_batch(config: BatchConfig, sink: Sink) -> None:
    """Plan every input, process the rest (in parallel if asked), write, record and show each;
    the report's summary says whether the run was interrupted."""
    try:
        log = Report(config.report, config.command, len(config.inputs))
    except OSError as exc:
        raise SemcodecError(f"cannot write the report: {describe_error(exc)}") from None
    interrupted, error = True, None
    try:
        _run(config, sink, log)
        interrupted = False
    except SemcodecError as exc:  # e.g. a scheduler that cannot be reached: said in the summary
        error = describe_error(exc)
        raise
    finally:
        log.close(interrupted, error)


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


def _run(config: BatchConfig, sink: Sink, log: Report) -> None:
    """Plan every input (failing or skipping what needs no work), then process the rest."""
    rules, checks = config.rules, config.checks
    stdin_data = stdin_bytes() if STDIO in config.inputs else None
    if rules.skip_existing:
        extra = [config.extra_out] if config.extra_out else []
        _clear_debris([*config.outputs, *extra], sink)
    taken: set[str] = set()
    runnable: list[Planned] = []
    for inp, out in zip(config.inputs, config.outputs, strict=True):
        name = display(inp, "<stdin>")
        started = time.perf_counter()
        plan = plan_input(inp, out, config.extra_out, rules, taken, checks)
        if isinstance(plan, str):
            sink.fail(name, plan)
            log.add(FileRecord(inp, out, "failed", error=plan))
        elif plan.skipped:
            sink.line(f"{name} -> {display(out, '<stdout>')}: skipped (exists, valid)")
            log.add(_skipped(plan, time.perf_counter() - started, REASON_EXISTS))
        else:
            runnable.append(plan)
            continue
        sink.step()
    tasks = _Tasks(runnable, config.make_task, stdin_data, checks if rules.skip_existing else None)
    global _TILE_PROGRESS
    _TILE_PROGRESS = sink.tiles if config.jobs <= 1 or len(tasks) <= 1 else None
    with processed(
        config.worker,
        tasks,
        config.jobs,
        config.models,
        config.cluster,
        config.debug,
        config.cluster_timeout,
    ) as outcomes:
        for plan, outcome in zip(runnable, outcomes, strict=True):
            _settle(config, sink, log, plan, outcome)


def _skipped(plan: Planned, seconds: float, reason: str) -> FileRecord:
    """The record of an input whose outputs were found valid."""
    found = plan.main.existing
    assert found is not None
    return skipped_record(plan.input, plan.main.path, found, seconds, reason)


def _clear_debris(outputs: list[str], sink: Sink) -> None:
    """Resuming: remove the temporary files a killed run left next to these outputs."""
    removed = remove_stale_temps(out for out in outputs if out != STDIO)
    if removed:
        sink.warn("", f"removed {removed} temporary file(s) left by a killed run")


def _written(plan: Planned, outcome: Outcome, rules: WriteRules, checks: Checks) -> Outcome:
    """Write a computed input's outputs; a failed write is that file's failure."""
    main, extra = checks.of(plan)
    try:
        plan.main = write_target(plan.main, outcome.data, rules, main) or plan.main
        plan.extra = write_target(plan.extra, outcome.extra, rules, extra)
    except BrokenPipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported per file
        return Outcome(
            False, error=describe_error(exc), trace=traceback.format_exc(),
            seconds=outcome.seconds,
        )  # fmt: skip
    return outcome


def _settle(config: BatchConfig, sink: Sink, log: Report, plan: Planned, outcome: Outcome) -> None:
    """Write one processed input's outputs, then at once its record, then its line."""
    name = display(plan.input, "<stdin>")
    out = plan.main.path
    if outcome.ok:
        outcome = _written(plan, outcome, config.rules, config.checks)
    if outcome.ok and plan.skipped:  # every output completed by another process: none written
        sink.line(f"{name} -> {display(out, '<stdout>')}: skipped ({REASON_OTHER}, valid)")
        log.add(_skipped(plan, outcome.seconds, REASON_OTHER))
        sink.step()
        return
    log.add(file_record(plan.input, out, outcome))  # nothing between the write and its record
    if outcome.ok:
        for text in outcome.warnings:
            sink.warn(name, text)
        sink.line(config.describe(name, display(out, "<stdout>"), outcome))
    else:
        sink.fail(name, outcome.error, outcome.trace)
    sink.step()
