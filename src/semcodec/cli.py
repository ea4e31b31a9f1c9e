"""The ``semcodec`` command line, in the conventions of cwebp/cjxl.

Exit codes: 0 success, 1 processing error (bad or corrupt input, I/O, model problems), 2 usage
error, 130 interrupted (Ctrl-C or SIGTERM). Errors are one line on stderr
(``semcodec: error: ...``); ``--debug`` adds the traceback. Outputs are written atomically and
never clobbered without ``--force``.
Heavy modules (torch, the codec, training, benchmarks) are imported only by the commands that
need them, so ``info``, ``--help`` and usage errors stay fast.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
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

from . import container
from .defaults import DEFAULT_EFFORT, DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL, EFFORTS
from .entropy.residual import BACKENDS
from .errors import SemcodecError
from .imageio import OutputExists, atomic_write_bytes
from .metadata import KINDS as METADATA_KINDS
from .ratecontrol import bytes_for_bpp, search_quality

try:
    from . import __version__
except ImportError:  # imported as a namespace package (stale editable install): use metadata
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("semcodec")

PROG = "semcodec"
STDIO = "-"
_DEBUG_KEY = "semcodec.debug"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# --format value → (Pillow format, file suffix, save options)
DECODE_FORMATS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "png": ("PNG", ".png", {}),
    "bmp": ("BMP", ".bmp", {}),
    "tiff": ("TIFF", ".tiff", {"compression": "tiff_deflate"}),
    "webp": ("WEBP", ".webp", {"lossless": True}),
    "jpeg": ("JPEG", ".jpg", {"quality": 95}),
    "ppm": ("PPM", ".ppm", {}),
}
_SUFFIX_FORMATS = {
    ".png": "png",
    ".bmp": "bmp",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".webp": "webp",
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".ppm": "ppm",
    ".pgm": "ppm",
    ".pnm": "ppm",
}
_LAYER_SHORT = {
    "semantic_map": "map",
    "compact": "compact",
    "residual": "residual",
    "alpha": "alpha",
}


# ----- messages ------------------------------------------------------------------------------
def _error(message: str) -> None:
    """The single error line format every failure uses."""
    click.echo(f"{PROG}: error: {message}", err=True)


def _warning(message: str) -> None:
    """The single warning line format."""
    click.echo(f"{PROG}: warning: {message}", err=True)


def describe_error(exc: BaseException) -> str:
    """One line for any exception, without traceback or repr noise."""
    if isinstance(exc, OSError) and not isinstance(exc, SemcodecError) and exc.strerror:
        text = exc.strerror
        if exc.filename is not None:
            text = f"{os.fsdecode(exc.filename)!r}: {text}"
    else:
        text = str(exc).strip()
        if not isinstance(exc, (SemcodecError, ValueError, OSError)) or not text:
            text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text.splitlines()[0]


def _with_name(name: str, message: str) -> str:
    """Prefix a per-file message with the file, unless the message already names it."""
    return message if name in message else f"{name}: {message}"


def _debug(ctx: click.Context | None = None) -> bool:
    """Whether --debug was given anywhere on the command line (or SEMCODEC_DEBUG is set)."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get(_DEBUG_KEY):
        return True
    return os.environ.get("SEMCODEC_DEBUG", "") not in ("", "0")


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    """Record --debug in the context tree's shared meta, so the root error handler sees it."""
    if value:
        ctx.meta[_DEBUG_KEY] = True
    return value


debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=_set_debug,
    help="Show a traceback with errors.",
)


# ----- groups ----------------------------------------------------------------------------------
class _LazyGroup(click.Group):
    """A group whose subcommands live in heavy modules imported only when used."""

    def __init__(
        self,
        *args: Any,
        lazy: dict[str, tuple[str, str]] | None = None,
        optional: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})
        self.optional = set(optional)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager and lazy commands together, without importing the lazy ones."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy command on first use; a broken optional one becomes a stub."""
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in self.lazy:
            return cmd
        module, attr = self.lazy[cmd_name]
        try:
            cmd = getattr(importlib.import_module(module), attr)
        except Exception as exc:  # noqa: BLE001 - an optional command must not break the CLI
            if cmd_name not in self.optional:
                raise
            cmd = _unavailable(cmd_name, describe_error(exc))
        self.add_command(cmd, cmd_name)
        return cmd


