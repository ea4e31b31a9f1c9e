"""The ENHANCE layer: per-class gains and offsets of the enhancement network, its tile mask, and
an update of the network's class bias rows.

Payload (docs/format.md §12): version byte (1, or 2 when an update follows); flags byte (bit 0:
offsets follow, bit 1: a tile mask follows, bit 2: an update follows, version 2 only); log2 of
the tile side; the (classes + 1) gains as 4-bit nibbles, low nibble first; if flagged, (classes
+ 1) x 3 signed offset bytes (R, G, B); if flagged, the tile mask, one bit per tile in row order,
most significant bit first (numpy's packbits); if flagged, the update: one byte (low nibble: the
step's exponent, high nibble: the Exp-Golomb order), the row width (the network's first-layer
channels), the rows it changes as a 16-bit little-endian mask (each named row changes), then
each changed row's values as signed Exp-Golomb codes, most significant bit first, padded with
zero bits to a whole byte. The last class entry is for pixels the map
calls unknown. Nothing may follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semcodec.errors import CorruptData

GAIN_ONE = 8  # gains are stored in eighths (0..15): 8 is the network as trained
OFFSET_UNIT = 4  # offsets are stored in quarters of a pixel level (int8)
UPDATE_LIMIT = 255  # the largest magnitude of one update value (in steps)
MAX_UPDATE_EXPONENT = 8  # the coarsest step: 2**8 activation units
LAYER_VERSION = 1
UPDATE_VERSION = 2  # the layer's version when it carries an update
_OFFSETS, _MASK, _UPDATE = 1, 2, 4
MAX_ORDER = 7  # the Exp-Golomb order's largest value
MAX_PREFIX = 12  # leading zeros of one code: enough for UPDATE_LIMIT at every order


@dataclass(frozen=True)
class Update:
    """A picture's change of the first layer's class bias rows, in steps of 2**exponent units
    of that layer's activation grid (row k, channel c adds rows[k, c] * 2**(exponent + shift_c)
    on its accumulator grid): integers, so every decoder runs the same network."""

    rows: np.ndarray  # int (classes + 1, width), each in -UPDATE_LIMIT..UPDATE_LIMIT
    exponent: int  # 0..MAX_UPDATE_EXPONENT


@dataclass(frozen=True)
class Adjust:
    """What a file carries for the enhancement: per-class gain and offset, a tile mask and
    optionally an update of the network's class bias rows."""

    gains: np.ndarray  # int (classes + 1,) in 0..15, eighths; the last entry: unknown pixels
    offsets: np.ndarray  # int (classes + 1, 3) in -128..127, quarters of a level
    tiles: np.ndarray | None  # bool (ty, tx): where the correction applies (None: everywhere)
    tile: int = 64  # pixels per tile side
    update: Update | None = None  # None: the release's table as it is


