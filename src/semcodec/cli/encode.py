"""The encode command: its options, their usage rules, and its line per file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from semcodec.batch.formats import SUFFIX_FORMATS
from semcodec.batch.outcome import Outcome
from semcodec.batch.plan import Checks, no_check
from semcodec.batch.run import BatchConfig
from semcodec.batch.tasks import EncodeTask, encode_worker, existing_sem
from semcodec.cli.batch import check_io_args, in_out_form, io_options, run_batch
from semcodec.cli.common import (
    EXIT_USAGE,
    STDIO,
    apply_options,
    debug_enabled,
    effort_option,
    error,
    warning,
)
from semcodec.cli.dataset import DatasetOptions, dataset_options
from semcodec.decoder.info import bpp
from semcodec.defaults import CHROMAS, DEFAULT_CHROMA, DEFAULT_MODEL, DEFAULT_RESIDUAL
from semcodec.encoder.options import MAX_REFINE, EncodeOptions
from semcodec.encoder.ratecontrol import Target
from semcodec.format import container
from semcodec.format.classes import CLASSES

# the residual coders' names, from the format's codes (no coder module imported at start-up)
BACKENDS = tuple(kind.label for kind in container.ResidualKind if kind != container.RESIDUAL_NONE)

_LAYER_SHORT = {
    "semantic_map": "map",
    "compact": "compact",
    "residual": "residual",
    "alpha": "alpha",
}


def _encode_report(name: str, out: str, o: Outcome) -> str:
    """``in -> out: N bytes, B bpp (map .., compact .., residual ..)``."""
    w, h = o.info["width"], o.info["height"]
    parts = ", ".join(
        f"{_LAYER_SHORT.get(k, k)} {bpp(v, w, h):.3f}" for k, v in o.info["layers"].items()
    )
    text = f"{name} -> {out}: {len(o.data)} bytes, {bpp(len(o.data), w, h):.3f} bpp ({parts})"
    if o.info["targeted"]:
        text += f", quality {o.info['quality']}"
    return text


@click.command()
@click.argument("inputs", nargs=-1, metavar="IN...")
@click.option(
    "-q",
    "--quality",
    type=click.IntRange(0, 100),
    default=None,
    help="0 (base layer only) .. 100  [default: 50]",
)
@click.option(
    "--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle name or weights file."
)
@click.option(
    "--residual",
    type=click.Choice(BACKENDS),
    default=None,
    help=f"Residual backend  [default: {DEFAULT_RESIDUAL}]",
)
@click.option(
    "--target-bpp",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="F",
    help="Highest quality whose file is at most F bits per pixel.",
)
@click.option(
    "--target-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES",
    help="Highest quality whose file is at most BYTES.",
)
@click.option(
    "--refine-steps",
    type=click.IntRange(0, MAX_REFINE),
    default=0,
    show_default=True,
    metavar="N",
    help="Encoder-side refinement of the compact layer (gradient steps, each about 2 s per "
    "megapixel on one core): better base layer for -q 0, no gain with a residual.",
)
@effort_option
@click.option(
    "--chroma",
    type=click.Choice(CHROMAS),
    default=DEFAULT_CHROMA,
    show_default=True,
    help="Chroma layout of the AVIF residual: 444 (full-size colour planes) or 420 (half-size, "
    "faster to encode; the enhancement network corrects the decoded picture).",
)
@click.option(
    "--metadata",
    "metadata",
    default="all",
    show_default=True,
    metavar="KINDS",
    help="Metadata of the input to keep: all, none, or a comma list of icc, exif, xmp "
    "(EXIF orientation is applied to the pixels and stored as 1).",
)
@click.option(
    "--gating/--no-gating",
    default=True,
    show_default=True,
    help="Per 64-pixel tile, code the residual against the generator, the bilinear base or "
    "nothing, whichever is estimated cheapest (--no-gating: the generator everywhere).",
)
@click.option(
    "--roi",
    "roi_spec",
    default=None,
    metavar="CLASS[:W],...",
    help="Regions of interest: classes whose pixels get the residual's bits, e.g. "
    "'pedestrian,car,bicyclist,signsymbol' or 'car:2,pedestrian' (weights 0.1..4, default 1). "
    "Classes: " + ", ".join(CLASSES) + ".",
)
@click.option(
    "--roi-strength",
    type=float,
    default=None,
    metavar="S",
    help="How much the background gives up for the ROI, 0..4 in tenths (0: the AV1 rate "
    "guide alone; each unit adds 0.5 px of background blur)  [default: 1]",
)
@apply_options(io_options)
@dataset_options
@click.pass_context
def encode(
    ctx: click.Context,
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    quality: int | None,
    model: str,
    residual: str | None,
    target_bpp: float | None,
    target_size: int | None,
    refine_steps: int,
    effort: int,
    chroma: str,
    metadata: str,
    gating: bool,
    roi_spec: str | None,
    roi_strength: float | None,
    jobs: int,
    force: bool,
    quiet: bool,
    dataset: DatasetOptions,
) -> None:
    """Encode images to .sem (default output: IN with suffix .sem; '-' is stdin/stdout)."""
    options, target = _settings(
        ctx,
        quality,
        target_size,
        target_bpp,
        effort=effort,
        residual=residual,
        chroma=chroma,
        metadata=metadata,
        gating=gating,
        roi=roi_spec,
        roi_strength=roi_strength,
        refine=refine_steps,
    )
    inputs, output = in_out_form(inputs, output, output_dir, {".sem"})
    inputs = tuple(dataset.inputs(inputs))
    check_io_args(inputs, output, output_dir)
    _check_encode_names(inputs, output)
    if options.roi is not None and quality == 0:
        warning("--roi has no effect at -q 0 (no residual to steer); encoding without it")
    dataset.check(output)
    outputs = dataset.outputs(inputs, output, output_dir, ".sem")

    def make_task(inp: str, stdin_data: bytes | None) -> EncodeTask:
        """Bundle one input with the settings for a worker."""
        return EncodeTask(inp, stdin_data if inp == STDIO else None, model, options, target)

    config = BatchConfig(
        tuple(inputs),
        tuple(outputs),
        make_task,
        encode_worker,
        _encode_report,
        models=(model,),
        jobs=jobs,
        **dataset.batch_settings(force),
        command="encode",
        checks=Checks(existing_sem, no_check),
        debug=debug_enabled(ctx),
    )
    run_batch(ctx, config, quiet)


def _check_encode_names(inputs: Sequence[str], output: str | None) -> None:
    """No generation loss or mislabelled file by accident: no .sem input, no image-named output."""
    for inp in inputs:
        if inp != STDIO and Path(inp).suffix.lower() == ".sem":
            raise click.UsageError(
                f"{inp!r} is a .sem file: decode it first (re-encoding it loses quality)"
            )
    if output not in (None, STDIO) and Path(output).suffix.lower() in SUFFIX_FORMATS:
        raise click.UsageError(
            f"encode writes .sem files, not {Path(output).suffix}: name the output '.sem'"
        )


def _settings(
    ctx: click.Context,
    quality: int | None,
    target_size: int | None,
    target_bpp: float | None,
    **settings: Any,
) -> tuple[EncodeOptions, Target | None]:
    """The flags as the library's options and target (the checks of every entry point); a bad
    combination is the library's one error line and exit 2."""
    from semcodec.encoder.roi_spec import RoiError

    try:
        target = Target.of(quality, target_size, target_bpp)
        return EncodeOptions.from_kwargs(quality=quality, **settings), target
    except ValueError as exc:  # an ROI's message names classes: the flag says where
        error(f"--roi: {exc}" if isinstance(exc, RoiError) else str(exc))
        ctx.exit(EXIT_USAGE)
        raise  # not reached: ctx.exit raises
