"""Per-tile prediction, the decoder's arithmetic (docs/format.md §10): our extension of A4–A6.

The residual layer codes x − prediction. The gating layer (format/gating.py) gives each tile of
``tile_blocks`` map blocks one of three predictions: the generator's reconstruction (GEN), the
bilinear base alone (BASE), or none (NONE: flat FLAT). Compact symbols are coded only in the
blocks ``used_blocks`` names; the others are filled with the middle level (a grey base, as mode
'none' predicts). Predictions are blended across tile borders with integer weights (a box
filter of the per-mode indicator), so the residual has no step at a mode border and decoding
stays bit-exact. Everything here is integers and numpy: a second decoder reimplements exactly
this; how the encoder chooses the modes is encoder/gating.py.
"""

from __future__ import annotations

import numpy as np

from semcodec.format.gating import BASE, GEN, NONE, GatingPlan
from semcodec.format.tiling import MULTIPLE
from semcodec.intgrid.generator import RGB, integer_base, to_pixels
from semcodec.intgrid.ops import round_div

__all__ = [
    "BASE",
    "FLAT",
    "GEN",
    "NONE",
    "as_picture",
    "base_pixels",
    "blend",
    "block_modes",
    "fill_symbols",
    "tile_shape",
    "used_blocks",
    "used_by",
]

FLAT = 128  # the 'none' prediction


def tile_shape(mh: int, mw: int, tile_blocks: int) -> tuple[int, int]:
    """Tiles covering a map of mh x mw blocks (the last row and column may be partial)."""
    return -(-mh // tile_blocks), -(-mw // tile_blocks)


def block_modes(modes: np.ndarray, mh: int, mw: int, tile_blocks: int) -> np.ndarray:
    """Each map block's mode (mh, mw)."""
    up = np.repeat(np.repeat(modes, tile_blocks, 0), tile_blocks, 1)
    return up[:mh, :mw]


def used_blocks(
    modes: np.ndarray, mh: int, mw: int, tile_blocks: int, all_symbols: bool = False
) -> np.ndarray:
    """The map blocks whose compact symbols are coded: those of tiles that use the base, or
    every block (the layer's flag: where the generator runs, it sees the true symbols)."""
    if all_symbols:
        return np.ones((mh, mw), bool)
    return block_modes(modes, mh, mw, tile_blocks) != NONE


def used_by(plan: GatingPlan, mh: int, mw: int) -> np.ndarray:
    """The map blocks whose compact symbols a file with this plan codes (mh, mw)."""
    return used_blocks(plan.modes, mh, mw, plan.tile_blocks, plan.all_symbols)


def fill_symbols(symbols: np.ndarray, used: np.ndarray, levels: int) -> np.ndarray:
    """Symbols of unused blocks set to the middle level (a grey base), the same on both ends."""
    return np.where(used[None], symbols, levels // 2).astype(np.int64)


def base_pixels(symbols: np.ndarray, levels: int, crop: tuple[int, int]) -> np.ndarray:
    """Mode 'base': the 8x bilinear base alone as uint8 (h, w, 3), in integers."""
    u = integer_base(symbols[:RGB], levels)
    px = to_pixels(u, np.zeros_like(u), levels).transpose(1, 2, 0)
    return np.ascontiguousarray(px[: crop[0], : crop[1]])


def _box(a: np.ndarray, r: int) -> np.ndarray:
    """Sum over a (2r+1)² window of an int64 (H, W) array, edges replicated (exact)."""
    if r == 0:
        return a.copy()
    p = np.pad(a, r, mode="edge")
    c = np.cumsum(np.pad(p, ((1, 0), (0, 0))), 0)
    rows = c[2 * r + 1 :] - c[: -2 * r - 1]
    c = np.cumsum(np.pad(rows, ((0, 0), (1, 0))), 1)
    return c[:, 2 * r + 1 :] - c[:, : -2 * r - 1]


def as_picture(prediction: np.ndarray | int, crop: tuple[int, int]) -> np.ndarray:
    """uint8 (h, w, 3): a prediction that may be one value everywhere (``blend``'s scalar)."""
    if np.isscalar(prediction):
        return np.full((*crop, 3), prediction, np.uint8)
    return prediction


def blend(
    predictions: dict[int, np.ndarray | int],
    modes: np.ndarray,
    crop: tuple[int, int],
    tile_blocks: int,
    radius: int,
    scalar: bool = False,
) -> np.ndarray | int:
    """The prediction the residual is coded against, uint8 (h, w, 3) (``scalar``: the value
    itself where one mode's one value covers the picture, so no picture of it is made).

    Per pixel, each mode's weight is the number of pixels of its tiles in the (2r+1)² window
    around it; the prediction is the weighted mean rounded half to even, in integers. Inside a
    tile farther than r from other modes it is that tile's own prediction.
    """
    h, w = crop
    side = tile_blocks * MULTIPLE
    px = np.repeat(np.repeat(modes, side, 0), side, 1)[:h, :w]
    present = [int(m) for m in np.unique(modes)]
    if len(present) == 1:
        p = predictions[present[0]]
        return int(p) if scalar and np.isscalar(p) else as_picture(p, crop)
    total = (2 * radius + 1) ** 2
    acc = np.zeros((h, w, 3), np.int64)
    for m in present:
        wgt = _box((px == m).astype(np.int64), radius)
        p = predictions[m]
        acc += wgt[..., None] * (np.int64(p) if np.isscalar(p) else p.astype(np.int64))
    return round_div(acc, total).astype(np.uint8)
