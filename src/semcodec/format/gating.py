"""The prediction-mode layer: which prediction each tile's residual is coded against.

Payload (docs/format.md §10): ``u8 version (1), u8 tile side in map blocks, u8 blend radius in
pixels, u8 flags`` (bit 0: the compact layer codes every block, not only those of tiles that
use the base), then the tiles' modes in raster order, range coded with adaptive integer counts per
context (the left and the top tile's modes, 'outside' at the borders). Three modes:
0 the generator's reconstruction, 1 the bilinear base alone, 2 no prediction (flat 128).
"""

from __future__ import annotations

from dataclasses import dataclass

import constriction
import numpy as np

from semcodec.errors import CorruptData
from semcodec.format.rangecoder import decode_words

__all__ = [
    "MODES",
    "GEN",
    "BASE",
    "NONE",
    "GatingPlan",
    "encode_gating",
    "decode_gating",
    "mode_shares",
    "no_prediction",
    "read_plan",
]

GEN, BASE, NONE = 0, 1, 2
MODES = ("generator", "base", "none")
_VERSION = 1
_INC, _LIMIT = 16, 1024
_OUTSIDE = len(MODES)
MIN_TILE_BLOCKS, MAX_TILE_BLOCKS = 4, 16  # tiles of 32 to 128 pixels


@dataclass(frozen=True, eq=False)
class GatingPlan:
    """Which prediction each tile takes: the layer's content, as the encoder writes it and the
    decoder reads it (decoder/prediction.py computes the rest from it)."""

    tile_blocks: int  # tile side in map blocks
    radius: int  # blend radius in pixels
    modes: np.ndarray  # (tiles_h, tiles_w) int64 mode per tile, raster order
    all_symbols: bool = False  # the compact layer codes every block, not only the base's

    def __post_init__(self) -> None:
        """Refuse what the layer cannot record (ValueError: a caller's mistake, not data)."""
        if not MIN_TILE_BLOCKS <= self.tile_blocks <= MAX_TILE_BLOCKS or not 0 <= self.radius <= 32:
            raise ValueError(
                f"tile of {self.tile_blocks} blocks or radius {self.radius} out of range"
            )
        modes = np.asarray(self.modes, np.int64)
        if modes.ndim != 2 or modes.size == 0 or modes.min() < 0 or modes.max() >= len(MODES):
            raise ValueError("modes out of range")
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "all_symbols", bool(self.all_symbols))


def _run(th: int, tw: int, modes: np.ndarray | None, coder) -> np.ndarray:
    """The context loop shared by encoder and decoder (``modes is None`` → decode)."""
    family = constriction.stream.model.Categorical(perfect=False)
    counts = np.ones(((_OUTSIDE + 1) ** 2, len(MODES)), np.int64)
    out = np.zeros((th, tw), np.int64)
    buf = np.zeros(1, np.int32)
    for y in range(th):
        for x in range(tw):
            left = out[y, x - 1] if x else _OUTSIDE
            top = out[y - 1, x] if y else _OUTSIDE
            row = counts[left * (_OUTSIDE + 1) + top]
            probs = (row / row.sum())[None]
            if modes is not None:
                buf[0] = int(modes[y, x])
                coder.encode(buf, family, probs)
                m = int(buf[0])
            else:
                m = int(coder.decode(family, probs)[0])
            out[y, x] = m
            row[m] += _INC
            if row.sum() > _LIMIT:
                row[:] = (row + 1) >> 1
    return out


def encode_gating(plan: GatingPlan) -> bytes:
    """The layer's payload."""
    enc = constriction.stream.queue.RangeEncoder()
    _run(*plan.modes.shape, plan.modes, enc)
    words = enc.get_compressed().astype("<u4").tobytes()
    head = bytes([_VERSION, plan.tile_blocks, plan.radius, int(plan.all_symbols)])
    return head + words


def decode_gating(data: bytes, mh: int, mw: int) -> GatingPlan:
    """The plan of a map of mh x mw blocks."""
    if len(data) < 4:
        raise CorruptData("gating layer: payload too short")
    version, tile_blocks, radius, flags = data[0], data[1], data[2], data[3]
    if (
        version != _VERSION
        or not MIN_TILE_BLOCKS <= tile_blocks <= MAX_TILE_BLOCKS
        or radius > 32
        or flags > 1
    ):
        raise CorruptData(f"gating layer: bad header {data[:4].hex()}")
    th, tw = -(-mh // tile_blocks), -(-mw // tile_blocks)  # at most 2**28 / 32**2 tiles
    dec = decode_words(data[4:], "gating layer")
    try:
        modes = _run(th, tw, None, dec)
    except (ValueError, RuntimeError, AssertionError) as exc:
        raise CorruptData(f"gating layer: {exc}") from None
    return GatingPlan(tile_blocks, radius, modes, bool(flags & 1))


#: the tiles a file without COMPACT and GATING layers (format version 5) is described with:
#: every tile NONE, so the prediction is flat whatever their size
NO_PREDICTION_TILE_BLOCKS = 8


def no_prediction(mh: int, mw: int) -> GatingPlan:
    """The plan of a file with no prediction anywhere (neither COMPACT nor GATING layer)."""
    t = NO_PREDICTION_TILE_BLOCKS
    return GatingPlan(t, 0, np.full((-(-mh // t), -(-mw // t)), NONE, np.int64))


def read_plan(data: bytes | None, compact: bool, mh: int, mw: int) -> GatingPlan | None:
    """A file's plan from its GATING payload (None: absent) and whether it has a COMPACT
    layer: the layer's plan; none without prediction (version 5); None (the generator on every
    tile) for a file of version 1 or 2, which has COMPACT and no GATING."""
    if data is not None:
        return decode_gating(data, mh, mw)
    return None if compact else no_prediction(mh, mw)


def mode_shares(modes: np.ndarray) -> dict[str, float]:
    """Share of tiles per mode (for the bench and `info`)."""
    n = max(1, modes.size)
    return {name: float((modes == i).sum()) / n for i, name in enumerate(MODES)}
