"""The Python API: ``encode``, ``decode``, ``decode_map`` (re-exported by ``semcodec``).

Encoding loads a model's Codec once per process (torch); decoding uses the torch-free parts of
the release a file names where they are installed, and reading the map needs no model at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from semcodec.defaults import DEFAULT_MODEL

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = ["decode", "decode_map", "decoder_of", "encode"]


def encode(
    image: Any,
    quality: int | None = None,
    model: str = DEFAULT_MODEL,
    *,
    target_size: int | None = None,
    target_bpp: float | None = None,
    **settings: Any,
) -> bytes:
    """Encode a PIL image (or RGB array, path, or encoded bytes) into .sem bytes.

    ``quality`` 0..100 (default 50), or instead ``target_size`` (bytes) or ``target_bpp``
    (bits per pixel): the highest quality whose file fits, as the command line's --target-size
    and --target-bpp (TargetNotMet, a SemcodecError naming the smallest file, when none does).
    Every other setting of the command line by keyword (``EncodeOptions.from_kwargs``, which
    refuses a bad one with a ValueError): ``effort`` (1..9) trades encoding time for bytes;
    ``residual``, ``chroma`` ("444", "420"), ``metadata`` ("all", "none", "icc,exif"),
    ``gating``, ``refine`` (steps); ``roi`` names the classes (CLASSES) whose pixels get the
    residual's bits: "car,pedestrian", with optional weights "car:2", a list of names or a dict
    name -> weight; ``roi_strength`` (0..4, default 1) how much the rest gives up (docs/roi.md).
    """
    from semcodec.encoder.codec import get_codec
    from semcodec.encoder.options import EncodeOptions
    from semcodec.encoder.ratecontrol import Target, encode_to

    target = Target.of(quality, target_size, target_bpp)
    options = EncodeOptions.from_kwargs(quality=quality, **settings)
    return encode_to(get_codec(model), image, options, target)[1]


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
