"""The integer grid's shared pieces (numpy only): quantiser, bound check, exact convolution.

Networks whose output is the decoded picture run on integers: integer weights and inputs, every
partial sum of a convolution an integer below 2**24 (docs/format.md §7 and §12), so an fp32
matrix product gives the exact sum in any order, blocking or thread count. The generator
(generator.py, generator_torch.py) and the enhancement network (enhancer.py,
models/enhance.py) share this one definition of the grid.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

ACC_LIMIT = (1 << 24) - 1  # largest |partial sum| an fp32 accumulator holds exactly


# ----- integers ---------------------------------------------------------------------------------
def round_div(num: np.ndarray, den: int) -> np.ndarray:
    """num / den rounded half to even, exactly, for int64 num and a positive int den."""
    if den & (den - 1) == 0:
        return round_shift(num, den.bit_length() - 1)
    q = np.floor_divide(num, den)
    r2 = 2 * (num - q * den)
    up = (r2 > den) | ((r2 == den) & (q % 2 == 1))
    return q + up.astype(np.int64)


def round_shift(num: np.ndarray, bits: int) -> np.ndarray:
    """num / 2**bits rounded half to even: round_div by shifts (integer division is the
    slowest step of the decoder's per-pixel work), as (num + 2**(bits-1) - 1 + parity) >> bits
    with parity the floor's lowest bit, in four passes. int32 num stays int32 (the caller keeps
    |num| below 2**31 - 2**bits); anything else is computed in int64."""
    num = np.asarray(num)
    if num.dtype != np.int32:
        num = num.astype(np.int64)
    q = num >> bits  # floor, also for negative num
    if bits == 0:
        return q
    q &= 1  # a tie rounds up exactly when the floor is odd
    q += num
    q += (1 << (bits - 1)) - 1
    q >>= bits
    return q


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
CHUNK_BYTES = 1 << 20  # im2col rows per matrix product: about half an L2 cache


def available_cpus() -> int:
    """The cores this process may run on: the numpy kernels' threads."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Padded:
    """A zero-padded (h, w, c) picture as one flat fp32 buffer, rows of w + 2p pixels.

    Pixel (y, x) sits at flat pixel (y + p) (w + 2p) + x + p; the k*k taps of output pixel
    j = y (w + 2p) + x are then pixels j + dy (w + 2p) + dx, so the im2col matrix of any
    run of output rows is a strided view, and a convolution's output rows (pads included,
    zeroed) drop straight into the next layer's buffer at offset p (w + 2p) + p.
    """

    flat: np.ndarray  # float32 ((h + 2p) (w + 2p) + 2p) * c
    h: int
    w: int
    c: int
    p: int

    @property
    def wp(self) -> int:
        return self.w + 2 * self.p

    @classmethod
    def zeros(cls, h: int, w: int, c: int, p: int) -> Padded:
        """An all-zero buffer (its pads stay zero)."""
        return cls(np.zeros(cls.size(h, w, c, p), np.float32), h, w, c, p)

    @staticmethod
    def size(h: int, w: int, c: int, p: int) -> int:
        """Floats of the flat buffer."""
        return ((h + 2 * p) * (w + 2 * p) + 2 * p) * c

    @classmethod
    def over(cls, store: np.ndarray, h: int, w: int, c: int, p: int) -> Padded:
        """A buffer at the start of ``store`` (float32, at least ``size`` floats; what it
        held before is overwritten): pads zeroed, picture undefined until written. Layers of
        one band take turns in two stores instead of a fresh allocation each."""
        buf = cls(store[: cls.size(h, w, c, p)], h, w, c, p)
        start = (p * buf.wp + p) * c
        buf.flat[:start] = 0
        buf.flat[start + h * buf.wp * c :] = 0
        buf.rows()[:, w:] = 0
        return buf

    def rows(self) -> np.ndarray:
        """(h, w + 2p, c) view of the picture's rows, pads of the same rows included."""
        start = (self.p * self.wp + self.p) * self.c
        size = self.h * self.wp * self.c
        return self.flat[start : start + size].reshape(self.h, self.wp, self.c)

    def interior(self) -> np.ndarray:
        """(h, w, c) view of the picture."""
        return self.rows()[:, : self.w]


