"""The options of encode and decode for datasets: resume (--skip-existing), a JSON Lines report,
inputs from a file list, outputs mirroring the input tree, and a cluster to run on (what they
mean is ``semcodec.batch.plan``'s and ``semcodec.batch.cluster``'s; here they are options).

The command receives them as one ``DatasetOptions``, so that adding them leaves the commands'
own parameters alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from semcodec.batch.cluster import parse_cluster
from semcodec.batch.plan import InputList, Layout, WriteRules
from semcodec.batch.stdio import STDIO
from semcodec.cli.common import usage_problems
from semcodec.defaults import DEFAULT_CLUSTER_TIMEOUT

#: the parameter names of the dataset options, popped from the command's keyword arguments
_NAMES = (
    "skip_existing",
    "report",
    "from_list",
    "null",
    "keep_tree",
    "root",
    "cluster",
    "cluster_timeout",
)


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
    cluster_timeout: float = DEFAULT_CLUSTER_TIMEOUT

    def inputs(self, arguments: Sequence[str]) -> list[str]:
        """The inputs: the arguments, then the list's entries (exit 2 if there are none)."""
        with usage_problems():
            return InputList(self.from_list, self.null).inputs(arguments)

    def outputs(
        self,
        inputs: Sequence[str],
        output: str | None,
        output_dir: Path | None,
        suffix: str,
    ) -> list[str]:
        """Each input's output: beside it or in -d DIR, or its place in the mirrored tree."""
        with usage_problems():
            return Layout(self.keep_tree, self.root).outputs(inputs, output, output_dir, suffix)

    def rules(self, force: bool) -> WriteRules:
        """How existing outputs are treated (--force, --skip-existing); --keep-tree makes folders."""
        return WriteRules(force, self.skip_existing, self.keep_tree)

    def batch_settings(self, force: bool) -> dict[str, Any]:
        """What every batch command hands BatchConfig from these options: the write rules, the
        cluster and its timeout, the report."""
        return {
            "rules": self.rules(force),
            "cluster": self.cluster,
            "cluster_timeout": self.cluster_timeout,
            "report": self.report,
        }

    def check(self, output: str | None) -> None:
        """Usage rules between the dataset options and -o (exit 2)."""
        if self.report == STDIO and output == STDIO:
            raise click.UsageError("--report - and -o - cannot share stdout")
        if self.cluster is not None:
            with usage_problems():
                parse_cluster(self.cluster)


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
    click.option(
        "--cluster-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_CLUSTER_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="--cluster: how long a scheduler has to answer before the command gives up.",
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
