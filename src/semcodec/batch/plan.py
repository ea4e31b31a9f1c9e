"""Output planning, before any work: each input's output path (beside it, in -d DIR, or in the
mirrored tree of --keep-tree), the inputs of --from-list, and for each output whether it is
written, kept (--skip-existing found it valid) or refused (it would clobber a file)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from semcodec.batch import stdio
from semcodec.batch.stdio import STDIO
from semcodec.batch.verify import Existing
from semcodec.errors import UsageProblem, describe_error
from semcodec.imageio import exists_message

#: why an output was skipped: valid before the run started, or completed by another process
#: (another run over the same folder) while this one was going
REASON_EXISTS = "exists"
REASON_OTHER = "written by another process"


# ----- inputs and output paths -----------------------------------------------------------------


def read_list(source: str, null: bool) -> list[str]:
    """Paths from a list file ('-': stdin), one a line or NUL-separated; empty entries skipped."""
    if source == STDIO:
        raw = sys.stdin.buffer.read()
    else:
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise UsageProblem(f"cannot read --from-list {source!r}: {exc.strerror}") from None
    entries = raw.split(b"\0") if null else raw.splitlines()
    return [os.fsdecode(e) for e in entries if e]


@dataclass(frozen=True)
class InputList:
    """Where the inputs come from: the arguments, then --from-list's entries (-0: NUL-separated)."""

    from_list: str | None = None
    null: bool = False

    def inputs(self, arguments: Sequence[str]) -> list[str]:
        """The inputs, in order (a usage problem if there are none)."""
        if self.null and self.from_list is None:
            raise UsageProblem("-0 applies to --from-list")
        listed = read_list(self.from_list, self.null) if self.from_list is not None else []
        if self.from_list == STDIO and STDIO in arguments:
            raise UsageProblem("stdin cannot be both the file list and an input")
        inputs = [*arguments, *listed]
        if not inputs:
            raise UsageProblem("no inputs: give IN... or --from-list FILE")
        return inputs


def output_name(inp: str, output: str | None, output_dir: Path | None, suffix: str) -> str:
    """Where one input's output goes: -o, -d DIR/<stem><suffix>, or next to the input; - is stdout."""
    if output is not None:
        return output
    if inp == STDIO:
        if output_dir is not None:
            raise UsageProblem("cannot name the output of stdin ('-') in a directory; use -o")
        return STDIO
    try:
        target = Path(inp).with_suffix(suffix)
    except ValueError:  # no file name to replace the suffix of, e.g. '..'
        target = Path(inp + suffix)
    return str(output_dir / target.name) if output_dir is not None else str(target)


def tree_root(inputs: Sequence[str], root: Path | None) -> str:
    """The folder the mirrored tree starts from: --root, else the inputs' deepest common folder."""
    if root is not None:
        return os.path.abspath(root)
    return os.path.commonpath([os.path.dirname(os.path.abspath(i)) for i in inputs])


def tree_output(inp: str, root: str, output_dir: Path, suffix: str) -> str:
    """DIR/<the input's path below root, with the new suffix> (a usage problem if not below)."""
    rel = os.path.relpath(os.path.abspath(inp), root)
    if rel == os.curdir or rel.split(os.sep, 1)[0] == os.pardir:
        raise UsageProblem(f"input {inp!r} is not below the tree's root {root!r} (--root)")
    return str(output_dir / Path(rel).with_suffix(suffix))


@dataclass(frozen=True)
class Layout:
    """How outputs are named: beside the input or in -d DIR (``output_name``), or, with
    --keep-tree, the inputs' folders mirrored under DIR from ``root`` (else their common one)."""

    keep_tree: bool = False
    root: Path | None = None

    def outputs(
        self,
        inputs: Sequence[str],
        output: str | None,
        output_dir: Path | None,
        suffix: str,
        name: Callable[[str, str | None, Path | None, str], str] = output_name,
    ) -> list[str]:
        """Each input's output: ``name`` (the plain rule), or its place in the mirrored tree."""
        if self.root is not None and not self.keep_tree:
            raise UsageProblem("--root applies to --keep-tree")
        if not self.keep_tree:
            return [name(i, output, output_dir, suffix) for i in inputs]
        if output_dir is None:
            raise UsageProblem("--keep-tree needs -d DIR")
        if STDIO in inputs:
            raise UsageProblem("--keep-tree cannot name the output of stdin ('-')")
        root = tree_root(inputs, self.root)
        return [tree_output(i, root, output_dir, suffix) for i in inputs]


