"""The ``semcodec`` command line, in the conventions of cwebp/cjxl.

Exit codes: 0 success, 1 processing error (bad or corrupt input, I/O, model problems), 2 usage
error, 130 interrupted (Ctrl-C or SIGTERM). Errors are one line on stderr
(``semcodec: error: ...``); ``--debug`` adds the traceback. Outputs are written atomically and
never clobbered without ``--force``.
Heavy modules (torch, the codec, training, benchmarks) are imported only by the commands that
need them, so ``info``, ``--help`` and usage errors stay fast.

Modules: ``common`` (messages, shared options), ``groups`` (lazy and root groups), ``batch``
(the batch's options and terminal; the engine is ``semcodec.batch``), ``dataset`` (the dataset
options), one module per command or command group (``encode``, ``decode``, ``segment``, ``info`` with
models and doctor, ``evaluate``, ``train``, ``bench``) and ``root`` (the ``semcodec`` group and
``main``). What one file's encode or decode does is library code, ``semcodec.batch.tasks``.
"""

from __future__ import annotations

from semcodec.batch.formats import DECODE_FORMATS
from semcodec.cli.common import (
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
from semcodec.cli.root import cli, main
from semcodec.decoder.info import file_info
from semcodec.labelmap import label_image

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
