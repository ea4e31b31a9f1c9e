"""The root ``semcodec`` group and the console-script entry point."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence

import click

from semcodec.cli import decode, encode, evaluate, info, segment, train
from semcodec.cli.common import PROG, __version__, debug_option
from semcodec.cli.groups import RootGroup


@click.group(
    cls=RootGroup,
    lazy={"bench": ("semcodec.cli.bench", "bench")},
    optional=("bench",),
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@debug_option
def cli() -> None:
    """semcodec: a learned semantic image codec (.sem files)."""


for _command in (
    info.doctor,
    encode.encode,
    decode.decode,
    info.info,
    info.models_command,
    segment.segment,
    evaluate.eval_group,
    train.train_group,
):
    cli.add_command(_command)


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
