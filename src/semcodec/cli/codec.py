"""The codec commands: encode, decode, info, models and doctor."""

from __future__ import annotations

import functools
import io
import json
import sys
import traceback
from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from semcodec.batch.outcome import Outcome, guarded
from semcodec.batch.plan import Checks, no_check
from semcodec.batch.run import BatchConfig, tile_progress
from semcodec.batch.stdio import display, read_input, stdin_bytes
from semcodec.batch.verify import Existing, check_image, check_sem, sem_layer_bytes
from semcodec.cli.batch import check_io_args, io_options, run_batch
from semcodec.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    STDIO,
    apply_options,
    debug_enabled,
    debug_option,
    describe_error,
    effort_option,
    error,
    import_torch,
    warning,
    with_name,
)
from semcodec.cli.dataset import DatasetOptions, dataset_options
from semcodec.defaults import DEFAULT_EFFORT, DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL
from semcodec.encoder.ratecontrol import bytes_for_bpp, search_quality
from semcodec.errors import SemcodecError
from semcodec.format import container
from semcodec.format.classes import CLASSES
from semcodec.format.info import bpp, file_info, format_info
from semcodec.format.metadata import KINDS as METADATA_KINDS
from semcodec.labelmap import label_image

# the residual coders' names, from the format's codes (no coder module imported at start-up)
BACKENDS = tuple(kind.label for kind in container.ResidualKind if kind != container.RESIDUAL_NONE)
DECODE_FORMATS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "png": ("PNG", ".png", {}),
    "bmp": ("BMP", ".bmp", {}),
    "tiff": ("TIFF", ".tiff", {"compression": "tiff_deflate"}),
    "webp": ("WEBP", ".webp", {"lossless": True}),
    "jpeg": ("JPEG", ".jpg", {"quality": 95}),
    "ppm": ("PPM", ".ppm", {}),
}
_SUFFIX_FORMATS = {
    ".png": "png",
    ".bmp": "bmp",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".webp": "webp",
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".ppm": "ppm",
    ".pgm": "ppm",
    ".pnm": "ppm",
}


def _in_out_form(
    inputs: tuple[str, ...],
    output: str | None,
    output_dir: Path | None,
    out_suffixes: Container[str],
) -> tuple[tuple[str, ...], str | None]:
    """avifenc/cjxl's ``IN OUT``: two arguments, the last named in the other side's format."""
    if len(inputs) != 2 or output is not None or output_dir is not None:
        return inputs, output
    src, dst = inputs
    if Path(dst).suffix.lower() in out_suffixes and Path(src).suffix.lower() not in out_suffixes:
        return (src,), dst
    return inputs, output


_LAYER_SHORT = {
    "semantic_map": "map",
    "compact": "compact",
    "residual": "residual",
    "alpha": "alpha",
}


@click.command()
def doctor() -> None:
    """Print versions, CPU, instruction set, the bf16 decision and threads (for bug reports)."""
    import_torch()
    from semcodec import runtime

    for key, value in runtime.diagnostics().items():
        click.echo(f"{key}: {value}")


# ----- encode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _EncodeTask:
    """One input to encode, with the settings; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str
    quality: int | None
    residual: str | None
    target_size: int | None
    target_bpp: float | None
    refine_steps: int = 0
    metadata: frozenset[str] = frozenset(METADATA_KINDS)
    effort: int = DEFAULT_EFFORT
    gating: bool = True
    roi: Any = None  # a roi.RoiConfig, or None


def _encode_options(task: _EncodeTask) -> Any:
    """The task's EncodeOptions (quality: the fixed one, else the default)."""
    from semcodec.encoder.gating import GatingConfig
    from semcodec.encoder.options import EncodeOptions
    from semcodec.encoder.refine import RefineConfig

    return EncodeOptions(
        quality=DEFAULT_QUALITY if task.quality is None else task.quality,
        effort=task.effort,
        residual=task.residual or DEFAULT_RESIDUAL,
        gating=GatingConfig(enabled=task.gating),
        roi=task.roi,
        refine=RefineConfig(steps=task.refine_steps) if task.refine_steps else None,
        metadata=task.metadata,
    )


