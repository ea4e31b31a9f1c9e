"""The alpha layer: the input's transparency, lossless, as a PNG (flat masks compress well)."""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image

from semcodec.errors import CorruptData
from semcodec.format.container import Limits, pil_pixel_limit


def encode_alpha(alpha: np.ndarray) -> bytes:
    """(H, W) uint8 alpha plane → PNG bytes."""
    buf = io.BytesIO()
    Image.fromarray(alpha, "L").save(buf, "PNG", optimize=True)
    return buf.getvalue()


def decode_alpha(data: bytes, width: int, height: int, limits: Limits = Limits()) -> np.ndarray:
    """Decode and check the alpha layer; its declared size is checked before any pixel."""
    try:
        with pil_pixel_limit(limits), warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=["PNG"]) as im:
                if im.size != (width, height) or im.mode != "L":
                    raise CorruptData("alpha layer has the wrong size or mode")
                return np.asarray(im.convert("L"))
    except CorruptData:
        raise
    except Exception as exc:  # noqa: BLE001 - any PIL failure on this payload is corruption
        raise CorruptData(f"alpha layer: {exc}") from None
