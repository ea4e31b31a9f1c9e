"""Delivery of a computed output: written atomically (a reader never sees half a file) or to
stdout, never over a file it must not replace; a valid file another process put there first is
kept with --skip-existing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from semcodec.batch import stdio
from semcodec.batch.plan import Target, WriteRules, found_valid, invalid_message
from semcodec.batch.stdio import STDIO
from semcodec.batch.verify import Existing
from semcodec.errors import SemcodecError, describe_error
from semcodec.imageio import OutputExists, atomic_write_bytes


def deliver(out: str, data: bytes, force: bool, make_dirs: bool = False) -> None:
    """Write one output: atomically to a file, or to stdout."""
    if make_dirs and out != STDIO:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    if out == STDIO:
        stream = stdio.stdout_binary()
        view = memoryview(data)
        while view:  # a pipe closed mid-write can return a short count instead of raising
            view = view[stream.write(view) :]
        stream.flush()
    else:
        atomic_write_bytes(out, data, force)


def _overwrites(target: Target, rules: WriteRules) -> bool:
    """Whether the write replaces a file at its path: --force alone, or an invalid file that
    --skip-existing --force replaces; otherwise it never clobbers (another process's file)."""
    return target.replace or (rules.force and not rules.skip_existing)


def write_target(
    target: Target | None, data: bytes | None, rules: WriteRules, check: Callable[[str], Existing]
) -> Target | None:
    """Write one planned output unless it is kept; with --skip-existing a valid file that
    another process put there first is kept instead (returned with ``existing`` set)."""
    if target is None or target.existing is not None or data is None:
        return target
    if rules.skip_existing and target.replace:  # replaced by another process meanwhile?
        target = found_valid(target, check)
        if target.existing is not None:
            return target
    try:
        deliver(target.path, data, _overwrites(target, rules), rules.make_dirs)
    except OutputExists:
        if not rules.skip_existing:
            raise
        return _kept_or_replaced(target, data, rules, check)
    return target


def _kept_or_replaced(
    target: Target, data: bytes, rules: WriteRules, check: Callable[[str], Existing]
) -> Target:
    """A file appeared at the output's name during the run: kept when valid, replaced when
    not and --force is given, else refused as --skip-existing refuses it before any work."""
    try:
        return Target(target.path, existing=check(target.path))
    except (OSError, ValueError) as exc:
        if not rules.force:
            raise SemcodecError(invalid_message(target.path, describe_error(exc))) from None
    deliver(target.path, data, True, rules.make_dirs)
    return target
