"""The decode command: its options, the output format (--format or -o's suffix), its usage
rules and its line per file."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from semcodec.batch.formats import DECODE_FORMATS, SUFFIX_FORMATS
from semcodec.batch.outcome import Outcome
from semcodec.batch.plan import Checks
from semcodec.batch.run import BatchConfig
from semcodec.batch.tasks import DecodeTask, decode_worker, existing_image
from semcodec.cli.batch import check_io_args, in_out_form, io_options, run_batch
from semcodec.cli.common import STDIO, apply_options, debug_enabled
from semcodec.cli.dataset import DatasetOptions, dataset_options


def _decode_report(name: str, out: str, o: Outcome) -> str:
    """``in -> out: WxH MODE (full layer)``."""
    i = o.info
    return f"{name} -> {out}: {i['width']}x{i['height']} {i['mode']} ({i['layer']} layer)"


def _output_format(fmt: str | None, output: str | None) -> str:
    """--format, else the -o extension, else png."""
    if fmt is not None:
        return {"jpg": "jpeg", "tif": "tiff"}.get(fmt, fmt)
    if output is not None and output != STDIO:
        suffix = Path(output).suffix.lower()
        if suffix not in SUFFIX_FORMATS:
            raise click.UsageError(
                f"cannot tell the output format from {suffix or 'no extension'!r}; use --format"
            )
        return SUFFIX_FORMATS[suffix]
    return "png"


# a default output never takes a name the original picture can have (photo.png beside
# photo.sem): NAME.dec.png, NAME.base.png, NAME.map.png
LAYER_SUFFIX = {"full": ".dec", "map": ".map", "base": ".base"}


@click.command()
@click.argument("inputs", nargs=-1, metavar="IN...")
@click.option(
    "--layer",
    type=click.Choice(["full", "base", "map"]),
    default="full",
    show_default=True,
    help="base: the prediction the residual was coded against, without the residual: the "
    "generator's reconstruction on tiles that use the learned base (every tile at -q 0 and "
    "with --no-gating), flat grey on tiles that do not (with the current release, every tile "
    "of the photos measured at -q 1..60: README); 'info' says which. "
    "map: the semantic map alone as class ids (8-bit grey PNG), no generator.",
)
@click.option(
    "--segmentation",
    "segmentation",
    metavar="MAP.png",
    default=None,
    help="Also write the decoded semantic map, as class ids (one input only).",
)
@click.option(
    "--color",
    is_flag=True,
    help="Maps (--layer map, --segmentation) as palette colours instead of class ids.",
)
@click.option(
    "--map-size",
    type=click.Choice(["full", "stored"]),
    default="full",
    show_default=True,
    help="--layer map: at image size (nearest) or at the stored 1/8 size.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*DECODE_FORMATS, "jpg", "tif"]),
    default=None,
    help="Output format  [default: from -o's extension, else png]",
)
@click.option("--model", default=None, help="Model bundle  [default: the one named in the file]")
@apply_options(io_options)
@dataset_options
@click.pass_context
def decode(
    ctx: click.Context,
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    layer: str,
    segmentation: str | None,
    color: bool,
    map_size: str,
    fmt: str | None,
    model: str | None,
    jobs: int,
    force: bool,
    quiet: bool,
    dataset: DatasetOptions,
) -> None:
    """Decode .sem files to images (default output: NAME.dec.png for NAME.sem, never the
    original's name; '-' is stdin/stdout)."""
    inputs, output = in_out_form(inputs, output, output_dir, SUFFIX_FORMATS)
    inputs = tuple(dataset.inputs(inputs))
    check_io_args(inputs, output, output_dir)
    dataset.check(output)
    if layer == "map" and segmentation is not None:
        raise click.UsageError("--layer map writes the map itself; drop --segmentation")
    if layer == "map" and fmt not in (None, "png"):
        raise click.UsageError("--layer map writes PNG")
    if segmentation is not None and len(inputs) > 1:
        raise click.UsageError("--segmentation takes one input")
    if segmentation == STDIO:
        raise click.UsageError("--segmentation needs a file name")
    fmt = _output_format(fmt, output)
    suffix = LAYER_SUFFIX[layer] + DECODE_FORMATS[fmt][1]
    outputs = dataset.outputs(inputs, output, output_dir, suffix)

    def make_task(inp: str, stdin_data: bytes | None) -> DecodeTask:
        """Bundle one input with the settings for a worker."""
        return DecodeTask(
            inp,
            stdin_data if inp == STDIO else None,
            model,
            layer,
            fmt,
            segmentation is not None,
            color,
            map_size,
        )

    checks = Checks(
        functools.partial(existing_image, DECODE_FORMATS[fmt][0]),
        functools.partial(existing_image, "PNG", None),
    )
    config = BatchConfig(
        tuple(inputs),
        tuple(outputs),
        make_task,
        decode_worker,
        _decode_report,
        models=(model,) if model else (),
        jobs=jobs,
        **dataset.batch_settings(force),
        extra_out=segmentation,
        command="decode",
        checks=checks,
        debug=debug_enabled(ctx),
    )
    run_batch(ctx, config, quiet)
