"""What one file's encode, decode or segment does in a worker, and whether an existing output counts
(picklable tasks and their entry points, run by the batch engine; no click)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from semcodec.batch.formats import png_bytes
from semcodec.batch.outcome import Outcome, guarded
from semcodec.batch.run import tile_progress
from semcodec.batch.stdio import STDIO, read_input
from semcodec.batch.verify import Existing, check_image, check_sem, sem_layer_bytes
from semcodec.batch.workers import import_torch
from semcodec.encoder.options import EncodeOptions
from semcodec.encoder.ratecontrol import Target, encode_to
from semcodec.errors import UnsupportedInput
from semcodec.labelmap import label_image


def image_source(source: str, data: bytes | None) -> str | bytes:
    """What ``load_image`` reads: the path, or stdin's bytes (an empty stdin said as such)."""
    if source != STDIO:
        return source
    if not data:
        raise UnsupportedInput("empty input (nothing was read from stdin)")
    return data


# ----- encode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EncodeTask:
    """One input to encode, with its checked settings; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str
    options: EncodeOptions = field(default_factory=EncodeOptions)  # EncodeOptions.from_kwargs
    target: Target | None = None  # a size budget instead of options.quality (Target.of)


def encode_work(task: EncodeTask) -> Outcome:
    """Load, encode (searching quality for a size target) and describe one image."""
    progress = tile_progress()
    if progress is not None:  # torch's import and the model take most of a small encode
        progress("loading the model", 0, 0)
    import_torch()
    from semcodec.encoder.codec import get_codec
    from semcodec.imageio import load_image

    codec = get_codec(task.model)  # shared by the process's tasks: the options go with each call
    image = load_image(image_source(task.source, task.data), codec.limits)
    quality, data, stats = encode_to(codec, image, task.options, task.target, progress)
    info = {
        "width": image.width,
        "height": image.height,
        "quality": quality,
        "targeted": task.target is not None,
        "layers": dict(stats.layer_bytes),
    }
    return Outcome(True, data, info=info, warnings=list(image.warnings))


def encode_worker(task: EncodeTask) -> Outcome:
    """Picklable entry point for one encode."""
    return guarded(encode_work, task)


def existing_sem(_inp: str, out: str) -> Existing:
    """--skip-existing: an existing .sem output counts only if its header and every CRC check."""
    return check_sem(out)


# ----- decode ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodeTask:
    """One .sem file to decode; picklable for worker processes."""

    source: str
    data: bytes | None
    model: str | None
    layer: str
    fmt: str
    segmentation: bool
    color: bool = False  # maps as palette images instead of class ids
    map_size: str = "full"  # --layer map: "full" (image size) or "stored" (1/8)


def decode_work(task: DecodeTask) -> Outcome:
    """Decode one .sem file to image bytes (and optionally its segmentation map)."""
    data = read_input(task.source, task.data)
    if task.layer == "map":
        return map_work(data, task)
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


def map_work(data: bytes, task: DecodeTask) -> Outcome:
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


def existing_image(pil_format: str, inp: str | None, out: str) -> Existing:
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


def decode_worker(task: DecodeTask) -> Outcome:
    """Picklable entry point for one decode."""
    return guarded(decode_work, task)


# ----- segment -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SegmentTask:
    """One image whose semantic map is wanted, without encoding it; picklable for workers."""

    source: str
    data: bytes | None
    model: str
    color: bool = False  # palette colours instead of class ids


def segment_work(task: SegmentTask) -> Outcome:
    """The full-resolution map of one image, as a PNG of class ids (or palette colours)."""
    progress = tile_progress()
    if progress is not None:
        progress("loading the model", 0, 0)
    import_torch()
    from semcodec.encoder.codec import get_codec
    from semcodec.encoder.segment import full_resolution_labels
    from semcodec.imageio import load_image

    codec = get_codec(task.model)  # shared by the process's tasks (a -j or cluster worker's)
    image = load_image(image_source(task.source, task.data), codec.limits)
    labels = full_resolution_labels(codec.bundle.seg, image.rgb, bf16=False)
    h, w = labels.shape
    info = {"width": w, "height": h, "mode": "P" if task.color else "L", "layer": "map"}
    out = png_bytes(label_image(labels, task.color))
    return Outcome(True, out, info=info, warnings=list(image.warnings))


def segment_worker(task: SegmentTask) -> Outcome:
    """Picklable entry point for one segmentation."""
    return guarded(segment_work, task)


def existing_map(_inp: str, out: str) -> Existing:
    """--skip-existing: an existing map counts only if it is a PNG that decodes in full."""
    return check_image(out, "PNG")
