"""What every command shares: printing the one-line messages, --debug, --effort and usage problems
found below the command line (exit codes and message formats live in ``semcodec.errors``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import click

from semcodec.batch.stdio import STDIO as STDIO
from semcodec.batch.workers import import_torch as import_torch
from semcodec.defaults import DEFAULT_EFFORT, EFFORTS
from semcodec.errors import EXIT_FAILURE as EXIT_FAILURE
from semcodec.errors import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from semcodec.errors import EXIT_OK as EXIT_OK
from semcodec.errors import EXIT_USAGE as EXIT_USAGE
from semcodec.errors import PROG as PROG
from semcodec.errors import UsageProblem, error_line, warning_line
from semcodec.errors import describe_error as describe_error
from semcodec.errors import with_name as with_name

try:
    from semcodec import __version__
except ImportError:  # imported as a namespace package (stale editable install): use metadata
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("semcodec")

_DEBUG_KEY = "semcodec.debug"


def error(message: str) -> None:
    """Print the single error line every failure uses."""
    click.echo(error_line(message), err=True)


def warning(message: str) -> None:
    """Print the single warning line."""
    click.echo(warning_line(message), err=True)


@contextlib.contextmanager
def usage_problems() -> Iterator[None]:
    """What the library below finds wrong with a request, as click's usage error (exit 2)."""
    try:
        yield
    except UsageProblem as exc:
        if exc.option is not None:
            raise click.BadParameter(str(exc), param_hint=exc.option) from None
        raise click.UsageError(str(exc)) from None


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
    help="Encoder effort: higher spends more encoding time for a lower rate-distortion cost "
    "(most often fewer bytes at the same quality, sometimes a larger file of higher PSNR; the "
    "AVIF residual's speed, 8 at effort 1 to 0 at 9, and how much of the picture the "
    "enhancement is fitted on); files decode the same way, as fast.",
)


def apply_options(options: list[Callable]) -> Callable:
    """Apply a shared list of click options to a command."""

    def deco(fn: Callable) -> Callable:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco
