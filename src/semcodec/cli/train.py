"""``semcodec train``: its subcommands live in the training modules, imported only when run."""

from __future__ import annotations

import click

from semcodec.cli.groups import LazyGroup


@click.group(
    "train",
    cls=LazyGroup,
    lazy={
        "seg": ("semcodec.train.seg", "seg_command"),
        "codec": ("semcodec.train.codec", "codec_command"),
        "export": ("semcodec.train.export", "export_command"),
        "fit-table": ("semcodec.train.fit_table", "fit_table_command"),
        "fix-generator": ("semcodec.train.fix_generator", "fix_generator_command"),
        "balance-colour": ("semcodec.train.balance_colour", "balance_colour_command"),
        "calibrate-gating": ("semcodec.train.calibrate_gating", "calibrate_gating_command"),
        "enhance-data": ("semcodec.train.enhance", "enhance_data_command"),
        "enhance": ("semcodec.train.enhance", "enhance_command"),
        "attach": ("semcodec.train.attach", "attach_command"),
        "gpu": ("semcodec.train.gpu", "gpu_group"),
    },
)
def train_group() -> None:
    """Train the segmentation network or the codec, export shipped weights, refit their table,
    put the generator on its integer grid, run short trainings on a lent GPU (gpu)."""
