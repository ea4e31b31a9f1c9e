"""Semantic regions of interest: the map decides where the residual's bits go.

Why: every file already carries the semantic map, so a user can name the classes that matter
(encoder/roi_spec.py: 'car,pedestrian') and the encoder spends the bytes there. Both means are
encoder-only (the decoder needs nothing beyond the file, and decodes ROI files as any other):

* a **rate guide** for libaom's all-intra delta-q (``deltaq-mode=3`` with
  ``enable-rate-guide-deltaq``): per 16-pixel block, a rate that is ``GUIDE_BASE ** weight``
  inside the ROI and 1 outside, so AV1 lowers the quantiser on the ROI and raises it elsewhere;
* a **pre-filter** of the background: a Gaussian blur of ``SIGMA_PER_STRENGTH * strength``
  pixels outside the ROI, blended in across the ROI's border, which removes the fine texture the
  residual coder would otherwise spend bits on.

The ROI is the map's blocks of the named classes grown by ``margin`` blocks (the map is 1/8 of
the image and object edges matter). Which means and what defaults: docs/roi.md, measured on
CamVid train/val. The ROI layer that records the request is format/roi.py.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

from semcodec.format.classes import CLASSES
from semcodec.format.roi import RoiConfig, encode_roi, grow
from semcodec.format.tiling import MAP_SCALE

# the layer's data, named here too so the encoder reads its ROI from one module
__all__ = [
    "RoiConfig",
    "encode_roi",
    "block_weights",
    "prefilter",
    "rate_guide",
]

GUIDE_BASE = 100.0  # rate-guide ratio of an ROI block of weight 1 to a background block
GUIDE_BLOCK = 16  # libaom's rate-distribution block side


# ----- where the ROI is ---------------------------------------------------------------------
def block_weights(labels: np.ndarray, cfg: RoiConfig) -> np.ndarray:
    """Per map block, the ROI weight (0 = background), the margin included."""
    lut = np.zeros(max(len(CLASSES), int(labels.max(initial=0)) + 1), np.float64)
    for cid, w in cfg.weights.items():
        lut[cid] = w
    return grow(lut[labels], cfg.margin)


def rate_guide(weights: np.ndarray, height: int, width: int) -> np.ndarray:
    """libaom's rate distribution per 16-pixel block of a height x width frame."""
    rows, cols = -(-height // GUIDE_BLOCK), -(-width // GUIDE_BLOCK)
    per = GUIDE_BLOCK // MAP_SCALE  # map blocks per guide block side
    grid = np.zeros((rows * per, cols * per))
    mh, mw = min(weights.shape[0], rows * per), min(weights.shape[1], cols * per)
    grid[:mh, :mw] = weights[:mh, :mw]
    peak = grid.reshape(rows, per, cols, per).max(axis=(1, 3))
    return np.where(peak > 0, GUIDE_BASE**peak, 1.0)


def _alpha(weights: np.ndarray, height: int, width: int) -> np.ndarray:
    """Per pixel, 1 inside the ROI and 0 in the background, ramped over one block at borders."""
    inside = (weights > 0).astype(np.float32)
    mh, mw = inside.shape
    up = Image.fromarray(inside, "F").resize(
        (mw * MAP_SCALE, mh * MAP_SCALE), Image.Resampling.BILINEAR
    )
    return np.asarray(up, np.float32)[:height, :width]


def prefilter(rgb: np.ndarray, weights: np.ndarray, sigma: float) -> np.ndarray:
    """The image with its background blurred by ``sigma`` pixels (uint8, same shape)."""
    if sigma <= 0 or (weights > 0).all():
        return rgb
    h, w = rgb.shape[:2]
    blurred = np.asarray(Image.fromarray(rgb, "RGB").filter(ImageFilter.GaussianBlur(sigma)))
    a = _alpha(weights, h, w)[..., None]
    out = a * rgb.astype(np.float32) + (1.0 - a) * blurred.astype(np.float32)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)