def tile_grid(height: int, width: int, tile: int) -> tuple[int, int]:
    """Tiles per column and per row of an image."""
    return -(-height // tile), -(-width // tile)


# ----- signed Exp-Golomb codes: the update's values ------------------------------------------------
def zigzag(v: int) -> int:
    """0, -1, 1, -2, 2 ... → 0, 1, 2, 3, 4 ...: small magnitudes get short codes."""
    return 2 * v if v >= 0 else -2 * v - 1


def code_bits(values: np.ndarray, order: int) -> str:
    """The values' Exp-Golomb codes of this order, as a string of bits."""
    out = []
    for v in np.asarray(values, np.int64).ravel().tolist():
        n = zigzag(v) + (1 << order)
        out.append("0" * (n.bit_length() - 1 - order) + format(n, "b"))
    return "".join(out)


def best_order(values: np.ndarray) -> int:
    """The Exp-Golomb order that codes these values in the fewest bits."""
    return min(range(MAX_ORDER + 1), key=lambda k: len(code_bits(values, k)))


def read_codes(data: bytes, count: int, order: int) -> tuple[np.ndarray, int]:
    """count values from the bits of data (then zero padding); (values, bytes read)."""
    bits = np.unpackbits(np.frombuffer(data, np.uint8))
    pos, out = 0, []
    for _ in range(count):
        zeros = 0
        while pos + zeros < len(bits) and not bits[pos + zeros]:
            zeros += 1
            if zeros > MAX_PREFIX:
                raise CorruptData("ENHANCE layer: an update code too long")
        end = pos + 2 * zeros + order + 1
        if end > len(bits):
            raise CorruptData("ENHANCE layer: truncated update")
        n = int("".join("1" if b else "0" for b in bits[pos + zeros : end]), 2) - (1 << order)
        out.append(n // 2 if n % 2 == 0 else -(n + 1) // 2)
        pos = end
    used = -(-pos // 8)
    if bits[pos : used * 8].any():
        raise CorruptData("ENHANCE layer: update padding not zero")
    return np.array(out, np.int64), used


def encode_update(update: Update) -> bytes:
    """The update's bytes: step and order, the mask of changed rows, their codes."""
    rows = np.asarray(update.rows, np.int64)
    if len(rows) > 16 or np.abs(rows).max(initial=0) > UPDATE_LIMIT:
        raise ValueError("an enhancement update has at most 16 rows of values within the limit")
    if not 0 <= update.exponent <= MAX_UPDATE_EXPONENT:
        raise ValueError("an enhancement update's step is out of range")
    changed = rows.any(axis=1)
    mask = int(sum(1 << i for i in np.flatnonzero(changed).tolist()))
    values = rows[changed]
    order = best_order(values)
    bits = code_bits(values, order)
    bits += "0" * (-len(bits) % 8)
    body = int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""
    if not 1 <= rows.shape[1] <= 255:
        raise ValueError("an enhancement update's rows are 1..255 values long")
    head = bytes([update.exponent | order << 4, rows.shape[1]])
    return head + mask.to_bytes(2, "little") + body


def decode_update(data: bytes, rows: int, width: int = 0) -> Update:
    """The update of a network with this many class rows and this width (0: any, as the
    layer says); CorruptData if malformed."""
    if len(data) < 4:
        raise CorruptData("ENHANCE layer: truncated update")
    exponent, order, stored = data[0] & 15, data[0] >> 4, data[1]
    mask = int.from_bytes(data[2:4], "little")
    if exponent > MAX_UPDATE_EXPONENT or order > MAX_ORDER or mask >> rows or not mask:
        raise CorruptData("ENHANCE layer: a bad update step, order or row mask")
    if stored == 0 or width and stored != width:
        raise CorruptData("ENHANCE layer: an update for a network of another width")
    width = stored
    changed = [i for i in range(rows) if mask >> i & 1]
    values, used = read_codes(data[4:], len(changed) * width, order)
    if 4 + used != len(data):
        raise CorruptData("ENHANCE layer: trailing bytes")
    if np.abs(values).max() > UPDATE_LIMIT:
        raise CorruptData("ENHANCE layer: an update value beyond its limit")
    values = values.reshape(len(changed), width)
    if not values.any(axis=1).all():
        raise CorruptData("ENHANCE layer: an update row without a change")
    out = np.zeros((rows, width), np.int64)
    out[changed] = values
    return Update(out, exponent)


# ----- the layer ----------------------------------------------------------------------------------
def encode_adjust(adjust: Adjust) -> bytes:
    """The layer's bytes (version 1 unless it carries an update)."""
    gains = np.asarray(adjust.gains, np.int64)
    if gains.min() < 0 or gains.max() > 15:
        raise ValueError("enhancement gains must be in 0..15")
    flags = 0
    offsets = np.asarray(adjust.offsets, np.int64)
    if offsets.any():
        flags |= _OFFSETS
    if adjust.tiles is not None:
        flags |= _MASK
    update = adjust.update
    if update is not None and np.asarray(update.rows).any():
        flags |= _UPDATE
    log2 = int(adjust.tile).bit_length() - 1
    if 1 << log2 != adjust.tile:
        raise ValueError("the tile side must be a power of two")
    padded = np.zeros(-(-len(gains) // 2) * 2, np.uint8)
    padded[: len(gains)] = gains
    version = UPDATE_VERSION if flags & _UPDATE else LAYER_VERSION
    out = bytes([version, flags, log2]) + bytes(padded[0::2] | (padded[1::2] << 4))
    if flags & _OFFSETS:
        out += np.clip(offsets, -128, 127).astype(np.int8).tobytes()
    if flags & _MASK:
        out += np.packbits(np.asarray(adjust.tiles, bool).ravel()).tobytes()
    if flags & _UPDATE:
        assert update is not None
        out += encode_update(update)
    return out


def decode_adjust(data: bytes, classes: int, height: int, width: int, channels: int = 0) -> Adjust:
    """Parse the layer for an image of this size and a network whose first layer has this many
    channels (0: as many as an update says: reading without the network); CorruptData if it
    is malformed."""
    n = classes + 1
    head = 3 + -(-n // 2)
    if len(data) < head or data[0] not in (LAYER_VERSION, UPDATE_VERSION):
        raise CorruptData("ENHANCE layer: truncated or of an unknown version")
    flags, log2 = data[1], data[2]
    allowed = _OFFSETS | _MASK | (_UPDATE if data[0] == UPDATE_VERSION else 0)
    if flags & ~allowed or not 3 <= log2 <= 12:
        raise CorruptData("ENHANCE layer: reserved flags or a bad tile size")
    if data[0] == UPDATE_VERSION and not flags & _UPDATE:
        raise CorruptData("ENHANCE layer: version 2 without an update")
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
    update = None
    if flags & _UPDATE:
        update = decode_update(data[pos:], n, channels)
        pos = len(data)
    if pos != len(data):
        raise CorruptData("ENHANCE layer: trailing bytes")
    return Adjust(gains, offsets, tiles, tile, update)
