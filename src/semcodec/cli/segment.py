"""The segment command: the semantic maps of images, without encoding them, as a batch like
encode and decode (many inputs, -d, --from-list, --skip-existing, --report, -j, --cluster)."""

from __future__ import annotations

from pathlib import Path

import click

from semcodec.batch.outcome import Outcome
from semcodec.batch.plan import Checks, no_check
from semcodec.batch.run import BatchConfig
from semcodec.batch.tasks import SegmentTask, existing_map, segment_worker
from semcodec.cli.batch import check_io_args, io_options, run_batch
from semcodec.cli.common import STDIO, apply_options, debug_enabled
from semcodec.cli.dataset import DatasetOptions, dataset_options
from semcodec.defaults import DEFAULT_MODEL

#: a map's default name beside its image: photo.png -> photo.map.png (never the image's)
MAP_SUFFIX = ".map.png"


def _segment_report(name: str, out: str, o: Outcome) -> str:
    """``in -> out: WxH map (L class ids | P palette)``."""
    i = o.info
    kind = "palette" if i["mode"] == "P" else "class ids"
    return f"{name} -> {out}: {i['width']}x{i['height']} map ({kind})"


@click.command()
@click.argument("inputs", nargs=-1, metavar="IMG...")
@click.option("--color", is_flag=True, help="Palette colours instead of class ids.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle.")
@apply_options(io_options)
@dataset_options
@click.pass_context
def segment(
    ctx: click.Context,
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    color: bool,
    model: str,
    jobs: int,
    force: bool,
    quiet: bool,
    dataset: DatasetOptions,
) -> None:
    """Full-resolution semantic maps of images: 8-bit PNGs of class ids (or --color), default
    output NAME.map.png beside NAME.png; '-' is stdin/stdout."""
    inputs = tuple(dataset.inputs(inputs))
    check_io_args(inputs, output, output_dir)
    dataset.check(output)
    outputs = dataset.outputs(inputs, output, output_dir, MAP_SUFFIX)

    def make_task(inp: str, stdin_data: bytes | None) -> SegmentTask:
        """Bundle one input with the settings for a worker."""
        return SegmentTask(inp, stdin_data if inp == STDIO else None, model, color)

    config = BatchConfig(
        inputs,
        tuple(outputs),
        make_task,
        segment_worker,
        _segment_report,
        models=(model,),
        jobs=jobs,
        **dataset.batch_settings(force),
        command="segment",
        checks=Checks(existing_map, no_check),
        debug=debug_enabled(ctx),
    )
    run_batch(ctx, config, quiet)