def _unavailable(name: str, reason: str) -> click.Command:
    """A stand-in for an optional command whose module cannot be imported."""

    def run() -> None:
        """Report why the command cannot run."""
        raise SemcodecError(f"the {name} command is unavailable: {reason}")

    return click.Command(
        name,
        callback=run,
        help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True},
    )


class _RootGroup(_LazyGroup):
    """Root group: turns any exception into a one-line error and the right exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; map exceptions to one line + exit code (click keeps its own)."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            raise  # click's main silences stdout and exits 1
        except KeyboardInterrupt:
            click.echo(file=sys.stderr)
            _error("interrupted")
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - every processing error becomes exit 1
            if _debug(ctx):
                traceback.print_exc(file=sys.stderr)
            _error(describe_error(exc))
            ctx.exit(EXIT_FAILURE)


@click.group(
    cls=_RootGroup,
    lazy={"bench": ("semcodec.bench.cli", "bench")},
    optional=("bench",),
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@debug_option
def cli() -> None:
    """semcodec: a learned semantic image codec (.sem files)."""


@cli.command()
def doctor() -> None:
    """Print versions, CPU, instruction set, the bf16 decision and threads (for bug reports)."""
    from . import runtime

    for key, value in runtime.diagnostics().items():
        click.echo(f"{key}: {value}")


# ----- batch machinery -------------------------------------------------------------------------
@dataclass
class _Outcome:
    """What processing one file produced; plain data so it crosses process boundaries."""

    ok: bool
    data: bytes = b""
    extra: bytes | None = None
    info: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    trace: str = ""


def _guarded(fn: Callable[[Any], _Outcome], task: Any) -> _Outcome:
    """Run one file's work, turning any failure into a reportable outcome (the batch goes on)."""
    try:
        return fn(task)
    except Exception as exc:  # noqa: BLE001 - reported per file, the batch continues
        return _Outcome(False, error=describe_error(exc), trace=traceback.format_exc())


# the in-process batch's tile progress (Codec.progress); None in worker processes
_TILE_PROGRESS: Callable[[str, int, int], None] | None = None


def _decide_before_workers() -> None:
    """Make the bf16 decision once, here, and hand it to every worker (files must not depend
    on which worker encoded them): forked workers inherit it, spawned ones read the env."""
    from . import runtime

    os.environ.setdefault(runtime.BF16_ENV, "1" if runtime.bf16_decision().use else "0")


def _init_worker(models: tuple[str, ...]) -> None:
    """Pool initializer: one torch thread per worker, models loaded once, Ctrl-C left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)
    from .codec import get_codec

    for name in models:
        with contextlib.suppress(Exception):  # a bad model is reported per file when used
            get_codec(name)


def _mp_context() -> mp.context.BaseContext:
    """fork on Linux (workers start instantly, torch threads reset by the initializer), else spawn."""
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context("spawn")


@contextlib.contextmanager
def _processed(
    fn: Callable[[Any], _Outcome], tasks: list[Any], jobs: int, models: tuple[str, ...]
) -> Iterator[Iterator[_Outcome]]:
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


class _Progress:
    """A one-line progress bar on stderr, only on a terminal, so logs and pipes stay clean."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.tty = enabled and sys.stderr.isatty()
        self.enabled = self.tty and total > 1
        self.total = total
        self.done = 0
        self.detail = ""

    def draw(self) -> None:
        """Redraw the bar in place (with the current image's tile progress, if any)."""
        if self.enabled:
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "-" * (width - filled)
            tail = f"  {self.detail}" if self.detail else ""
            click.echo(f"\r\x1b[K[{bar}] {self.done}/{self.total}{tail}", err=True, nl=False)

    def tiles(self, stage: str, done: int, total: int) -> None:
        """Progress within one tiled image (Codec.progress): shown even for a single file."""
        if self.tty:
            self.enabled = True
            self.detail = f"{stage} tile {done}/{total}"
            self.draw()

    def clear(self) -> None:
        """Erase the bar so a message can take its line."""
        if self.enabled:
            click.echo("\r\x1b[K", err=True, nl=False)

    def step(self) -> None:
        """One more file done."""
        self.done += 1
        self.detail = ""
        self.draw()