def _encode_work(task: _EncodeTask) -> Outcome:
    """Load, encode (searching quality for a size target) and describe one image."""
    progress = tile_progress()
    if progress is not None:  # torch's import and the model take most of a small encode
        progress("loading the model", 0, 0)
    import_torch()
    from semcodec.encoder.codec import get_codec
    from semcodec.imageio import load_image

    codec = get_codec(task.model)  # shared by the process's tasks: the options go with each call
    options = _encode_options(task)
    image = load_image(task.data if task.source == STDIO else task.source, codec.limits)
    stats_by_quality = {}
    # networks run once, however many qualities are tried
    analysis = codec.analyse(image, options, progress)

    def encode(quality: int) -> bytes:
        """One encode, keeping its per-layer stats for the report."""
        data, stats = codec.finish(analysis, options.but(quality=quality), progress)
        stats_by_quality[quality] = stats
        return data

    warnings = list(image.warnings)
    targeted = task.target_size is not None or task.target_bpp is not None
    if targeted:
        budget = (
            task.target_size
            if task.target_size is not None
            else bytes_for_bpp(task.target_bpp or 0.0, image.width, image.height)
        )
        quality, data, met = search_quality(encode, budget)
        if not met:  # a script trusts the exit code: no file over its budget, and exit 1
            raise SemcodecError(
                f"target of {budget} bytes cannot be met: the smallest file is {len(data)} "
                f"bytes (quality {quality}); nothing written"
            )
    else:
        quality = options.quality
        data = encode(quality)
    info = {
        "width": image.width,
        "height": image.height,
        "quality": quality,
        "targeted": targeted,
        "layers": dict(stats_by_quality[quality].layer_bytes),
    }
    return Outcome(True, data, info=info, warnings=warnings)


def _encode_worker(task: _EncodeTask) -> Outcome:
    """Picklable entry point for one encode."""
    return guarded(_encode_work, task)


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


