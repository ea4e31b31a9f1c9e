"""The options of encode and decode for datasets: resume (--skip-existing), a JSON Lines report,
inputs from a file list, outputs mirroring the input tree, and a cluster to run on.

The command receives them as one ``DatasetOptions``, so that adding them leaves the commands'
own parameters alone.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from semcodec.cli.common import STDIO

#: the parameter names of the dataset options, popped from the command's keyword arguments
_NAMES = ("skip_existing", "report", "from_list", "null", "keep_tree", "root", "cluster")


@dataclass(frozen=True)
class DatasetOptions:
    """What the dataset options asked for; the defaults are a plain batch."""

    skip_existing: bool = False
    report: str | None = None
    from_list: str | None = None
    null: bool = False
    keep_tree: bool = False
    root: Path | None = None
    cluster: str | None = None

    def inputs(self, arguments: Sequence[str]) -> list[str]:
        """The inputs: the arguments, then the list's entries (exit 2 if there are none)."""
        if self.null and self.from_list is None:
            raise click.UsageError("-0 applies to --from-list")
        listed = read_list(self.from_list, self.null) if self.from_list is not None else []
        if self.from_list == STDIO and STDIO in arguments:
            raise click.UsageError("stdin cannot be both the file list and an input")
        inputs = [*arguments, *listed]
        if not inputs:
            raise click.UsageError("no inputs: give IN... or --from-list FILE")
        return inputs

    def outputs(
        self,
        inputs: Sequence[str],
        output: str | None,
        output_dir: Path | None,
        suffix: str,
        name: Callable[[str, str | None, Path | None, str], str],
    ) -> list[str]:
        """Each input's output: ``name`` (the plain rule), or its place in the mirrored tree."""
        if self.root is not None and not self.keep_tree:
            raise click.UsageError("--root applies to --keep-tree")
        if not self.keep_tree:
            return [name(i, output, output_dir, suffix) for i in inputs]
        if output_dir is None:
            raise click.UsageError("--keep-tree needs -d DIR")
        if STDIO in inputs:
            raise click.UsageError("--keep-tree cannot name the output of stdin ('-')")
        root = tree_root(inputs, self.root)
        return [tree_output(i, root, output_dir, suffix) for i in inputs]

    def check(self, output: str | None) -> None:
        """Usage rules between the dataset options and -o (exit 2)."""
        if self.report == STDIO and output == STDIO:
            raise click.UsageError("--report - and -o - cannot share stdout")
        if self.cluster is not None:
            from semcodec.batch.cluster import parse_cluster

            parse_cluster(self.cluster)


def read_list(source: str, null: bool) -> list[str]:
    """Paths from a list file ('-': stdin), one a line or NUL-separated; empty entries skipped."""
    if source == STDIO:
        raw = sys.stdin.buffer.read()
    else:
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise click.UsageError(f"cannot read --from-list {source!r}: {exc.strerror}") from None
    entries = raw.split(b"\0") if null else raw.splitlines()
    return [os.fsdecode(e) for e in entries if e]


def tree_root(inputs: Sequence[str], root: Path | None) -> str:
    """The folder the mirrored tree starts from: --root, else the inputs' deepest common folder."""
    if root is not None:
        return os.path.abspath(root)
    return os.path.commonpath([os.path.dirname(os.path.abspath(i)) for i in inputs])


def tree_output(inp: str, root: str, output_dir: Path, suffix: str) -> str:
    """DIR/<the input's path below root, with the new suffix> (exit 2 if it is not below)."""
    rel = os.path.relpath(os.path.abspath(inp), root)
    if rel == os.curdir or rel.split(os.sep, 1)[0] == os.pardir:
        raise click.UsageError(f"input {inp!r} is not below the tree's root {root!r} (--root)")
    return str(output_dir / Path(rel).with_suffix(suffix))


_OPTIONS = [
    click.option(
        "--skip-existing",
        is_flag=True,
        help="Skip inputs whose output exists and is a complete, valid file (.sem: header and "
        "every CRC; images: a full decode); an invalid one is an error unless --force.",
    ),
    click.option(
        "--report",
        metavar="FILE.jsonl",
        default=None,
        help="Write one JSON object per input and a summary ('-': stdout, the per-file lines "
        "then go to stderr); replaced if it exists.",
    ),
    click.option(
        "--from-list",
        metavar="FILE",
        default=None,
        help="Read input paths from FILE ('-': stdin), one a line, after any IN arguments.",
    ),
    click.option("-0", "--null", is_flag=True, help="--from-list entries are NUL-separated."),
    click.option(
        "--keep-tree",
        is_flag=True,
        help="Mirror the inputs' folders under -d, from the inputs' deepest common folder "
        "(or --root); missing folders are created.",
    ),
    click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        metavar="DIR",
        help="--keep-tree: the folder whose tree is mirrored.",
    ),
    click.option(
        "--cluster",
        metavar="SPEC",
        default=None,
        help="Run on Dask distributed: a scheduler address (tcp://host:8786) or local:N "
        "(N worker processes here; -j is then ignored). Needs the [cluster] extra.",
    ),
]


def dataset_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the dataset options to a command and hand them over as ``dataset=DatasetOptions``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {key: kwargs.pop(key) for key in _NAMES}
        return fn(*args, dataset=DatasetOptions(**values), **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper
