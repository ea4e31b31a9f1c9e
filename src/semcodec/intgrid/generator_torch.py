"""A4 on an integer grid: the decoder's generator, bit-exact on every CPU and thread count.

A float generator's output depends on the order in which its convolutions add products, and
that order changes with the instruction set (AVX2, AVX-512, AMX kernels) and the thread count.
This module runs the trained s2d generator on fixed integer grids instead:

- the base is the 8x bilinear upsampling of the decoded symbols, computed in integers (its
  weights are sixteenths), so the skip path of the reconstruction is exact;
- every convolution sees integer inputs bounded by clamping (``|q| <= Q`` for the residual
  stream, ``0 <= h <= H`` after a ReLU, the base quantised to about 240 steps, the one-hot map)
  and integer weights whose per-channel L1 norm keeps ``sum |w| * max|input| + |bias| < 2**24``.
  Every partial sum of an fp32 convolution is then an exactly representable integer, so its
  result is exact whatever the summation order, blocking, FMA use or threading of the kernel
  (true of direct and GEMM kernels; never of Winograd or FFT ones, which torch's CPU
  convolutions do not use);
- between layers values move from grid to grid by powers of two and round half to even;
  the residual stream adds in IEEE fp32; the output pixel is an integer rounding division.

docs/format.md specifies the arithmetic for other decoders; ``TorchIntegerGenerator.state`` is
the integer table a bundle stores (weights, biases, shifts), never recomputed from float weights.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.intgrid import generator, ops

ACC_LIMIT = ops.ACC_LIMIT  # largest |partial sum| an fp32 accumulator holds exactly
FACTOR = generator.FACTOR  # compact layer → pixels
DETAIL_SHIFT = generator.DETAIL_SHIFT  # the last conv's grid: 2**-16 of the [-1, 1] range
base_step = generator.base_step


@dataclass(frozen=True)
class IntegerGridSpec:
    """Bounds of the integer grids (what the L1 budget of every layer's weights is sized for)."""

    act_max: int = 511  # H: ReLU outputs are integers in [0, H]
    input_max: int = 511  # Q: the residual stream enters each conv as integers in [-Q, Q]
    stream_bits: int = 21  # calibrated |stream| maps to about 2**stream_bits stream units
    quantile: float = 1.0  # calibration statistic of each activation (1.0: the maximum)


def _axis_taps(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source indices and sixteenth weights of torch's 8x bilinear (align_corners=False) on n."""
    i = torch.arange(FACTOR * n, dtype=torch.int64)
    src16 = (2 * i - (FACTOR - 1)).clamp(min=0)  # (i + 0.5) / 8 - 0.5 in sixteenths, >= 0
    i0 = src16 // 16
    frac = src16 % 16
    i1 = (i0 + 1).clamp(max=n - 1)
    return i0, i1, frac


def integer_base(symbols: torch.Tensor, levels: int) -> torch.Tensor:
    """u = 2 * bilinear8(symbols) * 256 - 256 (levels - 1): the base in units of 1/(256 (levels - 1)).

    symbols (B,C,h,w) int64 in [0, levels-1]; returns int64 (B,C,8h,8w) in ±256 (levels - 1).
    Equal to torch's bilinear upsampling of the dequantised symbols times 256 (levels - 1),
    without its rounding.
    """
    s = symbols.to(torch.int64)
    h, w = s.shape[-2:]
    y0, y1, fy = _axis_taps(h)
    x0, x1, fx = _axis_taps(w)
    rows = s[..., y0, :] * (16 - fy)[:, None] + s[..., y1, :] * fy[:, None]
    b = rows[..., x0] * (16 - fx) + rows[..., x1] * fx  # sum of weights 256
    return 2 * b - 256 * (levels - 1)


def _round_div(num: torch.Tensor, den: int) -> torch.Tensor:
    """num / den rounded half to even, exactly (ops.round_div on int64 tensors)."""
    return torch.from_numpy(ops.round_div(num.to(torch.int64).numpy(), den))


@dataclass
class TorchIntConv:
    """ops.IntConv on torch's fp32 convolutions: out = round((sum w*q + b) * 2**-shift[c])
    (before clamping), the same integers."""

    weight: torch.Tensor  # int32 (out, in, k, k)
    bias: torch.Tensor  # int32 (out,)
    shift: torch.Tensor  # int32 (out,): the output grid relative to the accumulator's

    def __post_init__(self) -> None:
        """Scale the integers by their power of two once: fp32 results stay exact dyadics."""
        w, b = ops.scaled(self.weight.numpy(), self.bias.numpy(), self.shift.numpy())
        self._w, self._b = torch.from_numpy(w), torch.from_numpy(b)
        self._pad = self.weight.shape[-1] // 2

    def __call__(self, q: torch.Tensor) -> torch.Tensor:
        """The exact scaled accumulator (fp32), not yet rounded."""
        return F.conv2d(q, self._w, self._b, padding=self._pad)


@contextlib.contextmanager
def ieee_fp32() -> Iterator[None]:
    """Keep fp32 convolutions in fp32 (no implicit bf16/tf32 down-conversion of the inputs)."""
    mk = torch.backends.mkldnn
    prev = getattr(mk, "fp32_precision", None)
    try:
        if prev is not None and prev not in ("none", "ieee"):
            mk.fp32_precision = "ieee"
        yield
    finally:
        if prev is not None and mk.fp32_precision != prev:
            mk.fp32_precision = prev


class TorchIntegerGenerator:
    """The integer generator in torch (the twin of generator.IntegerGenerator, the same pixels);
    ``forward`` gives uint8 pixels."""

    def __init__(self, state: dict[str, torch.Tensor]):
        """Build from the integer table a bundle stores (see ``state``)."""
        self.meta = {k: int(v) for k, v in zip(_META, state["meta"].tolist(), strict=True)}
        n = self.meta["blocks"]
        self.convs = [
            TorchIntConv(state[f"c{i}.w"], state[f"c{i}.b"], state[f"c{i}.s"])
            for i in range(2 * n + 2)
        ]
        self.qshift = state["qshift"].to(torch.int64)  # per block input and the last conv
        self.state = state
        self._conv0 = _grouped_first(
            self.convs[0], self.channels, self.meta["classes"], self.meta["s2d"]
        )

    @property
    def levels(self) -> int:
        return self.meta["levels"]

    @property
    def channels(self) -> int:
        """Compact channels conv 0 reads, from its shape: (in - classes * s2d^2) / s2d^2."""
        s2 = self.meta["s2d"] ** 2
        return self.convs[0].weight.shape[1] // s2 - self.meta["classes"]

    def check(self) -> None:
        """Refuse a table whose accumulators could leave fp32's exact integers."""
        generator.check_table({k: v.numpy() for k, v in self.state.items()})

    @torch.no_grad()
    def forward(self, symbols: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """uint8 (B,3,8h,8w) reconstruction from int symbols (B,C,h,w) and labels (B,h',w')."""
        m = self.meta
        levels, s, classes = m["levels"], m["s2d"], m["classes"]
        with ieee_fp32():
            u = integer_base(symbols, levels)
            h, w = u.shape[-2] // s, u.shape[-1] // s
            qb = torch.round(u.double() / base_step(levels)).float()  # exact: a power of two
            lab = labels.long().clamp(min=0)
            lab = torch.where(lab >= classes, generator.UNKNOWN_AS, lab)  # UNKNOWN: classes.py
            oh = F.one_hot(lab, classes).permute(0, 3, 1, 2)
            # the map is constant on 8x8 blocks: its s*s unshuffled copies are one channel at 1/s
            oh = F.interpolate(oh.float(), size=(h, w), mode="nearest")
            x = torch.cat([F.pixel_unshuffle(qb, s), oh], 1)
            x = x.contiguous(memory_format=torch.channels_last)  # faster convs, same sums
            del qb, oh
            x = self._conv0(x).round_().clamp_(min=0)  # the residual stream, integer units
            for i in range(m["blocks"]):
                q = self._quantise(x, i)
                h = self.convs[1 + 2 * i](q).round_().clamp_(0, m["act_max"])
                del q
                x.add_(self.convs[2 + 2 * i](h).round_())  # IEEE fp32 addition
                del h
            e = self.convs[-1](self._quantise(x, m["blocks"])).round_()
            del x
            detail = F.pixel_shuffle(e, s).to(torch.int64)  # in units of 2**-DETAIL_SHIFT
        return _to_pixels(u[:, : generator.RGB], detail, levels)

    def forward_numpy(self, symbols: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """The decoder's call (decoder.GeneratorFn), as generator.IntegerGenerator.forward:
        symbols (C,h,w) and labels (h,w) in, uint8 (8h,8w,3) out."""
        from semcodec import runtime

        sym = torch.from_numpy(np.ascontiguousarray(symbols, np.int64))[None]
        lab = torch.from_numpy(np.ascontiguousarray(labels, np.int64))[None]
        with runtime.network_heap():
            v = self.forward(sym, lab)[0]
        return v.permute(1, 2, 0).numpy()

    def _quantise(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """The stream as conv i's input: round(x * 2**-qshift) clamped to [-Q, Q]."""
        q = x * float(2.0 ** -int(self.qshift[i]))
        return q.round_().clamp_(-self.meta["input_max"], self.meta["input_max"])


def _grouped_first(conv: TorchIntConv, base: int, classes: int, s: int) -> TorchIntConv:
    """Conv 0 with the s*s identical one-hot copies' weights summed: the same integer sums."""
    w = conv.weight.to(torch.int64)
    nb = base * s * s
    oh = w[:, nb:].reshape(w.shape[0], classes, s * s, *w.shape[2:]).sum(2)
    return TorchIntConv(torch.cat([w[:, :nb], oh], 1).to(torch.int32), conv.bias, conv.shift)


def _to_pixels(u: torch.Tensor, detail: torch.Tensor, levels: int) -> torch.Tensor:
    """round(127.5 * (u / (256 (L-1)) + 1 + detail * 2**-16)) clamped to 0..255, in integers."""
    k = 256 * (levels - 1)
    num = 255 * ((u + k) * (1 << DETAIL_SHIFT) + k * detail)
    return _round_div(num, 2 * k * (1 << DETAIL_SHIFT)).clamp_(0, 255).to(torch.uint8)


_META = generator.META


def pack_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The table as a bundle stores it: the weights as one zstandard-compressed block of
    int16 (int32 where a weight needs it), 1.8 MB instead of 6.2 MB for the default."""
    import zstandard

    names = sorted((k for k in state if k.endswith(".w")), key=lambda k: int(k[1:-2]))
    w = [state[k].to(torch.int32) for k in names]
    wide = any(int(t.abs().max()) > 32767 for t in w)
    dtype = torch.int32 if wide else torch.int16
    blob = b"".join(t.to(dtype).numpy().tobytes() for t in w)
    out = {k: v for k, v in state.items() if not k.endswith(".w")}
    out["weights_zst"] = torch.frombuffer(
        bytearray(zstandard.ZstdCompressor(level=19).compress(blob)), dtype=torch.uint8
    )
    out["weights_bits"] = torch.tensor(32 if wide else 16, dtype=torch.int64)
    out["weights_shape"] = torch.tensor([list(t.shape) for t in w], dtype=torch.int64)
    return out


def unpack_state(packed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of pack_state (intgrid.generator.unpack_table); ValueError on a malformed block."""
    arrays = generator.unpack_table({k: v.numpy() for k, v in packed.items()})
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}


def from_table(table: dict[str, np.ndarray]) -> TorchIntegerGenerator:
    """The torch integer generator of a numpy integer table (decoder parts)."""
    return TorchIntegerGenerator(
        {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in table.items()}
    )