def _metadata_kinds(_ctx: click.Context, _param: click.Parameter, value: str) -> frozenset[str]:
    """--metadata all|none|icc,exif,xmp → the kinds to keep (usage error otherwise)."""
    from semcodec.format.metadata import parse_selection

    try:
        return parse_selection(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


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
    type=click.IntRange(0, 1000),
    default=0,
    show_default=True,
    metavar="N",
    help="Encoder-side refinement of the compact layer (gradient steps, each about 2 s per "
    "megapixel on one core): better base layer for -q 0, no gain with a residual.",
)
@effort_option
@click.option(
    "--metadata",
    "metadata",
    default="all",
    show_default=True,
    metavar="KINDS",
    callback=_metadata_kinds,
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
    metadata: frozenset[str],
    gating: bool,
    roi_spec: str | None,
    roi_strength: float | None,
    jobs: int,
    force: bool,
    quiet: bool,
    dataset: DatasetOptions,
) -> None:
    """Encode images to .sem (default output: IN with suffix .sem; '-' is stdin/stdout)."""
    roi_config = _roi_config(ctx, roi_spec, roi_strength)
    if target_bpp is not None and target_size is not None:
        raise click.UsageError("--target-bpp and --target-size cannot be used together")
    if quality is not None and (target_bpp is not None or target_size is not None):
        raise click.UsageError("-q cannot be combined with --target-bpp/--target-size")
    inputs, output = _in_out_form(inputs, output, output_dir, {".sem"})
    inputs = tuple(dataset.inputs(inputs))
    check_io_args(inputs, output, output_dir)
    _check_encode_names(inputs, output)
    if roi_config is not None and quality == 0:
        warning("--roi has no effect at -q 0 (no residual to steer); encoding without it")
    dataset.check(output)
    outputs = dataset.outputs(inputs, output, output_dir, ".sem")

    def make_task(inp: str, stdin_data: bytes | None) -> _EncodeTask:
        """Bundle one input with the settings for a worker."""
        return _EncodeTask(
            inp,
            stdin_data if inp == STDIO else None,
            model,
            quality,
            residual,
            target_size,
            target_bpp,
            refine_steps,
            metadata,
            effort,
            gating,
            roi_config,
        )

    config = BatchConfig(
        tuple(inputs),
        tuple(outputs),
        make_task,
        _encode_worker,
        _encode_report,
        models=(model,),
        rules=dataset.rules(force),
        jobs=jobs,
        cluster=dataset.cluster,
        report=dataset.report,
        command="encode",
        checks=Checks(_existing_sem, no_check),
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
    if output not in (None, STDIO) and Path(output).suffix.lower() in _SUFFIX_FORMATS:
        raise click.UsageError(
            f"encode writes .sem files, not {Path(output).suffix}: name the output '.sem'"
        )


def _roi_config(ctx: click.Context, spec: str | None, strength: float | None) -> Any:
    """--roi and --roi-strength as a RoiConfig; a bad one is one error line and exit 2."""
    from semcodec.encoder.roi_spec import RoiError, parse_roi

    if spec is None and strength is not None:
        error("--roi-strength needs --roi")
        ctx.exit(EXIT_USAGE)
    try:
        return parse_roi(spec, strength)
    except RoiError as exc:
        error(f"--roi: {exc}")
        ctx.exit(EXIT_USAGE)


# ----- decode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _DecodeTask:
    """One .sem file to decode; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str | None
    layer: str
    fmt: str
    segmentation: bool
    color: bool = False  # maps as palette images instead of class ids
    map_size: str = "full"  # --layer map: "full" (image size) or "stored" (1/8)


def png_bytes(img: Any, fmt: str = "png", meta: Any = None) -> bytes:
    """Encode a Pillow image in one of DECODE_FORMATS, with the file's metadata if given."""
    from semcodec.format.metadata import save_params

    pil_format, _suffix, options = DECODE_FORMATS[fmt]
    extra = save_params(meta, pil_format) if meta else {}
    buf = io.BytesIO()
    img.save(buf, format=pil_format, **{**options, **extra})
    return buf.getvalue()


def _decode_work(task: _DecodeTask) -> Outcome:
    """Decode one .sem file to image bytes (and optionally its segmentation map)."""
    data = read_input(task.source, task.data)
    if task.layer == "map":
        return _map_work(data, task)
    from semcodec.api import decoder_of

    result = decoder_of(data, task.model).decode(data, layer=task.layer, progress=tile_progress())
    image = result.image
    out = png_bytes(image, task.fmt, result.metadata)
    extra = None
    if task.segmentation:
        from semcodec.decoder.maplayer import full_size_map

        extra = png_bytes(
            label_image(full_size_map(result.semantic_map, result.header), task.color)
        )
    info = {"width": image.width, "height": image.height, "mode": image.mode, "layer": task.layer}
    info["layers"] = sem_layer_bytes(data)
    from semcodec.format.gating import NONE

    warnings = []
    if task.layer == "base" and result.modes is not None and (result.modes == NONE).all():
        warnings.append(
            "the file has no base layer (no tile uses the compact layer): wrote the flat "
            "prediction the residual was coded against"
        )
    return Outcome(True, out, extra=extra, info=info, warnings=warnings)


def _map_work(data: bytes, task: _DecodeTask) -> Outcome:
    """--layer map: the class ids (or palette) from the header and map layer alone."""
    from semcodec.decoder.maplayer import full_size_map, read_map

    header, labels = read_map(data)
    if task.map_size == "full":
        labels = full_size_map(labels, header)
    out = png_bytes(label_image(labels, task.color))
    h, w = labels.shape
    info = {"width": w, "height": h, "mode": "P" if task.color else "L", "layer": "map"}
    info["layers"] = sem_layer_bytes(data)
    return Outcome(True, out, info=info)


def _existing_sem(_inp: str, out: str) -> Existing:
    """--skip-existing: an existing .sem output counts only if its header and every CRC check."""
    return check_sem(out)


def _existing_image(pil_format: str, inp: str | None, out: str) -> Existing:
    """--skip-existing: an existing image counts only if it decodes in full; the report's
    layers are those of the .sem it came from."""
    found = check_image(out, pil_format)
    if inp is None or inp == STDIO:
        return found
    try:
        layers = sem_layer_bytes(Path(inp).read_bytes())
    except (OSError, ValueError):  # the input is only described here, not needed
        layers = {}
    return Existing(found.bytes, found.width, found.height, layers)


def _decode_worker(task: _DecodeTask) -> Outcome:
    """Picklable entry point for one decode."""
    return guarded(_decode_work, task)


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
        if suffix not in _SUFFIX_FORMATS:
            raise click.UsageError(
                f"cannot tell the output format from {suffix or 'no extension'!r}; use --format"
            )
        return _SUFFIX_FORMATS[suffix]
    return "png"


# a layer's default output never takes the picture's name: NAME.map.png, NAME.base.png
_LAYER_SUFFIX = {"map": ".map", "base": ".base"}


@click.command()
@click.argument("inputs", nargs=-1, metavar="IN...")
@click.option(
    "--layer",
    type=click.Choice(["full", "base", "map"]),
    default="full",
    show_default=True,
    help="base: the generator's reconstruction only (map + compact layers), no residual; "
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
    """Decode .sem files to images (default output: IN with suffix .png; '-' is stdin/stdout)."""
    inputs, output = _in_out_form(inputs, output, output_dir, _SUFFIX_FORMATS)
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
    suffix = _LAYER_SUFFIX.get(layer, "") + DECODE_FORMATS[fmt][1]
    outputs = dataset.outputs(inputs, output, output_dir, suffix)

    def make_task(inp: str, stdin_data: bytes | None) -> _DecodeTask:
        """Bundle one input with the settings for a worker."""
        return _DecodeTask(
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
        functools.partial(_existing_image, DECODE_FORMATS[fmt][0]),
        functools.partial(_existing_image, "PNG", None),
    )
    config = BatchConfig(
        tuple(inputs),
        tuple(outputs),
        make_task,
        _decode_worker,
        _decode_report,
        models=(model,) if model else (),
        rules=dataset.rules(force),
        jobs=jobs,
        cluster=dataset.cluster,
        extra_out=segmentation,
        report=dataset.report,
        command="decode",
        checks=checks,
        debug=debug_enabled(ctx),
    )
    run_batch(ctx, config, quiet)


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON on stdout: an object for one file, a list for several.",
)
@debug_option
@click.pass_context
def info(ctx: click.Context, files: tuple[str, ...], as_json: bool) -> None:
    """Validate .sem files and show size, dimensions, model, quality and bytes/bpp per layer."""
    if STDIO in files and len(files) > 1:
        raise click.UsageError("'-' (stdin) must be the only input")
    stdin_data = stdin_bytes() if STDIO in files else None
    results, failed = [], 0
    for f in files:
        name = display(f, "<stdin>")
        try:
            d = {"file": name, **file_info(read_input(f, stdin_data))}
        except Exception as exc:  # noqa: BLE001 - reported per file
            failed += 1
            if debug_enabled(ctx):
                traceback.print_exc(file=sys.stderr)
            reason = describe_error(exc)
            error(with_name(name, reason))
            results.append({"file": name, "error": reason})  # one object per input
            continue
        results.append(d)
        if not as_json:
            click.echo(format_info(name, d))
    if as_json:
        click.echo(json.dumps(results[0] if len(files) == 1 else results, indent=2))
    if failed:
        if len(files) > 1:
            error(f"{failed} of {len(files)} files failed")
        ctx.exit(EXIT_FAILURE)


# ----- models ------------------------------------------------------------------------------------
@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="JSON list on stdout.")
@debug_option
def models_command(as_json: bool) -> None:
    """List the registered model bundles, and the releases whose files this installation decodes."""
    from semcodec.decoder import parts
    from semcodec.zoo import registry

    rows = []
    for name, spec in sorted(registry.REGISTRY.items()):
        row: dict[str, Any] = {"name": name, "hash": None, "bytes": None, "weights": spec.weights}
        if spec.weights is None:
            row["source"] = f"random init (seed {spec.seed}; hash on load)"
        else:
            try:
                path = registry.weights_dir() / spec.weights
                digest = registry.weights_hash(path)
            except (OSError, ModuleNotFoundError, TypeError, ValueError):
                row["source"] = "missing"
            else:
                row.update(hash=digest, bytes=path.stat().st_size, source=spec.weights)
        rows.append(row)
    releases = [
        {"release": f"{m['name']}-{m['hash'][:8]}", "hash": m["hash"], "date": m["released"]}
        for m in parts.installed_release_meta()
    ]
    if as_json:
        click.echo(json.dumps({"models": rows, "decodes": releases}, indent=2))
        return
    for r in rows:
        size = "-" if r["bytes"] is None else f"{r['bytes']} bytes"
        click.echo(f"{r['name']:<16} {r['hash'] or '-':<16}  {size:>16}  {r['source']}")
    if releases:
        click.echo(
            "decodes files of: " + ", ".join(f"{r['release']} ({r['date']})" for r in releases)
        )
