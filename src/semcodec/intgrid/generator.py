"""The integer generator (A4, docs/format.md §7) in numpy: the decoder without torch.

Every convolution of the integer generator sums exactly representable integers (scaled by powers
of two) below 2**24, so any summation order gives the same fp32 result: an im2col matrix
product in numpy's BLAS gives the pixels of torch's convolution kernels bit for bit
(tests/test_integer_generator.py, and the conformance files). Decoding then needs neither
torch nor its 1-2 s import.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor

import numpy as np

from semcodec.format.classes import UNKNOWN_AS
from semcodec.format.tiling import MAP_SCALE
from semcodec.intgrid.blas import kernel_pool
from semcodec.intgrid.ops import (
    IntConv,
    accumulator_bound,
    available_cpus,
    round_div,
    shuffle,
    unshuffle,
    within_budget,
)

FACTOR = MAP_SCALE  # compact layer → pixels: one symbol per map block
DETAIL_SHIFT = 16  # grid of the detail the last conv adds to the base: 2**-16 of [-1, 1]
RGB = 3  # the first three compact channels are the base image's colours
META = ("levels", "classes", "s2d", "blocks", "act_max", "input_max")


def base_step(levels: int) -> int:
    """Power of two dividing the integer base before conv 0 (about 240 steps over [-1, 1])."""
    return 1 << max(0, math.ceil(math.log2(levels - 1)))


def _axis_taps(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices and sixteenth weights of the 8x bilinear (half-pixel centres) on n."""
    i = np.arange(FACTOR * n, dtype=np.int64)
    src16 = np.maximum(2 * i - (FACTOR - 1), 0)
    i0 = src16 // 16
    frac = src16 % 16
    i1 = np.minimum(i0 + 1, n - 1)
    return i0, i1, frac


def integer_base(symbols: np.ndarray, levels: int) -> np.ndarray:
    """int64 (C,8h,8w): 2 * bilinear8(symbols) * 256 - 256 (levels - 1), exactly."""
    s = symbols.astype(np.int64)
    h, w = s.shape[-2:]
    y0, y1, fy = _axis_taps(h)
    x0, x1, fx = _axis_taps(w)
    rows = s[:, y0, :] * (16 - fy)[:, None] + s[:, y1, :] * fy[:, None]
    b = rows[:, :, x0] * (16 - fx) + rows[:, :, x1] * fx
    return 2 * b - 256 * (levels - 1)


