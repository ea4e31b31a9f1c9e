"""Per-tile prediction, the encoder's choice: which tiles take which prediction (A4–A6).

Where the generator predicts badly (straight-edged structure, fine texture), coding the image
itself is cheaper, and where the base is not used its compact symbols need not be sent. The
encoder picks per tile one of three predictions (the generator's reconstruction, the bilinear
base alone, or none) with a rate proxy calibrated against the residual coder, then checks the
pick with the real coder. What a decoder computes from the choice (tile geometry, used blocks,
fill, base pixels, the blend) is decoder/prediction.py, which the encoder calls directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semcodec.decoder.prediction import tile_shape
from semcodec.format.gating import BASE, GEN, NONE
from semcodec.format.tiling import MULTIPLE

__all__ = [
    "GatingConfig",
    "choose_modes",
    "compact_tile_bits",
    "scale_for",
    "step_for",
    "tile_bits",
]

TILE_BLOCKS = 8  # tile side in map blocks: 64 pixels
BLEND_RADIUS = 4  # pixels: the box filter is 2r+1 wide


@dataclass(frozen=True)
class GatingConfig:
    """The encoder's gating choices (files record tile size and radius; decoders follow)."""

    enabled: bool = True
    tile_blocks: int = TILE_BLOCKS
    radius: int = BLEND_RADIUS
    modes: tuple[int, ...] = (GEN, BASE, NONE)  # the modes the chooser may use


# ----- the encoder's choice -------------------------------------------------------------------
_DCT8 = np.array(
    [
        [np.sqrt((1 if k == 0 else 2) / 8) * np.cos((2 * n + 1) * k * np.pi / 16) for n in range(8)]
        for k in range(8)
    ]
)
_DCT2 = np.kron(_DCT8, _DCT8)  # (k, l) x (i, j): the separable 2-D DCT on row-major blocks
_YUV = np.array([[0.299, 0.587, 0.114], [-0.169, -0.331, 0.5], [0.5, -0.419, -0.081]])
_YUV32, _DCT2_32 = _YUV.astype(np.float32), _DCT2.astype(np.float32)


# Calibration against the AVIF residual coder (libaom speed 6, 4:4:4) on 5 BSDS500 training
# photos, the images themselves and the default generator's residuals, at qualities 10-85
# (``semcodec train calibrate-gating``): the step at which the proxy's total bits equal the
# coded bits, then per kind the coded / proxy ratio (AV1's intra prediction makes images
# cheaper, and smooth residuals dearer, than a plain DCT estimate says).
_CAL_Q = (1, 10, 25, 40, 55, 70, 85, 100)
_CAL_STEP = (60.0, 44.9, 23.7, 10.8, 4.89, 2.21, 1.17, 0.4)
_CAL_IMAGE = (0.89, 0.89, 0.867, 0.874, 0.906, 0.94, 0.973, 1.0)  # mode 'none'
_CAL_PREDICTED = (1.27, 1.27, 1.25, 1.18, 1.11, 1.055, 1.027, 1.0)  # modes 'generator', 'base'


def step_for(quality: int) -> float:
    """The 8x8 DCT quantiser step the rate proxy assumes at an AVIF residual quality."""
    q = min(max(int(quality), 1), 100)
    return float(np.interp(q, _CAL_Q, _CAL_STEP))


def scale_for(quality: int, mode: int) -> float:
    """Coded bits per proxy bit of one mode's residual at a quality."""
    q = min(max(int(quality), 1), 100)
    return float(np.interp(q, _CAL_Q, _CAL_IMAGE if mode == NONE else _CAL_PREDICTED))


def tile_bits(residual: np.ndarray, step: float, tile: int) -> np.ndarray:
    """Proxy bits per tile (th, tw) of coding a residual (h, w, 3) int: 8x8 DCT in YCbCr,
    log2(1 + (c/step)²)/2 per coefficient, the high-rate estimate of a uniform quantiser."""
    h, w = residual.shape[:2]
    ph, pw = -(-h // tile) * tile, -(-w // tile) * tile
    r = residual.astype(np.float32)
    if (ph, pw) != (h, w):
        r = np.pad(r, ((0, ph - h), (0, pw - w), (0, 0)), mode="edge")
    y = r @ _YUV32.T
    # every 8x8 block of every channel as a row of 64, times the 2-D DCT basis: one product
    blocks = y.reshape(ph // 8, 8, pw // 8, 8, 3).transpose(0, 2, 4, 1, 3).reshape(-1, 64)
    c = blocks @ _DCT2_32.T
    c *= np.float32(1.0 / step)
    np.square(c, out=c)
    bits = np.log1p(c, out=c).reshape(ph // 8, pw // 8, 3 * 64)
    per_block = bits.sum(axis=2, dtype=np.float64) * (0.5 / np.log(2.0))  # (ph/8, pw/8)
    k = tile // 8
    return per_block.reshape(ph // tile, k, pw // tile, k).sum(axis=(1, 3))


def compact_tile_bits(symbols: np.ndarray, table: np.ndarray, tile_blocks: int) -> np.ndarray:
    """Bits per tile of the compact symbols under the context table (all positions coded)."""
    from semcodec.format.compact import context_index, table_neighbours

    c, mh, mw = symbols.shape
    levels = table.shape[-1]
    ctx = context_index(symbols, levels, table_neighbours(table))
    t = table.astype(np.float64)
    p = t / t.sum(-1, keepdims=True)
    ch = np.broadcast_to(np.arange(c)[:, None, None], symbols.shape)
    bits = -np.log2(p[ch, ctx, symbols]).sum(0)  # (mh, mw)
    th, tw = tile_shape(mh, mw, tile_blocks)
    pad = np.zeros((th * tile_blocks, tw * tile_blocks))
    pad[:mh, :mw] = bits
    return pad.reshape(th, tile_blocks, tw, tile_blocks).sum(axis=(1, 3))


def choose_modes(
    image: np.ndarray,
    predictions: dict[int, np.ndarray | int],
    compact_bits: np.ndarray | None,
    quality: int,
    tile_blocks: int,
) -> tuple[np.ndarray, float]:
    """Per tile, the mode of least estimated bits, and the total: residual proxy plus the
    compact bits the base costs there (modes 'generator' and 'base'; None: the compact layer
    is paid in full anyway), with equal distortion assumed (the residual coder's quantiser is
    the same in every tile at one quality)."""
    tile = tile_blocks * MULTIPLE
    step = step_for(quality)
    x = image.astype(np.int64)
    costs = []
    order = sorted(predictions)
    for m in order:
        p = predictions[m]
        r = x - (np.int64(p) if np.isscalar(p) else p.astype(np.int64))
        bits = tile_bits(r, step, tile) * scale_for(quality, m)
        if m != NONE and compact_bits is not None:
            bits = bits + compact_bits
        costs.append(bits)
    stacked = np.stack(costs)
    best = np.argmin(stacked, axis=0)
    return np.array(order, np.int64)[best], float(stacked.min(axis=0).sum())