@dataclass
class IntConv:
    """out = sum w*q + b on the accumulator grid scaled by 2**-shift (fp32, exact)."""

    weight: np.ndarray  # int32 (out, in, k, k)
    bias: np.ndarray  # int32 (out,)
    shift: np.ndarray  # int32 (out,)

    def __post_init__(self) -> None:
        """The scaled integers as one (k*k*in, out) matrix, rows ordered (dy, dx, in)."""
        w, self._b = scaled(self.weight, self.bias, self.shift)
        o, i, k, _ = w.shape
        self.k, self.out_channels = k, o
        self._w = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * i, o))

    @property
    def pad(self) -> int:
        return self.k // 2

    def __call__(self, x: np.ndarray, pool: Executor | None = None, threads: int = 1) -> np.ndarray:
        """x float32 (H,W,C), zero padded by k//2; returns the exact scaled accumulator (H,W,O)
        (with a pool: runs of rows on `threads` threads, the same result)."""
        h, w, c = x.shape
        src = Padded.zeros(h, w, c, self.pad)
        src.interior()[...] = x
        out = np.empty((h * src.wp, self.out_channels), np.float32)
        self.into(src, out, None, pool, threads)
        return out.reshape(h, src.wp, -1)[:, :w]

    def into(
        self,
        src: Padded,
        out: np.ndarray,
        epilogue: Callable[[np.ndarray, int, int], None] | None = None,
        pool: Executor | None = None,
        threads: int = 1,
    ) -> None:
        """out (h (w + 2p), O) float32 = the accumulator of every output row, pads included.

        Rows go through one matrix product per chunk of about CHUNK_BYTES of im2col (kernel
        rows and columns fused: K = k*k*C), then epilogue(chunk (rows, w + 2p, O), y0, y1)
        while the chunk is in cache; with a pool, `threads` runs of rows side by side. Every
        partial sum is an integer below 2**24 times a power of two, so neither chunks nor
        threads change a bit of the result.
        """
        if src.p != self.pad or src.c * self.k * self.k != self._w.shape[0]:
            raise ValueError("IntConv: input buffer does not match the kernel")
        step = max(1, CHUNK_BYTES // (src.wp * self._w.shape[0] * 4))
        if pool is None or threads <= 1 or src.h <= step:
            self._rows(src, out, epilogue, 0, src.h, step)
            return
        cuts = [src.h * t // threads for t in range(threads + 1)]
        jobs = [
            pool.submit(self._rows, src, out, epilogue, y0, y1, step)
            for y0, y1 in zip(cuts, cuts[1:], strict=False)
            if y1 > y0
        ]
        for job in jobs:
            job.result()

    def _rows(
        self,
        src: Padded,
        out: np.ndarray,
        epilogue: Callable[[np.ndarray, int, int], None] | None,
        start: int,
        stop: int,
        step: int,
    ) -> None:
        """Output rows start..stop, chunk by chunk (one im2col buffer, reused; one strided
        view of every output row's taps, sliced per chunk: making a view per chunk cost more
        than a millisecond of a Kodak decode)."""
        k, c, wp = self.k, src.c, src.wp
        cols = np.empty((min(step, stop - start) * wp, k, k * c), np.float32)
        taps = as_strided(
            src.flat[start * wp * c :],
            shape=((stop - start) * wp, k, k * c),
            strides=(4 * c, 4 * wp * c, 4),
        )
        for y0 in range(start, stop, step):
            y1 = min(stop, y0 + step)
            n = (y1 - y0) * wp
            np.copyto(cols[:n], taps[(y0 - start) * wp : (y1 - start) * wp])
            part = out[y0 * wp : y1 * wp]
            np.matmul(cols[:n].reshape(n, -1), self._w, out=part)
            part += self._b
            if epilogue is not None:
                epilogue(part.reshape(y1 - y0, wp, -1), y0, y1)