class IntegerGenerator:
    """The integer generator of docs/format.md §7 from its stored table (numpy arrays)."""

    def __init__(self, state: dict[str, np.ndarray], threads: int | None = None):
        """Build from the table; threads: the convolutions' threads (default: the available
        cores; the pixels depend on neither)."""
        self.threads = max(1, threads or available_cpus())
        self.meta = {
            k: int(v) for k, v in zip(META, np.asarray(state["meta"]).tolist(), strict=True)
        }
        n = self.meta["blocks"]
        convs = [
            (
                np.asarray(state[f"c{i}.w"]),
                np.asarray(state[f"c{i}.b"]),
                np.asarray(state[f"c{i}.s"]),
            )
            for i in range(2 * n + 2)
        ]
        s2 = self.meta["s2d"] ** 2
        self.channels = convs[0][0].shape[1] // s2 - self.meta["classes"]
        self.convs = [
            IntConv(w.astype(np.int32), b.astype(np.int32), s.astype(np.int32)) for w, b, s in convs
        ]
        self._conv0 = self._grouped_first(*convs[0])
        self.qshift = np.asarray(state["qshift"]).astype(np.int64)

    @property
    def levels(self) -> int:
        return self.meta["levels"]

    def _grouped_first(self, w: np.ndarray, b: np.ndarray, s: np.ndarray) -> IntConv:
        """Conv 0 with the s*s identical one-hot copies' weights summed: the same integer sums."""
        m = self.meta
        s2 = m["s2d"] ** 2
        w = w.astype(np.int64)
        nb = self.channels * s2
        oh = w[:, nb:].reshape(w.shape[0], m["classes"], s2, *w.shape[2:]).sum(2)
        return IntConv(np.concatenate([w[:, :nb], oh], 1).astype(np.int32), b, s)

    def forward(self, symbols: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """uint8 (8h,8w,3) from int symbols (C,h,w) and labels (h,w) in 0..classes-1: runs of
        rows on our threads, BLAS on one thread (``blas.py``)."""
        with kernel_pool(self.threads) as pool:
            return self._forward(symbols, labels, pool)

    def _forward(
        self, symbols: np.ndarray, labels: np.ndarray, pool: Executor | None
    ) -> np.ndarray:
        """The network, each convolution's rows split over the pool."""
        m = self.meta
        levels, s, classes = m["levels"], m["s2d"], m["classes"]
        par = (pool, self.threads)
        u = integer_base(symbols, levels)  # (C, H, W) int64
        c, hh, ww = u.shape
        h, w = hh // s, ww // s
        qb = np.round(u / base_step(levels)).astype(np.float32)  # exact: a power of two
        qb = unshuffle(qb.transpose(1, 2, 0), s)  # HWC, channel index c*s*s + dy*s + dx
        lab = np.maximum(labels.astype(np.int64), 0)
        lab = np.where(lab >= classes, UNKNOWN_AS, lab)  # the map's UNKNOWN: classes.py
        rep = FACTOR // s
        lab = np.repeat(np.repeat(lab, rep, axis=0), rep, axis=1)[:h, :w]
        oh = (lab[:, :, None] == np.arange(classes)[None, None, :]).astype(np.float32)
        x = np.concatenate([qb, oh], 2)
        del qb, oh
        x = np.maximum(np.round(self._conv0(x, *par)), 0)
        for i in range(m["blocks"]):
            q = self._quantise(x, i)
            hid = np.clip(np.round(self.convs[1 + 2 * i](q, *par)), 0, m["act_max"])
            del q
            x += np.round(self.convs[2 + 2 * i](hid, *par))  # IEEE fp32 addition
            del hid
        e = np.round(self.convs[-1](self._quantise(x, m["blocks"]), *par))
        del x
        detail = shuffle(e, s).transpose(2, 0, 1)  # channel c*s*s + dy*s + dx → (c, y*s+dy, x*s+dx)
        return to_pixels(u[:RGB], detail.astype(np.int64), levels).transpose(1, 2, 0)

    def _quantise(self, x: np.ndarray, i: int) -> np.ndarray:
        """The stream as conv i's input: round(x * 2**-qshift) clamped to [-Q, Q]."""
        q = x * np.float32(2.0 ** -int(self.qshift[i]))
        return np.clip(np.round(q), -self.meta["input_max"], self.meta["input_max"])


def to_pixels(u: np.ndarray, detail: np.ndarray, levels: int) -> np.ndarray:
    """round(127.5 * (u / (256 (L-1)) + 1 + detail * 2**-16)) clamped to 0..255, in integers."""
    k = 256 * (levels - 1)
    num = 255 * ((u + k) * (1 << DETAIL_SHIFT) + k * detail)
    return np.clip(round_div(num, 2 * k * (1 << DETAIL_SHIFT)), 0, 255).astype(np.uint8)


def check_table(state: dict[str, np.ndarray]) -> None:
    """Refuse a table whose accumulators could leave fp32's exact integers (ValueError)."""
    m = {k: int(v) for k, v in zip(META, np.asarray(state["meta"]).tolist(), strict=True)}
    s2 = m["s2d"] ** 2
    weights = [np.asarray(state[f"c{i}.w"]).astype(np.int64) for i in range(2 * m["blocks"] + 2)]
    biases = [np.asarray(state[f"c{i}.b"]).astype(np.int64) for i in range(2 * m["blocks"] + 2)]
    channels = weights[0].shape[1] // s2 - m["classes"]
    q_b = 256 * (m["levels"] - 1) // base_step(m["levels"])
    width = weights[0].shape[0]
    bounds_in = [np.array([q_b] * (channels * s2) + [1] * (m["classes"] * s2))]
    for _ in range(m["blocks"]):
        bounds_in += [np.full(width, m["input_max"]), np.full(width, m["act_max"])]
    bounds_in.append(np.full(width, m["input_max"]))
    worst = max(
        int(accumulator_bound(w, b, bound).max())
        for w, b, bound in zip(weights, biases, bounds_in, strict=True)
    )
    if not within_budget(worst):
        raise ValueError(f"integer generator table exceeds 2**24 (bound {worst})")


def unpack_table(packed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The stored table (weights as one zstandard block) as arrays; ValueError if malformed."""
    import zstandard

    shapes = [tuple(int(v) for v in s) for s in np.asarray(packed["weights_shape"]).tolist()]
    bits = int(np.asarray(packed["weights_bits"]))
    if bits not in (16, 32) or any(len(s) != 4 or min(s) < 1 for s in shapes):
        raise ValueError("bad weight block header")
    size = sum(math.prod(s) for s in shapes) * bits // 8
    if size > 1 << 28:
        raise ValueError("weight block too large")
    try:
        blob = zstandard.ZstdDecompressor().decompress(
            np.asarray(packed["weights_zst"]).tobytes(), max_output_size=size
        )
    except zstandard.ZstdError as exc:
        raise ValueError(f"weight block: {exc}") from None
    if len(blob) != size:
        raise ValueError("weight block has the wrong size")
    flat = np.frombuffer(blob, np.int16 if bits == 16 else np.int32).astype(np.int32)
    state = {k: np.asarray(v) for k, v in packed.items() if not k.startswith("weights_")}
    at = 0
    for i, s in enumerate(shapes):
        n = math.prod(s)
        state[f"c{i}.w"] = flat[at : at + n].reshape(s).copy()
        at += n
    return state
