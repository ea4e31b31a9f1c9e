"""The integer grid's shared pieces (numpy only): quantiser, bound check, exact convolution.

Networks whose output is the decoded picture run on integers: integer weights and inputs, every
partial sum of a convolution an integer below 2**24 (docs/format.md §7 and §12), so an fp32
matrix product gives the exact sum in any order, blocking or thread count. The generator
(generator.py, generator_torch.py) and the enhancement network (enhancer.py,
models/enhance.py) share this one definition of the grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

ACC_LIMIT = (1 << 24) - 1  # largest |partial sum| an fp32 accumulator holds exactly


# ----- integers ---------------------------------------------------------------------------------
def round_div(num: np.ndarray, den: int) -> np.ndarray:
    """num / den rounded half to even, exactly, for int64 num and a positive int den."""
    q = np.floor_divide(num, den)
    r2 = 2 * (num - q * den)
    up = (r2 > den) | ((r2 == den) & (q % 2 == 1))
    return q + up.astype(np.int64)


def unshuffle(x: np.ndarray, s: int) -> np.ndarray:
    """(H, W, C) → (H/s, W/s, C s s) in torch's pixel_unshuffle channel order (c, dy, dx)."""
    h, w, c = x.shape
    return x.reshape(h // s, s, w // s, s, c).transpose(0, 2, 4, 1, 3).reshape(h // s, w // s, -1)


def shuffle(x: np.ndarray, s: int) -> np.ndarray:
    """Inverse of unshuffle: (h, w, C s s) → (h s, w s, C)."""
    h, w, cs = x.shape
    c = cs // (s * s)
    return x.reshape(h, w, c, s, s).transpose(0, 3, 1, 4, 2).reshape(h * s, w * s, c)


# ----- the accumulator budget -------------------------------------------------------------------
def accumulator_bound(
    weight: np.ndarray, bias: np.ndarray, in_max: np.ndarray | int, extra: np.ndarray | int = 0
) -> np.ndarray:
    """int64 (out,): each output channel's largest |partial sum|, sum |w| max|q| + |b| + extra.

    in_max: the inputs' bound, one per input channel or one for all; extra: what bias tables
    added per pixel contribute (their largest |value| per channel).
    """
    l1 = np.abs(np.asarray(weight).astype(np.int64)).sum(axis=(2, 3))  # (out, in)
    bound = np.broadcast_to(np.asarray(in_max, np.int64), (l1.shape[1],))
    return l1 @ bound + np.abs(np.asarray(bias).astype(np.int64)) + extra


def within_budget(bound: np.ndarray | int) -> bool:
    """Whether accumulators of this bound stay within fp32's exact integers."""
    return int(np.max(bound)) <= ACC_LIMIT


def grid_exponent(value: float, units: int) -> int:
    """Smallest power-of-two exponent e with value <= units * 2**e."""
    return math.ceil(math.log2(max(value, 1e-12) / units))


@dataclass
class IntLayer:
    """One quantised layer: integer weights, bias, shift (output grid relative to the
    accumulator's), and the integer bias tables added per pixel, if any."""

    weight: np.ndarray  # int32 (out, in, k, k)
    bias: np.ndarray  # int32 (out,)
    shift: np.ndarray  # int32 (out,)
    extras: list[np.ndarray] = field(default_factory=list)  # int64 (rows, out) each


def quantise(
    w: np.ndarray,
    b: np.ndarray,
    in_scale: np.ndarray | float,
    in_max: np.ndarray | int,
    e_out: int,
    extras: Sequence[np.ndarray] = (),
) -> IntLayer:
    """Integer weights on the finest per-channel accumulator grid that keeps the 2**24 bound.

    w (out, in, k, k) real weights; in_scale (in,) or scalar: the real value of one input
    unit; in_max (in,) or scalar: the inputs' bound; e_out the output grid (real = int *
    2**e_out); extras: (rows, out) real bias tables, one row of each added per pixel, so each
    adds its largest |value| per channel to the budget.
    """
    out_ch, in_ch = w.shape[:2]
    scale = np.broadcast_to(np.asarray(in_scale, np.float64), (in_ch,))
    bound = np.broadcast_to(np.asarray(in_max, np.int64), (in_ch,))
    ws = w.astype(np.float64) * scale[None, :, None, None]
    wi = np.zeros(w.shape, np.int64)
    bi = np.zeros(out_ch, np.int64)
    sh = np.zeros(out_ch, np.int64)
    xi = [np.zeros(x.shape, np.int64) for x in extras]
    for c in range(out_ch):
        add = sum(float(np.abs(x[:, c]).max()) for x in extras)
        l1 = float((np.abs(ws[c]).sum(axis=(1, 2)) * bound).sum() + abs(b[c]) + add)
        e = math.floor(math.log2(max(l1, 1e-30) / ACC_LIMIT))  # a first guess, then move up
        while True:
            cw = np.round(ws[c] / 2.0**e).astype(np.int64)
            cb = int(round(float(b[c]) / 2.0**e))
            cx = [np.round(x[:, c] / 2.0**e).astype(np.int64) for x in extras]
            more = sum(int(np.abs(v).max()) for v in cx)
            if within_budget(accumulator_bound(cw[None], np.array([cb]), bound, more)):
                break
            e += 1
        wi[c], bi[c], sh[c] = cw, cb, e_out - e
        for dst, v in zip(xi, cx, strict=True):
            dst[:, c] = v
    return IntLayer(wi.astype(np.int32), bi.astype(np.int32), sh.astype(np.int32), xi)


def scaled(
    weight: np.ndarray, bias: np.ndarray, shift: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """float32 weights and bias times 2**-shift per output channel: exact dyadics."""
    scale = np.power(2.0, -np.asarray(shift).astype(np.float64))
    w = np.asarray(weight).astype(np.float64) * scale[:, None, None, None]
    b = np.asarray(bias).astype(np.float64) * scale
    return w.astype(np.float32), b.astype(np.float32)


# ----- the exact convolution --------------------------------------------------------------------
@dataclass
class IntConv:
    """out = sum w*q + b on the accumulator grid scaled by 2**-shift (fp32, exact)."""

    weight: np.ndarray  # int32 (out, in, k, k)
    bias: np.ndarray  # int32 (out,)
    shift: np.ndarray  # int32 (out,)

    def __post_init__(self) -> None:
        """The scaled integers as one (k*in, out) matrix per kernel row, for the products below."""
        w, self._b = scaled(self.weight, self.bias, self.shift)
        o, i, k, _ = w.shape
        self.k = k
        # per kernel row dy: rows ordered (dx, in), matching a window of k neighbouring pixels
        self._w = [
            np.ascontiguousarray(w[:, :, dy].transpose(2, 1, 0).reshape(k * i, o))
            for dy in range(k)
        ]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x float32 (H,W,C), zero padded by k//2; returns the exact scaled accumulator (H,W,O).

        The padded image is one flat buffer; the k pixels of a kernel row are then k*C
        consecutive floats, so each kernel row is one matrix product over a strided view.
        """
        h, w, c = x.shape
        k, p = self.k, self.k // 2
        wp = w + 2 * p
        flat = np.zeros(((h + 2 * p) * wp + k) * c, np.float32)
        flat[: (h + 2 * p) * wp * c].reshape(h + 2 * p, wp, c)[p : p + h, p : p + w] = x
        rows = h * wp
        out = None
        for dy in range(k):
            view = as_strided(flat[dy * wp * c :], shape=(rows, k * c), strides=(4 * c, 4))
            part = view @ self._w[dy]
            if out is None:
                out = part
            else:
                out += part
        out += self._b
        return out.reshape(h, wp, -1)[:, :w]
