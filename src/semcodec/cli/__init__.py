"""The ``semcodec`` command line, in the conventions of cwebp/cjxl.

Exit codes: 0 success, 1 processing error (bad or corrupt input, I/O, model problems), 2 usage
error, 130 interrupted (Ctrl-C or SIGTERM). Errors are one line on stderr
(``semcodec: error: ...``); ``--debug`` adds the traceback. Outputs are written atomically and
never clobbered without ``--force``.
Heavy modules (torch, the codec, training, benchmarks) are imported only by the commands that
need them, so ``info``, ``--help`` and usage errors stay fast.

Modules: ``common`` (exit codes, messages, shared options), ``groups`` (lazy and root groups),
``batch`` (the encode/decode batch runner), one module per command group (``codec``,
``evaluate``, ``train``, ``bench``) and ``root`` (the ``semcodec`` group and ``main``).
"""

from __future__ import annotations

from ..fileinfo import file_info
from ..labelmap import label_image
from .codec import DECODE_FORMATS
from .common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    STDIO,
    __version__,
    debug_option,
    describe_error,
    effort_option,
)
from .root import cli, main

__all__ = [
    "DECODE_FORMATS",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "STDIO",
    "__version__",
    "cli",
    "debug_option",
    "describe_error",
    "effort_option",
    "file_info",
    "label_image",
    "main",
]
