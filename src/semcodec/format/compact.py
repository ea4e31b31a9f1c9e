"""A2: lossless coder of the compact representation's integer symbols (numpy, no torch).

One probability model serves training and coding: a table of logits indexed by
(channel, left neighbour, top neighbour[, top-right neighbour]). Training reads it as a
differentiable rate term (models/context_model.py); export freezes it into an integer count table that travels with the
model, and the coder uses only those integers, so every machine derives bit-identical
probabilities. The number of neighbours (2 or 3) follows from the table's shape, so a model file
says which context it was fitted with.
"""

from __future__ import annotations

import numpy as np

from semcodec.errors import CorruptData
from semcodec.format.rangecoder import categorical_family, decode_words, encode_words

TABLE_PRECISION = 1 << 16  # integer counts per context sum to about this
NEIGHBOURS = (2, 3)  # (left, top) or (left, top, top-right): all decoded before in raster order


def _contexts(s, levels: int, neighbours: int, full_like):
    """(left*(L+1)+top)[*(L+1)+top_right] over the last two axes, L = 'outside'.

    One definition for the coder (numpy) and the training rate term (torch), so both index the
    same table entry for every symbol.
    """
    left = full_like(s, levels)
    top = full_like(s, levels)
    left[..., :, 1:] = s[..., :, :-1]
    top[..., 1:, :] = s[..., :-1, :]
    ctx = left * (levels + 1) + top
    if neighbours == 3:
        top_right = full_like(s, levels)
        top_right[..., 1:, :-1] = s[..., :-1, 1:]
        ctx = ctx * (levels + 1) + top_right
    return ctx


def context_index(symbols: np.ndarray, levels: int, neighbours: int = 2) -> np.ndarray:
    """Context of every symbol of (C,h,w), int64 (see ``_contexts``)."""
    return _contexts(np.asarray(symbols, np.int64), levels, neighbours, np.full_like)


def table_neighbours(table: np.ndarray) -> int:
    """How many neighbours a (C, (L+1)^n, L) table conditions on; 0 if the shape fits none."""
    if table.ndim != 3:
        return 0
    k = table.shape[-1] + 1
    return next((n for n in NEIGHBOURS if table.shape[1] == k**n), 0)


def _probabilities(table: np.ndarray, channel: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """Rows of float64 probabilities from integer counts (one exact division per entry)."""
    counts = table[channel, ctx].astype(np.float64)
    return counts / counts.sum(-1, keepdims=True)


def validate_table(table: np.ndarray, channels: int, levels: int) -> None:
    """Reject a table whose shape does not match the representation it should code."""
    n = table_neighbours(table)
    if (
        n == 0
        or table.shape != (channels, (levels + 1) ** n, levels)
        or table.dtype != np.int32
        or table.min() < 1
    ):
        raise ValueError(
            f"compact table has shape {table.shape}, expected {(channels, (levels + 1) ** 2, levels)}"
            f" or {(channels, (levels + 1) ** 3, levels)} with int32 counts >= 1"
        )


def check_payload_size(data: bytes, table: np.ndarray, count: int, what: str) -> None:
    """Refuse a payload too short for `count` symbols under this table, before decoding.

    No symbol costs less than the table's most probable entry; half that bound (rounding,
    coder flush) less 16 bytes is the least a genuine payload has.
    """
    t = table.astype(np.float64)
    min_bits = float(-np.log2((t / t.sum(-1, keepdims=True)).max()))
    need = int(count * min_bits * 0.5 / 8) - 16
    if len(data) < need:
        raise CorruptData(
            f"compact layer of {len(data)} bytes is too short for {what} (needs >= {need})"
        )


def encode_compact(symbols: np.ndarray, table: np.ndarray, used: np.ndarray | None = None) -> bytes:
    """Code (C,h,w) symbols in channel-major raster order with the integer context table.

    ``used`` (h,w) bool, where given, selects the positions coded (the gating layer's tiles
    that use the base); the others are not coded and count as 'outside' in the contexts.
    """
    c, h, w = symbols.shape
    levels = table.shape[-1]
    validate_table(table, c, levels)
    s = symbols.astype(np.int64)
    if s.size and (s.min() < 0 or s.max() >= levels):
        raise ValueError("compact symbols out of range")
    if used is not None:
        s = np.where(used[None], s, levels)
    if s.size == 0 or (used is not None and not used.any()):
        return b""
    ctx = context_index(s, levels, table_neighbours(table))
    ch = np.broadcast_to(np.arange(c)[:, None, None], s.shape)
    keep = np.ones(s.shape, bool) if used is None else np.broadcast_to(used[None], s.shape)
    probs = _probabilities(table, ch[keep], ctx[keep])
    return encode_words(s[keep].astype(np.int32), categorical_family(), probs)


def _above_context(row_above: np.ndarray | None, w: int, levels: int, n: int) -> np.ndarray:
    """The part of each context of a row that comes from the row above (top[, top-right])."""
    above = np.full(w + 1, levels, np.int64)
    if row_above is not None:
        above[:w] = row_above
    if n == 2:
        return above[:w]
    return above[:w] * (levels + 1) + above[1:]


def decode_compact(
    data: bytes,
    shape: tuple[int, int, int],
    table: np.ndarray,
    used: np.ndarray | None = None,
) -> np.ndarray:
    """Inverse of encode_compact; the context of each symbol comes from symbols already decoded.

    Positions ``used`` does not select are not in the payload: they come back as ``levels``
    ('outside'), for the caller to fill (decoder.prediction.fill_symbols).
    """
    c, h, w = shape
    levels = table.shape[-1]
    validate_table(table, c, levels)
    out = np.zeros((c, h, w), np.int64)
    if used is not None:
        out[:] = levels
    if out.size == 0 or (used is not None and not used.any()):
        if data:
            raise CorruptData("compact layer: unexpected data for an empty representation")
        return out
    dec = decode_words(data, "compact layer")
    fam = categorical_family()
    n = table_neighbours(table)
    stride = (levels + 1) ** (n - 1)  # weight of 'left' in the context index
    norm = table.astype(np.float64)
    norm = norm / norm.sum(-1, keepdims=True)
    try:
        for k in range(c):
            tab = norm[k]
            plane = out[k]
            for i in range(h):
                rest = _above_context(plane[i - 1] if i else None, w, levels, n).tolist()
                row_used = None if used is None else used[i].tolist()
                left = levels
                for j in range(w):
                    if row_used is not None and not row_used[j]:
                        left = levels
                        continue
                    sym = int(dec.decode(fam, tab[left * stride + rest[j]][None])[0])
                    plane[i, j] = sym
                    left = sym
    except (
        ValueError,
        RuntimeError,
        AssertionError,
    ) as exc:  # constriction signals bad data by raising
        raise CorruptData(f"compact layer: {exc}") from None
    return out