def _stdout_binary() -> io.BufferedIOBase:
    """The binary stdout, for .sem or image data written to a pipe."""
    return sys.stdout.buffer


def _read_input(name: str, stdin_data: bytes | None) -> bytes:
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


def _output_name(inp: str, output: str | None, output_dir: Path | None, suffix: str) -> str:
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


def _check_io_args(inputs: Sequence[str], output: str | None, output_dir: Path | None) -> None:
    """Usage rules shared by encode and decode (exit 2)."""
    if output is not None and output_dir is not None:
        raise click.UsageError("-o and -d cannot be used together")
    if output is not None and len(inputs) > 1:
        raise click.UsageError("-o takes one input; use -d DIR for several")
    if STDIO in inputs and len(inputs) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    if output_dir is not None and not output_dir.is_dir():
        raise SemcodecError(f"output directory {str(output_dir)!r} does not exist")


def _plan_problem(inp: str, out: str, force: bool, taken: set[str]) -> str | None:
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


def _deliver(out: str, data: bytes, force: bool) -> None:
    """Write one output: atomically to a file, or to stdout."""
    if out == STDIO:
        stream = _stdout_binary()
        view = memoryview(data)
        while view:  # a pipe closed mid-write can return a short count instead of raising
            view = view[stream.write(view) :]
        stream.flush()
    else:
        atomic_write_bytes(out, data, force)


def _display(path: str, stdio: str) -> str:
    """How a file argument is shown in messages."""
    return stdio if path == STDIO else path


@dataclass
class _Batch:
    """Per-run bookkeeping: failures, progress and the summary line."""

    total: int
    quiet: bool
    debug: bool
    to_stdout: bool = False
    failed: int = 0
    progress: _Progress = field(init=False)

    def __post_init__(self) -> None:
        """Show the (empty) bar at once on a terminal."""
        self.progress = _Progress(self.total, not self.quiet)
        self.progress.draw()

    def fail(self, name: str, message: str, trace: str = "") -> None:
        """Report one failed file (traceback first with --debug) and count it."""
        self.failed += 1
        self.progress.clear()
        if self.debug and trace:
            click.echo(trace.rstrip(), err=True)
        _error(_with_name(name, message))
        self.progress.draw()

    def warn(self, name: str, message: str) -> None:
        """A per-file warning on stderr, unless --quiet."""
        if not self.quiet:
            self.progress.clear()
            _warning(_with_name(name, message))
            self.progress.draw()

    def line(self, text: str) -> None:
        """A per-file result line: stdout, or stderr when stdout carries the data."""
        if not self.quiet:
            self.progress.clear()
            click.echo(text, err=self.to_stdout)
            self.progress.draw()

    def finish(self, ctx: click.Context) -> None:
        """Summary and exit 1 if anything failed."""
        self.progress.clear()
        if self.failed:
            if self.total > 1:
                _error(f"{self.failed} of {self.total} files failed")
            ctx.exit(EXIT_FAILURE)


