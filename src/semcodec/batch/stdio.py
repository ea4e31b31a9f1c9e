"""File arguments and the standard streams: '-' is stdin as an input and stdout as an output;
stdin is read once, binary data never goes to a terminal."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from semcodec.errors import SemcodecError

#: a file argument that means stdin (input) or stdout (output)
STDIO = "-"

TERMINAL = "refusing to write binary data to a terminal (use -o FILE or a pipe)"


def stdout_binary() -> io.BufferedIOBase:
    """The binary stdout, for .sem or image data written to a pipe."""
    return sys.stdout.buffer


def stdin_bytes() -> bytes:
    """All of stdin, read once."""
    return sys.stdin.buffer.read()


def read_input(name: str, stdin_data: bytes | None) -> bytes:
    """Bytes of a file argument (``-`` is stdin, read once by the caller)."""
    if name == STDIO:
        assert stdin_data is not None
        return stdin_data
    try:
        return Path(name).read_bytes()
    except OSError as exc:  # the same words as an image the encoder cannot read
        raise SemcodecError(f"cannot read {name!r}: {exc.strerror or exc}") from None


def display(path: str, stdio: str) -> str:
    """How a file argument is shown in messages."""
    return stdio if path == STDIO else path
