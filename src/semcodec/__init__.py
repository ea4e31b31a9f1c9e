"""semcodec: a learned semantic image codec (segmentation map + compact representation + generator + residual)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["CLASSES", "MAP_NAMES", "UNKNOWN", "encode", "decode", "decode_map", "__version__"]

# Registers the Pillow plugin (Image.open/save of .sem); it imports Pillow only, not torch.
from semcodec import pil_plugin  # noqa: E402, F401
from semcodec.api import decode, decode_map, encode  # noqa: E402
from semcodec.format.classes import CLASSES, MAP_NAMES, UNKNOWN  # noqa: E402