def _run_batch(
    ctx: click.Context,
    inputs: Sequence[str],
    outputs: list[str],
    make_task: Callable[[str, bytes | None], Any],
    worker: Callable[[Any], _Outcome],
    report: Callable[[str, str, _Outcome], str],
    *,
    force: bool,
    quiet: bool,
    jobs: int,
    models: tuple[str, ...],
    extra_out: str | None = None,
) -> None:
    """Check every output first, process the rest (in parallel if asked), write and report."""
    batch = _Batch(len(inputs), quiet, _debug(ctx), to_stdout=STDIO in outputs)
    stdin_data = _stdin_bytes() if STDIO in inputs else None
    taken: set[str] = set()
    runnable: list[tuple[str, str]] = []
    tasks = []
    for inp, out in zip(inputs, outputs, strict=True):
        problem = _plan_problem(inp, out, force, taken)
        if problem is None and extra_out is not None:
            problem = _plan_problem(inp, extra_out, force, taken)
        if problem is not None:
            batch.fail(_display(inp, "<stdin>"), problem)
            batch.progress.step()
            continue
        runnable.append((inp, out))
        tasks.append(make_task(inp, stdin_data))
    global _TILE_PROGRESS
    _TILE_PROGRESS = batch.progress.tiles if jobs <= 1 or len(tasks) <= 1 else None
    with _processed(worker, tasks, jobs, models) as outcomes:
        for (inp, out), outcome in zip(runnable, outcomes, strict=True):
            name = _display(inp, "<stdin>")
            if outcome.ok:
                try:
                    _deliver(out, outcome.data, force)
                    if extra_out is not None and outcome.extra is not None:
                        atomic_write_bytes(extra_out, outcome.extra, force)
                except BrokenPipeError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported per file
                    outcome = _Outcome(
                        False, error=describe_error(exc), trace=traceback.format_exc()
                    )
            if outcome.ok:
                for text in outcome.warnings:
                    batch.warn(name, text)
                batch.line(report(name, _display(out, "<stdout>"), outcome))
            else:
                batch.fail(name, outcome.error, outcome.trace)
            batch.progress.step()
    batch.finish(ctx)


def _stdin_bytes() -> bytes:
    """All of stdin, read once."""
    return sys.stdin.buffer.read()


def _bpp(nbytes: int, width: int, height: int) -> float:
    """Bits per pixel of a byte count."""
    return 8.0 * nbytes / max(1, width * height)


