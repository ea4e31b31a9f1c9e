"""The Python API: ``encode``, ``decode``, ``decode_map`` (re-exported by ``semcodec``).

Encoding loads a model's Codec once per process (torch); decoding uses the torch-free parts of
the release a file names where they are installed, and reading the map needs no model at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from semcodec.defaults import DEFAULT_EFFORT, DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = ["decode", "decode_map", "decoder_of", "encode"]


def encode(
    image: Any,
    quality: int | None = None,
    model: str = DEFAULT_MODEL,
    residual: str = DEFAULT_RESIDUAL,
    roi: Any = None,
    roi_strength: float | None = None,
    effort: int = DEFAULT_EFFORT,
    target_size: int | None = None,
    target_bpp: float | None = None,
) -> bytes:
    """Encode a PIL image (or RGB array, path, or encoded bytes) into .sem bytes.

    ``quality`` 0..100 (default 50), or instead ``target_size`` (bytes) or ``target_bpp``
    (bits per pixel): the highest quality whose file fits, as the command line's --target-size
    and --target-bpp (TargetNotMet, a SemcodecError naming the smallest file, when none does).
    ``roi`` names the classes (CLASSES) whose pixels get the residual's bits: "car,pedestrian",
    with optional weights "car:2", a list of names or a dict name -> weight; ``roi_strength``
    (0..4, default 1) how much the rest gives up (docs/roi.md). RoiError on a bad name.
    ``effort`` (1..9) trades encoding time for bytes; decoding never depends on it.
    """
    from semcodec.encoder.codec import get_codec
    from semcodec.encoder.options import EncodeOptions
    from semcodec.encoder.ratecontrol import budget_of, fit_budget
    from semcodec.encoder.roi_spec import parse_roi

    targeted = target_size is not None or target_bpp is not None
    if targeted and quality is not None:
        raise ValueError("give quality or a target (target_size, target_bpp), not both")
    if target_size is not None and target_bpp is not None:
        raise ValueError("give target_size or target_bpp, not both")
    options = EncodeOptions(
        quality=DEFAULT_QUALITY if quality is None else quality,
        effort=effort,
        residual=residual,
        roi=parse_roi(roi, roi_strength),
    )
    codec = get_codec(model)
    if not targeted:
        return codec.encode(image, options)
    analysis = codec.analyse(image, options)  # the networks run once for every quality tried
    budget = budget_of(target_size, target_bpp, analysis.img.width, analysis.img.height)
    _quality, data = fit_budget(lambda q: codec.finish(analysis, options.but(quality=q))[0], budget)
    return data


def decode(data: bytes, layer: str = "full", model: str | None = None) -> Image.Image:
    """Decode .sem bytes into a PIL image (without torch where the file's release is installed)."""
    return decoder_of(data, model).decode(data, layer=layer).image


def decode_map(data: bytes, size: str = "full") -> np.ndarray:
    """The semantic map of .sem bytes as a uint8 numpy array of class ids (MAP_NAMES[id]:
    CLASSES, and UNKNOWN = 11 where a release's network was not sure).

    size="full" gives one id per pixel (nearest), "stored" the coded 1/8-size map. Only the
    header and the map layer are read: no model, no generator, no torch.
    """
    from semcodec.decoder.maplayer import decode_map as _decode_map

    return _decode_map(data, size)


def decoder_of(data: bytes, model: str | None = None) -> Any:
    """An object whose ``decode(data, layer=...)`` decodes this file.

    Without a model: the installed parts of the release the file names (no torch), or, for a
    bundle that has none (test bundles, weights given by path), the codec of its model name.
    With a model: that model's codec, which refuses files of other weights.
    """
    from semcodec.decoder.pipeline import decoder_for
    from semcodec.format import container

    if model is None:
        header = container.read_header(data)
        dec = decoder_for(header)
        if dec is not None:
            return dec
        model = header.model_name
    from semcodec.encoder.codec import get_codec

    return get_codec(model)
