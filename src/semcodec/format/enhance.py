"""The ENHANCE layer: per-class gains and offsets of the enhancement network, and its tile mask.

Payload (docs/format.md §12): version byte (1); flags byte (bit 0: offsets follow, bit 1: a
tile mask follows); log2 of the tile side; the (classes + 1) gains as 4-bit nibbles, low
nibble first; if flagged, (classes + 1) x 3 signed offset bytes (R, G, B); if flagged, the
tile mask, one bit per tile in row order, most significant bit first (numpy's packbits). The
last class entry is for pixels the map calls unknown. Nothing may follow.
"""

from __future__ import annotations

import numpy as np

from semcodec.errors import CorruptData
from semcodec.intgrid.enhancer import Adjust

LAYER_VERSION = 1
_OFFSETS, _MASK = 1, 2


def tile_grid(height: int, width: int, tile: int) -> tuple[int, int]:
    """Tiles per column and per row of an image."""
    return -(-height // tile), -(-width // tile)


def encode_adjust(adjust: Adjust) -> bytes:
    """The layer's bytes."""
    gains = np.asarray(adjust.gains, np.int64)
    if gains.min() < 0 or gains.max() > 15:
        raise ValueError("enhancement gains must be in 0..15")
    flags = 0
    offsets = np.asarray(adjust.offsets, np.int64)
    if offsets.any():
        flags |= _OFFSETS
    if adjust.tiles is not None:
        flags |= _MASK
    log2 = int(adjust.tile).bit_length() - 1
    if 1 << log2 != adjust.tile:
        raise ValueError("the tile side must be a power of two")
    padded = np.zeros(-(-len(gains) // 2) * 2, np.uint8)
    padded[: len(gains)] = gains
    out = bytes([LAYER_VERSION, flags, log2]) + bytes(padded[0::2] | (padded[1::2] << 4))
    if flags & _OFFSETS:
        out += np.clip(offsets, -128, 127).astype(np.int8).tobytes()
    if flags & _MASK:
        out += np.packbits(np.asarray(adjust.tiles, bool).ravel()).tobytes()
    return out


def decode_adjust(data: bytes, classes: int, height: int, width: int) -> Adjust:
    """Parse the layer for an image of this size; CorruptData if it is malformed."""
    n = classes + 1
    head = 3 + -(-n // 2)
    if len(data) < head or data[0] != LAYER_VERSION:
        raise CorruptData("ENHANCE layer: truncated or of an unknown version")
    flags, log2 = data[1], data[2]
    if flags & ~(_OFFSETS | _MASK) or not 3 <= log2 <= 12:
        raise CorruptData("ENHANCE layer: reserved flags or a bad tile size")
    nib = np.frombuffer(data[3:head], np.uint8)
    gains = np.stack([nib & 15, nib >> 4], 1).ravel()[:n].astype(np.int64)
    pos = head
    offsets = np.zeros((n, 3), np.int64)
    if flags & _OFFSETS:
        if len(data) < pos + 3 * n:
            raise CorruptData("ENHANCE layer: truncated offsets")
        offsets = np.frombuffer(data[pos : pos + 3 * n], np.int8).reshape(n, 3).astype(np.int64)
        pos += 3 * n
    tile = 1 << log2
    tiles = None
    if flags & _MASK:
        th, tw = tile_grid(height, width, tile)
        size = -(-(th * tw) // 8)
        if len(data) < pos + size:
            raise CorruptData("ENHANCE layer: truncated tile mask")
        bits = np.unpackbits(np.frombuffer(data[pos : pos + size], np.uint8))[: th * tw]
        tiles = bits.reshape(th, tw).astype(bool)
        pos += size
    if pos != len(data):
        raise CorruptData("ENHANCE layer: trailing bytes")
    return Adjust(gains, offsets, tiles, tile)