# ----- each output: written, kept or refused --------------------------------------------------


def invalid_message(out: str, reason: str) -> str:
    """--skip-existing's refusal of an output that is not a complete file: what to do instead."""
    return f"cannot skip {out!r}: {reason}; move it away, or write to another folder with -d"


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (existing or not)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.abspath(a) == os.path.abspath(b)


def plan_problem(
    inp: str, out: str, force: bool, taken: set[str], *, make_dirs: bool = False
) -> str | None:
    """Why writing ``out`` for ``inp`` must be refused before any work is done, or None."""
    if out == STDIO:
        if stdio.stdout_binary().isatty():  # `segment` plans without check_io_args
            return stdio.TERMINAL
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
    if not make_dirs and not parent.is_dir():
        return f"cannot write {out!r}: directory {str(parent)!r} does not exist"
    if not force and os.path.lexists(out):
        return exists_message(out)
    return None


@dataclass(frozen=True)
class WriteRules:
    """How outputs that exist are treated, and whether missing folders are made."""

    force: bool = False
    skip_existing: bool = False
    make_dirs: bool = False


@dataclass(frozen=True)
class Target:
    """One planned output: to be written (``replace``: over an invalid file, --force), or a
    valid file already there (``existing``), which is kept."""

    path: str
    existing: Existing | None = None
    replace: bool = False


def no_check(path: str) -> Existing:
    """The check of an output that --skip-existing cannot trust: never valid."""
    raise ValueError(f"cannot check {path!r}")


@dataclass(frozen=True)
class Checks:
    """How --skip-existing finds an output valid: the main one (knowing its input) and the extra."""

    main: Callable[[str, str], Existing]
    extra: Callable[[str], Existing]

    def of(self, plan: Planned) -> tuple[Callable[[str], Existing], Callable[[str], Existing]]:
        """The checks of one input's main and extra output, each taking the output's path."""
        return (lambda path: self.main(plan.input, path)), self.extra


def plan_target(
    inp: str, out: str, rules: WriteRules, taken: set[str], check: Callable[[str], Existing]
) -> Target | str:
    """The output's plan, or why it must be refused; --skip-existing checks an existing file."""
    problem = plan_problem(inp, out, True, taken, make_dirs=rules.make_dirs)
    if problem is not None:
        return problem
    if out == STDIO or not os.path.lexists(out):
        return Target(out)
    if rules.skip_existing:
        try:
            return Target(out, existing=check(out))
        except (OSError, ValueError) as exc:  # CorruptData is a ValueError
            if not rules.force:
                return invalid_message(out, describe_error(exc))
    if rules.force:
        return Target(out, replace=True)
    return exists_message(out)


@dataclass
class Planned:
    """One input whose outputs are planned: its task runs unless every output is kept."""

    input: str
    main: Target
    extra: Target | None = None

    @property
    def skipped(self) -> bool:
        """Every output exists and is valid: nothing to do."""
        return self.main.existing is not None and (
            self.extra is None or self.extra.existing is not None
        )


def plan_input(
    inp: str,
    out: str,
    extra_out: str | None,
    rules: WriteRules,
    taken: set[str],
    checks: Checks,
) -> Planned | str:
    """Plan an input's output (and the extra one), or say why it cannot be processed."""
    main = plan_target(inp, out, rules, taken, lambda path: checks.main(inp, path))
    if isinstance(main, str):
        return main
    extra = None
    if extra_out is not None:
        extra = plan_target(inp, extra_out, rules, taken, checks.extra)
        if isinstance(extra, str):
            return extra
    return Planned(inp, main, extra)


def found_valid(target: Target, check: Callable[[str], Existing]) -> Target:
    """The target, kept if a valid file is at its path now (an invalid one is left to the write)."""
    if target.existing is not None or target.path == STDIO or not os.path.lexists(target.path):
        return target
    try:
        return Target(target.path, existing=check(target.path))
    except (OSError, ValueError):  # CorruptData is a ValueError
        return target


def appeared(plan: Planned, checks: Checks) -> bool:
    """Whether another process has completed every output of ``plan`` since it was planned
    (each output found valid is kept from now on)."""
    main, extra = checks.of(plan)
    plan.main = found_valid(plan.main, main)
    if plan.extra is not None:
        plan.extra = found_valid(plan.extra, extra)
    return plan.skipped
