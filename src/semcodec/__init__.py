"""semcodec: a learned semantic image codec (segmentation map + compact representation + generator + residual)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["encode", "decode", "__version__"]

# Registers the Pillow plugin (Image.open/save of .sem); it imports Pillow only, not torch.
from . import pil_plugin  # noqa: E402, F401
from .defaults import DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL  # noqa: E402


def encode(
    image,
    quality: int = DEFAULT_QUALITY,
    model: str = DEFAULT_MODEL,
    residual: str = DEFAULT_RESIDUAL,
) -> bytes:
    """Encode a PIL image (or RGB array, path, or encoded bytes) into .sem bytes."""
    from .codec import encode as _encode

    return _encode(image, quality=quality, model=model, residual=residual)


def decode(data: bytes, layer: str = "full", model: str | None = None):
    """Decode .sem bytes into a PIL image."""
    from .codec import decode as _decode

    return _decode(data, layer=layer, model=model)
