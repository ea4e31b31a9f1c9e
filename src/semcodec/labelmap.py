"""Semantic label maps as images: class indices (mode L) or the segmentation palette (mode P)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = ["label_image"]


def label_image(labels: np.ndarray, color: bool) -> Image.Image:
    """A label map as a PNG-ready image: class indices (mode L) or the palette colours (mode P)."""
    import numpy as np
    from PIL import Image

    from semcodec.format.classes import PALETTE

    arr = np.ascontiguousarray(labels, dtype=np.uint8)
    h, w = arr.shape
    if not color:
        return Image.frombytes("L", (w, h), arr.tobytes())
    img = Image.frombytes("P", (w, h), arr.tobytes())
    img.putpalette([c for rgb in PALETTE for c in rgb])
    return img
