"""What every command shares: exit codes, the one-line message formats, --debug and --effort."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

import click

from semcodec.defaults import DEFAULT_EFFORT, EFFORTS
from semcodec.errors import SemcodecError

try:
    from semcodec import __version__
except ImportError:  # imported as a namespace package (stale editable install): use metadata
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("semcodec")

PROG = "semcodec"
STDIO = "-"
_DEBUG_KEY = "semcodec.debug"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def error(message: str) -> None:
    """The single error line format every failure uses."""
    click.echo(f"{PROG}: error: {message}", err=True)


def warning(message: str) -> None:
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


def with_name(name: str, message: str) -> str:
    """Prefix a per-file message with the file, unless the message already names it."""
    return message if name in message else f"{name}: {message}"


def debug_enabled(ctx: click.Context | None = None) -> bool:
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

effort_option = click.option(
    "-e",
    "--effort",
    type=click.IntRange(min(EFFORTS), max(EFFORTS)),
    default=DEFAULT_EFFORT,
    show_default=True,
    help="Encoder effort: higher spends more encoding time for fewer bytes at the same "
    "quality (the AVIF residual's speed 11 - effort; from 6, a prediction is searched for at "
    "every quality); files decode the same way, as fast.",
)


def apply_options(options: list[Callable]) -> Callable:
    """Apply a shared list of click options to a command."""

    def deco(fn: Callable) -> Callable:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


def import_torch() -> None:
    """Import torch with Python's cyclic collector paused, then freeze what exists out of later
    collections: torch's import makes about a million objects that every full collection would
    rescan (a 64x64 encode: 0.5 s less CPU). Only the command line does this: it owns its process."""
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