# ----- encode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _EncodeTask:
    """One input to encode, with the settings; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str
    quality: int | None
    residual: str | None
    target_size: int | None
    target_bpp: float | None
    refine_steps: int = 0
    metadata: frozenset[str] = frozenset(METADATA_KINDS)
    effort: int = DEFAULT_EFFORT


def _encode_work(task: _EncodeTask) -> _Outcome:
    """Load, encode (searching quality for a size target) and describe one image."""
    from .codec import get_codec
    from .imageio import load_image
    from .refine import RefineConfig

    codec = get_codec(task.model)
    codec.effort = task.effort  # this process's codec, one task at a time
    codec.progress = _TILE_PROGRESS
    image = load_image(task.data if task.source == STDIO else task.source, codec.limits)
    residual = task.residual or DEFAULT_RESIDUAL
    stats_by_quality = {}
    refine = RefineConfig(steps=task.refine_steps) if task.refine_steps else None
    # networks run once, however many qualities are tried
    analysis = codec.analyse(image, refine, metadata=task.metadata)

    def encode(quality: int) -> bytes:
        """One encode, keeping its per-layer stats for the report."""
        data, stats = codec.finish(analysis, quality, residual)
        stats_by_quality[quality] = stats
        return data

    warnings = list(image.warnings)
    targeted = task.target_size is not None or task.target_bpp is not None
    if targeted:
        budget = (
            task.target_size
            if task.target_size is not None
            else bytes_for_bpp(task.target_bpp or 0.0, image.width, image.height)
        )
        quality, data, met = search_quality(encode, budget)
        if not met:
            warnings.append(
                f"target of {budget} bytes cannot be met; wrote the smallest file "
                f"(quality {quality}, {len(data)} bytes)"
            )
    else:
        quality = DEFAULT_QUALITY if task.quality is None else task.quality
        data = encode(quality)
    info = {
        "width": image.width,
        "height": image.height,
        "quality": quality,
        "targeted": targeted,
        "layers": dict(stats_by_quality[quality].layer_bytes),
    }
    return _Outcome(True, data, info=info, warnings=warnings)


def _encode_worker(task: _EncodeTask) -> _Outcome:
    """Picklable entry point for one encode."""
    return _guarded(_encode_work, task)


def _encode_report(name: str, out: str, o: _Outcome) -> str:
    """``in -> out: N bytes, B bpp (map .., compact .., residual ..)``."""
    w, h = o.info["width"], o.info["height"]
    parts = ", ".join(
        f"{_LAYER_SHORT.get(k, k)} {_bpp(v, w, h):.3f}" for k, v in o.info["layers"].items()
    )
    text = f"{name} -> {out}: {len(o.data)} bytes, {_bpp(len(o.data), w, h):.3f} bpp ({parts})"
    if o.info["targeted"]:
        text += f", quality {o.info['quality']}"
    return text


def _metadata_kinds(_ctx: click.Context, _param: click.Parameter, value: str) -> frozenset[str]:
    """--metadata all|none|icc,exif,xmp → the kinds to keep (usage error otherwise)."""
    from .metadata import parse_selection

    try:
        return parse_selection(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


effort_option = click.option(
    "-e",
    "--effort",
    type=click.IntRange(min(EFFORTS), max(EFFORTS)),
    default=DEFAULT_EFFORT,
    show_default=True,
    help="Encoder effort: higher spends more encoding time for fewer bytes at the same "
    "quality (the AVIF residual's speed 11 - effort); files decode the same way, as fast.",
)

_io_options = [
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


def _apply(options: list[Callable]) -> Callable:
    """Apply a shared list of click options to a command."""

    def deco(fn: Callable) -> Callable:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


@cli.command()
@click.argument("inputs", nargs=-1, required=True, metavar="IN...")
@click.option(
    "-q",
    "--quality",
    type=click.IntRange(0, 100),
    default=None,
    help="0 (base layer only) .. 100  [default: 50]",
)
@click.option(
    "--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle name or weights file."
)
@click.option(
    "--residual",
    type=click.Choice(BACKENDS),
    default=None,
    help=f"Residual backend  [default: {DEFAULT_RESIDUAL}]",
)
@click.option(
    "--target-bpp",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="F",
    help="Highest quality whose file is at most F bits per pixel.",
)
@click.option(
    "--target-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES",
    help="Highest quality whose file is at most BYTES.",
)
@click.option(
    "--refine-steps",
    type=click.IntRange(0, 1000),
    default=0,
    show_default=True,
    metavar="N",
    help="Encoder-side refinement of the compact layer (gradient steps, each about 2 s per "
    "megapixel on one core): better base layer for -q 0, no gain with a residual.",
)
@effort_option
@click.option(
    "--metadata",
    "metadata",
    default="all",
    show_default=True,
    metavar="KINDS",
    callback=_metadata_kinds,
    help="Metadata of the input to keep: all, none, or a comma list of icc, exif, xmp "
    "(EXIF orientation is applied to the pixels and stored as 1).",
)
@_apply(_io_options)
@click.pass_context
def encode(
    ctx: click.Context,
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    quality: int | None,
    model: str,
    residual: str | None,
    target_bpp: float | None,
    target_size: int | None,
    refine_steps: int,
    effort: int,
    metadata: frozenset[str],
    jobs: int,
    force: bool,
    quiet: bool,
) -> None:
    """Encode images to .sem (default output: IN with suffix .sem; '-' is stdin/stdout)."""
    if target_bpp is not None and target_size is not None:
        raise click.UsageError("--target-bpp and --target-size cannot be used together")
    if quality is not None and (target_bpp is not None or target_size is not None):
        raise click.UsageError("-q cannot be combined with --target-bpp/--target-size")
    _check_io_args(inputs, output, output_dir)
    outputs = [_output_name(i, output, output_dir, ".sem") for i in inputs]

    def make_task(inp: str, stdin_data: bytes | None) -> _EncodeTask:
        """Bundle one input with the settings for a worker."""
        return _EncodeTask(
            inp,
            stdin_data if inp == STDIO else None,
            model,
            quality,
            residual,
            target_size,
            target_bpp,
            refine_steps,
            metadata,
            effort,
        )

    _run_batch(
        ctx,
        inputs,
        outputs,
        make_task,
        _encode_worker,
        _encode_report,
        force=force,
        quiet=quiet,
        jobs=jobs,
        models=(model,),
    )


# ----- decode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _DecodeTask:
    """One .sem file to decode; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str | None
    layer: str
    fmt: str
    segmentation: bool


def label_image(labels: Any, color: bool) -> Any:
    """A label map as a PNG-ready image: class indices (mode L) or the palette colours (mode P)."""
    import numpy as np
    from PIL import Image

    from .models.segmentation import PALETTE

    arr = np.ascontiguousarray(labels, dtype=np.uint8)
    h, w = arr.shape
    if not color:
        return Image.frombytes("L", (w, h), arr.tobytes())
    img = Image.frombytes("P", (w, h), arr.tobytes())
    img.putpalette([c for rgb in PALETTE for c in rgb])
    return img


