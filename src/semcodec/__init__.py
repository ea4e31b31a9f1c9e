"""semcodec: a learned semantic image codec (segmentation map + compact representation + generator + residual)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["CLASSES", "MAP_NAMES", "UNKNOWN", "encode", "decode", "decode_map", "__version__"]

# Registers the Pillow plugin (Image.open/save of .sem); it imports Pillow only, not torch.
from semcodec import pil_plugin  # noqa: E402, F401
from semcodec.defaults import DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL  # noqa: E402
from semcodec.format.classes import CLASSES, MAP_NAMES, UNKNOWN  # noqa: E402


def encode(
    image,
    quality: int = DEFAULT_QUALITY,
    model: str = DEFAULT_MODEL,
    residual: str = DEFAULT_RESIDUAL,
    roi=None,
    roi_strength: float | None = None,
) -> bytes:
    """Encode a PIL image (or RGB array, path, or encoded bytes) into .sem bytes.

    ``roi`` names the classes (CLASSES) whose pixels get the residual's bits: "car,pedestrian",
    with optional weights "car:2", a list of names or a dict name -> weight; ``roi_strength``
    (0..4, default 1) how much the rest gives up (docs/roi.md). RoiError on a bad name.
    """
    from semcodec.encoder.codec import encode as _encode
    from semcodec.encoder.roi_spec import parse_roi

    roi_config = parse_roi(roi, roi_strength)
    return _encode(image, quality=quality, model=model, residual=residual, roi_config=roi_config)


def decode(data: bytes, layer: str = "full", model: str | None = None):
    """Decode .sem bytes into a PIL image (without torch where the file's release is installed)."""
    from semcodec.api import decoder_of

    return decoder_of(data, model).decode(data, layer=layer).image


def decode_map(data: bytes, size: str = "full"):
    """The semantic map of .sem bytes as a uint8 numpy array of class ids (MAP_NAMES[id]:
    CLASSES, and UNKNOWN = 11 where a release's network was not sure).

    size="full" gives one id per pixel (nearest), "stored" the coded 1/8-size map. Only the
    header and the map layer are read: no model, no generator, no torch.
    """
    from semcodec.decoder.maplayer import decode_map as _decode_map

    return _decode_map(data, size)
