"""The integer enhancement network's band kernel in torch: the same integers, torch's convolutions.

Every partial sum of the table's convolutions is an integer below 2**24 times a power of two
(ops.py), so torch's fp32 direct and GEMM convolutions (never Winograd or FFT on the CPU) give
the numpy kernel's results bit for bit, whatever their blocking or thread count; ``ieee_fp32``
keeps oneDNN from rounding the inputs to bf16 or tf32. The decoder takes it when torch is
already imported (decoder.auto_enhancer), as it does for the generator.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.intgrid import ops
from semcodec.intgrid.enhancer import BandKernel, IntEnhancer, network_input
from semcodec.intgrid.generator_torch import ieee_fp32


def torch_band_kernel(enh: IntEnhancer) -> BandKernel:
    """enh's network as a BandKernel running torch's fp32 convolutions (channels last)."""
    layers = []
    for conv in enh.convs:
        w, b = ops.scaled(conv.weight, conv.bias, conv.shift)
        layers.append((torch.from_numpy(w), torch.from_numpy(b), conv.pad))
    amax = float(enh.meta["act_max"])

    @torch.no_grad()
    def run(band: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        with ieee_fp32():
            x = network_input(band, enh.meta["s2d"])
            v = torch.from_numpy(x).permute(2, 0, 1)[None]
            v = v.contiguous(memory_format=torch.channels_last)
            bias = torch.from_numpy(rows[idx]).permute(2, 0, 1)[None]  # (1, width, h, w)
            for i, (w, b, pad) in enumerate(layers[:-1]):
                v = F.conv2d(v, w, b, padding=pad)
                if i == 0:
                    v.add_(bias)
                v.round_().clamp_(0, amax)
            w, b, pad = layers[-1]
            v = F.conv2d(v, w, b, padding=pad).round_()
            return v[0].permute(1, 2, 0).to(torch.int32).numpy()

    return run