def _png_bytes(img: Any, fmt: str = "png", meta: Any = None) -> bytes:
    """Encode a Pillow image in one of DECODE_FORMATS, with the file's metadata if given."""
    from .metadata import save_params

    pil_format, _suffix, options = DECODE_FORMATS[fmt]
    extra = save_params(meta, pil_format) if meta else {}
    buf = io.BytesIO()
    img.save(buf, format=pil_format, **{**options, **extra})
    return buf.getvalue()


def _decode_work(task: _DecodeTask) -> _Outcome:
    """Decode one .sem file to image bytes (and optionally its colour segmentation map)."""
    import numpy as np

    from .codec import get_codec

    data = _read_input(task.source, task.data)
    model = task.model or container.read_header(data).model_name
    codec = get_codec(model)
    codec.progress = _TILE_PROGRESS
    result = codec.decode(data, layer=task.layer)
    image = result.image
    out = _png_bytes(image, task.fmt, result.metadata)
    extra = None
    if task.segmentation:
        scale = result.header.map_scale
        full = np.repeat(np.repeat(result.semantic_map, scale, axis=0), scale, axis=1)
        extra = _png_bytes(label_image(full[: image.height, : image.width], color=True))
    info = {"width": image.width, "height": image.height, "mode": image.mode, "layer": task.layer}
    return _Outcome(True, out, extra=extra, info=info)


def _decode_worker(task: _DecodeTask) -> _Outcome:
    """Picklable entry point for one decode."""
    return _guarded(_decode_work, task)


def _decode_report(name: str, out: str, o: _Outcome) -> str:
    """``in -> out: WxH MODE (full layer)``."""
    i = o.info
    return f"{name} -> {out}: {i['width']}x{i['height']} {i['mode']} ({i['layer']} layer)"


def _output_format(fmt: str | None, output: str | None) -> str:
    """--format, else the -o extension, else png."""
    if fmt is not None:
        return {"jpg": "jpeg", "tif": "tiff"}.get(fmt, fmt)
    if output is not None and output != STDIO:
        suffix = Path(output).suffix.lower()
        if suffix not in _SUFFIX_FORMATS:
            raise click.UsageError(
                f"cannot tell the output format from {suffix or 'no extension'!r}; use --format"
            )
        return _SUFFIX_FORMATS[suffix]
    return "png"


@cli.command()
@click.argument("inputs", nargs=-1, required=True, metavar="IN...")
@click.option(
    "--layer",
    type=click.Choice(["full", "base"]),
    default="full",
    show_default=True,
    help="base: the GAN reconstruction only, without the residual.",
)
@click.option(
    "--segmentation",
    "segmentation",
    metavar="MAP.png",
    default=None,
    help="Also write the decoded semantic map as a colour PNG (one input only).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*DECODE_FORMATS, "jpg", "tif"]),
    default=None,
    help="Output format  [default: from -o's extension, else png]",
)
@click.option("--model", default=None, help="Model bundle  [default: the one named in the file]")
@_apply(_io_options)
@click.pass_context
def decode(
    ctx: click.Context,
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    layer: str,
    segmentation: str | None,
    fmt: str | None,
    model: str | None,
    jobs: int,
    force: bool,
    quiet: bool,
) -> None:
    """Decode .sem files to images (default output: IN with suffix .png; '-' is stdin/stdout)."""
    _check_io_args(inputs, output, output_dir)
    if segmentation is not None and len(inputs) > 1:
        raise click.UsageError("--segmentation takes one input")
    if segmentation == STDIO:
        raise click.UsageError("--segmentation needs a file name")
    fmt = _output_format(fmt, output)
    suffix = DECODE_FORMATS[fmt][1]
    outputs = [_output_name(i, output, output_dir, suffix) for i in inputs]

    def make_task(inp: str, stdin_data: bytes | None) -> _DecodeTask:
        """Bundle one input with the settings for a worker."""
        return _DecodeTask(
            inp, stdin_data if inp == STDIO else None, model, layer, fmt, segmentation is not None
        )

    _run_batch(
        ctx,
        inputs,
        outputs,
        make_task,
        _decode_worker,
        _decode_report,
        force=force,
        quiet=quiet,
        jobs=jobs,
        models=(model,) if model else (),
        extra_out=segmentation,
    )


