"""The command line's side of a batch: the options and usage rules of encode, decode and segment,
the terminal's lines and progress bar, and the exit status (the engine is ``semcodec.batch``)."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from semcodec.batch import stdio
from semcodec.batch.run import BatchConfig
from semcodec.batch.run import run_batch as run_engine
from semcodec.batch.stdio import STDIO
from semcodec.cli.common import (
    EXIT_FAILURE,
    debug_option,
    error,
    usage_problems,
    warning,
    with_name,
)
from semcodec.errors import SemcodecError
from semcodec.progress import Progress


def check_io_args(inputs: Sequence[str], output: str | None, output_dir: Path | None) -> None:
    """Usage rules shared by the batch commands (exit 2), and -d's folder (exit 1)."""
    if output is not None and output_dir is not None:
        raise click.UsageError("-o and -d cannot be used together")
    if output is not None and len(inputs) > 1:
        raise click.UsageError("-o takes one input; use -d DIR for several")
    if STDIO in inputs and len(inputs) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    to_stdout = output == STDIO or (output is None and output_dir is None and STDIO in inputs)
    if to_stdout and stdio.stdout_binary().isatty():
        raise click.UsageError(stdio.TERMINAL)
    if output_dir is not None and not output_dir.is_dir():  # exit 1, as -o's missing folder
        why = "is not a directory" if output_dir.exists() else "does not exist"
        raise SemcodecError(f"output directory {str(output_dir)!r} {why}")


def in_out_form(
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    out_suffixes: Container[str],
) -> tuple[tuple[str, ...], str | None]:
    """avifenc/cjxl's ``IN OUT``: two arguments, the last named in the other side's format."""
    if len(inputs) != 2 or output is not None or output_dir is not None:
        return inputs, output
    src, dst = inputs
    if Path(dst).suffix.lower() in out_suffixes and Path(src).suffix.lower() not in out_suffixes:
        return (src,), dst
    return inputs, output


class BatchProgress(Progress):
    """The batch's bar on a terminal: shown for several files, or for one tiled image's tiles."""

    def __init__(self, total: int, enabled: bool) -> None:
        super().__init__(total, enabled=enabled)
        self.tty = self.enabled
        self.enabled = self.tty and total > 1

    def tiles(self, stage: str, done: int, total: int) -> None:
        """Progress within one image (a Codec call's progress): the stage that began (total 0) or a
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
    """The batch on the terminal (``batch.run.Sink``): failures counted, lines, warnings, the
    bar and the summary line."""

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

    def step(self) -> None:
        """One more input settled."""
        self.progress.step()

    def tiles(self, stage: str, done: int, total: int) -> None:
        """Progress within one image computed in this process."""
        self.progress.tiles(stage, done, total)

    def finish(self, ctx: click.Context) -> None:
        """Summary and exit 1 if anything failed."""
        self.progress.close(keep=False)
        if self.failed:
            if self.total > 1:
                error(f"{self.failed} of {self.total} files failed")
            ctx.exit(EXIT_FAILURE)


def run_batch(ctx: click.Context, config: BatchConfig, quiet: bool) -> None:
    """Run the batch with its lines and bar on the terminal; exit 1 if any file failed."""
    batch = Batch(len(config.inputs), quiet, config.debug, to_stdout=config.to_stdout)
    with usage_problems():
        run_engine(config, batch)
    batch.finish(ctx)


io_options = [
    click.option(
        "-o", "--output", metavar="OUT", help="Output file ('-' for stdout); one input only."
    ),
    click.option(
        "-d",
        "--output-dir",
        type=click.Path(path_type=Path),  # a missing one or a file: exit 1 (check_io_args)
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
