"""The image formats a decode writes: their names, suffixes and Pillow settings (no click)."""

from __future__ import annotations

import io
from typing import Any

DECODE_FORMATS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "png": ("PNG", ".png", {}),
    "bmp": ("BMP", ".bmp", {}),
    "tiff": ("TIFF", ".tiff", {"compression": "tiff_deflate"}),
    "webp": ("WEBP", ".webp", {"lossless": True}),
    "jpeg": ("JPEG", ".jpg", {"quality": 95}),
    "ppm": ("PPM", ".ppm", {}),
}
SUFFIX_FORMATS = {
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


def png_bytes(img: Any, fmt: str = "png", meta: Any = None) -> bytes:
    """Encode a Pillow image in one of DECODE_FORMATS, with the file's metadata if given."""
    from semcodec.format.metadata import save_params

    pil_format, _suffix, options = DECODE_FORMATS[fmt]
    extra = save_params(meta, pil_format) if meta else {}
    buf = io.BytesIO()
    img.save(buf, format=pil_format, **{**options, **extra})
    return buf.getvalue()