# ----- info --------------------------------------------------------------------------------------
def file_info(data: bytes) -> dict[str, Any]:
    """Everything ``semcodec info`` reports, after validating the whole file."""
    from .metadata import decode_metadata

    header, layers = container.unpack(data)
    w, h = header.width, header.height
    payload = sum(len(v) for v in layers.values())
    meta = layers.get(container.LayerKind.METADATA)
    return {
        "metadata": decode_metadata(meta).sizes() if meta is not None else {},
        "bytes": len(data),
        "format_version": data[len(container.MAGIC)],
        "width": w,
        "height": h,
        "mode": header.mode,
        "model": header.model_name,
        "model_hash": header.model_hash,
        "quality": header.quality,
        "residual": container.ResidualKind.label_of(header.residual_backend),
        "map_scale": header.map_scale,
        "compact_levels": header.compact_levels,
        "header_bytes": len(data) - payload,
        "layers": {
            kind.name.lower(): {"bytes": len(v), "bpp": _bpp(len(v), w, h)}
            for kind, v in layers.items()
        },
        "bpp": _bpp(len(data), w, h),
    }


def _info_text(name: str, d: dict[str, Any]) -> str:
    """The human-readable form of file_info."""
    lines = [
        f"{name}: {d['bytes']} bytes, {d['width']}x{d['height']} {d['mode']}, {d['bpp']:.4f} bpp",
        f"  model      {d['model']} (hash {d['model_hash']})",
        f"  quality    {d['quality']}, residual {d['residual']}",
        f"  {'header':<12}{d['header_bytes']:>10} bytes  "
        f"{_bpp(d['header_bytes'], d['width'], d['height']):.4f} bpp",
    ]
    for kind, v in d["layers"].items():
        lines.append(f"  {kind:<12}{v['bytes']:>10} bytes  {v['bpp']:.4f} bpp")
    lines.append(f"  {'total':<12}{d['bytes']:>10} bytes  {d['bpp']:.4f} bpp")
    if d.get("metadata"):
        kept = ", ".join(f"{k.upper()} {n} bytes" for k, n in d["metadata"].items())
        lines.append(f"  metadata   {kept} (before compression)")
    return "\n".join(lines)


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON on stdout: an object for one file, a list for several.",
)
@debug_option
@click.pass_context
def info(ctx: click.Context, files: tuple[str, ...], as_json: bool) -> None:
    """Validate .sem files and show size, dimensions, model, quality and bytes/bpp per layer."""
    if STDIO in files and len(files) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    stdin_data = _stdin_bytes() if STDIO in files else None
    results, failed = [], 0
    for f in files:
        name = _display(f, "<stdin>")
        try:
            d = {"file": name, **file_info(_read_input(f, stdin_data))}
        except Exception as exc:  # noqa: BLE001 - reported per file
            failed += 1
            if _debug(ctx):
                traceback.print_exc(file=sys.stderr)
            _error(_with_name(name, describe_error(exc)))
            continue
        results.append(d)
        if not as_json:
            click.echo(_info_text(name, d))
    if as_json and results:
        click.echo(json.dumps(results[0] if len(files) == 1 else results, indent=2))
    if failed:
        if len(files) > 1:
            _error(f"{failed} of {len(files)} files failed")
        ctx.exit(EXIT_FAILURE)


# ----- segment -----------------------------------------------------------------------------------
@cli.command()
@click.argument("image", metavar="IMG")
@click.option(
    "-o", "--output", required=True, metavar="MAP.png", help="Output PNG ('-' for stdout)."
)
@click.option("--color", is_flag=True, help="Palette colours instead of class indices.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle.")
@click.option("-f", "--force", is_flag=True, help="Overwrite an existing output.")
@debug_option
def segment(image: str, output: str, color: bool, model: str, force: bool) -> None:
    """Full-resolution semantic label map of an image (mode L class indices, or --color)."""
    problem = _plan_problem(image, output, force, set())
    if problem is not None:
        raise SemcodecError(problem)
    import numpy as np
    import torch

    from .imageio import load_image
    from .train.seg import predict_labels
    from .zoo import load_bundle

    bundle = load_bundle(model)
    img = load_image(_stdin_bytes() if image == STDIO else image)
    x = torch.from_numpy(np.array(img.rgb, copy=True)).permute(2, 0, 1).float().div(255.0)[None]
    labels = predict_labels(bundle.seg, x)
    _deliver(output, _png_bytes(label_image(labels, color)), force)


# ----- models ------------------------------------------------------------------------------------
@cli.command("models")
@click.option("--json", "as_json", is_flag=True, help="JSON list on stdout.")
@debug_option
def models_command(as_json: bool) -> None:
    """List the registered model bundles with their hash and weights size."""
    from . import zoo

    rows = []
    for name, spec in sorted(zoo.REGISTRY.items()):
        row: dict[str, Any] = {"name": name, "hash": None, "bytes": None, "weights": spec.weights}
        if spec.weights is None:
            row["hash"] = zoo.load_bundle(name).hash
            row["source"] = f"random init (seed {spec.seed})"
        else:
            try:
                data = (zoo.weights_dir() / spec.weights).read_bytes()
            except (OSError, ModuleNotFoundError, TypeError):
                row["source"] = "missing"
            else:
                row.update(hash=zoo.state_hash(data), bytes=len(data), source=spec.weights)
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        size = "-" if r["bytes"] is None else f"{r['bytes']} bytes"
        click.echo(f"{r['name']:<16} {r['hash'] or '-':<16}  {size:>16}  {r['source']}")


# ----- eval --------------------------------------------------------------------------------------
@cli.group("eval")
def eval_group() -> None:
    """Evaluate models."""


@eval_group.command("seg")
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("../shared/data/camvid"),
    show_default=True,
    help="CamVid folder with <split>.txt lists.",
)
@click.option("--split", default="test", show_default=True)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="First N images only.")
@click.option("--bf16/--no-bf16", default=False, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@debug_option
def eval_seg(
    data: Path, split: str, model: str, limit: int | None, bf16: bool, as_json: bool
) -> None:
    """Per-class IoU, mIoU, pixel accuracy and speed of a bundle's segmentation net on CamVid."""
    from .train.data import read_split
    from .train.seg import evaluate_seg
    from .zoo import load_bundle

    bundle = load_bundle(model)
    images, labels = read_split(data, split)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    result = evaluate_seg(bundle.seg, images, labels, bf16=bf16)
    result = {"model": model, "split": split, **result}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"model {model}, split {split}, {result['images']} images")
    for cls, iou in result["per_class_iou"].items():
        click.echo(f"  {cls:<12} IoU {100 * iou:6.2f}")
    click.echo(f"  {'mIoU':<12}     {100 * result['miou']:6.2f}")
    click.echo(f"  {'pixel acc':<12}     {100 * result['pixel_accuracy']:6.2f}")
    click.echo(f"  {'speed':<12}     {result['images_per_s']:6.2f} images/s")


# ----- train -------------------------------------------------------------------------------------
@cli.group(
    "train",
    cls=_LazyGroup,
    lazy={
        "seg": ("semcodec.train.seg", "seg_command"),
        "codec": ("semcodec.train.codec", "codec_command"),
        "export": ("semcodec.train.export", "export_command"),
        "fit-table": ("semcodec.train.fit_table", "fit_table_command"),
        "fix-generator": ("semcodec.train.fix_generator", "fix_generator_command"),
    },
)
def train_group() -> None:
    """Train the segmentation network or the codec, export shipped weights, refit their table,
    put the generator on its integer grid."""


def _terminate_like_interrupt() -> None:
    """Make SIGTERM unwind like Ctrl-C (KeyboardInterrupt: temporary output files removed,
    "interrupted", exit 130); forked pool workers keep SIGTERM's default action."""
    owner = os.getpid()

    def handler(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    _terminate_like_interrupt()
    cli.main(args=list(argv) if argv is not None else None, prog_name=PROG)


if __name__ == "__main__":
    main()
