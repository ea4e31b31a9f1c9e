"""Objective quality metrics of 8-bit RGB images: PSNR and MS-SSIM (the benchmarks, the demo and
the generator fixing all score with these)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from pytorch_msssim import ms_ssim as _lib_ms_ssim

from .losses import MS_SSIM_WEIGHTS as MSSSIM_WEIGHTS  # Wang et al. 2003, finest first
from .losses import ms_ssim_scales

__all__ = ["MSSSIM_WEIGHTS", "MsssimResult", "msssim_scales", "psnr", "ms_ssim", "msssim_to_db"]

WIN_SIZE = 11


def _check(ref: np.ndarray, test: np.ndarray) -> None:
    """Reject mismatched inputs early: a silent broadcast would give a meaningless score."""
    if ref.shape != test.shape:
        raise ValueError(f"image shapes differ: {ref.shape} vs {test.shape}")
    if ref.ndim != 3 or ref.shape[2] != 3:
        raise ValueError(f"expected (H, W, 3) RGB arrays, got {ref.shape}")
    if ref.dtype != np.uint8 or test.dtype != np.uint8:
        raise ValueError(f"expected uint8 arrays, got {ref.dtype} and {test.dtype}")


def msssim_to_db(msssim: float | np.ndarray) -> float | np.ndarray:
    """MS-SSIM in dB, −10·log10(1 − msssim): spreads the values near 1 where codecs differ."""
    m = np.asarray(msssim, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = -10.0 * np.log10(np.clip(1.0 - m, 0.0, None))
    return float(out) if out.ndim == 0 else out


def psnr(ref: np.ndarray, test: np.ndarray) -> float:
    """PSNR in dB of 8-bit RGB, one MSE over all pixels and channels (inf when identical)."""
    _check(ref, test)
    diff = ref.astype(np.float64) - test.astype(np.float64)
    mse = float(np.mean(diff * diff))
    if mse == 0.0:
        return math.inf
    return 10.0 * math.log10(255.0 * 255.0 / mse)


@dataclass(frozen=True)
class MsssimResult:
    """MS-SSIM value and the number of scales it used (fewer than 5 for small images)."""

    value: float
    scales: int

    @property
    def db(self) -> float:
        """The value in dB, the scale BD-rates are computed on."""
        return float(msssim_to_db(self.value))


def msssim_scales(height: int, width: int, win_size: int = WIN_SIZE) -> int:
    """Number of MS-SSIM scales an image supports: the coarsest must exceed the window.

    Scale ``n`` (1-based) sees the image downsampled ``n − 1`` times, so the short side must be
    larger than ``(win_size − 1) · 2^(n−1)``; with the 11-tap window this is 160 px for 5
    scales, 80 for 4, 40 for 3, 20 for 2 and 10 for 1.
    """
    short = min(height, width)
    n = 0
    while n < len(MSSSIM_WEIGHTS) and short > (win_size - 1) * 2**n:
        n += 1
    return n


def _to_tensor(a: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 → (1, 3, H, W) float32 in [0, 255], the layout pytorch-msssim wants."""
    return torch.from_numpy(np.array(a, dtype=np.float32)).permute(2, 0, 1).unsqueeze(0).float()


def ms_ssim(ref: np.ndarray, test: np.ndarray) -> MsssimResult:
    """MS-SSIM of 8-bit RGB (pytorch-msssim, data_range=255, 11-tap Gaussian, σ = 1.5).

    The standard 5-scale MS-SSIM needs a short side of at least 161 px.  Smaller images are
    not padded (reflect padding would invent structure the codec never saw); instead the
    coarsest scales are dropped: with ``n = msssim_scales(H, W)`` scales the first ``n`` of the
    Wang et al. weights are used, renormalised to sum to 1, and SSIM's luminance term is taken
    at scale ``n``.  ``MsssimResult.scales`` records ``n`` so reports can flag such images;
    values with different ``n`` are not strictly comparable.  Images with a short side of
    10 px or less have no valid scale and raise ``ValueError``.
    """
    _check(ref, test)
    n = msssim_scales(ref.shape[0], ref.shape[1])
    if n == 0:
        raise ValueError(f"image {ref.shape[1]}x{ref.shape[0]} too small for MS-SSIM (<= 10 px)")
    x, y = _to_tensor(ref), _to_tensor(test)
    with torch.no_grad():
        if n == len(MSSSIM_WEIGHTS):
            value = float(_lib_ms_ssim(x, y, data_range=255, size_average=True))
        else:
            # the training loss's loop (one implementation), which renormalises the weights
            value = float(ms_ssim_scales(x, y, data_range=255, scales=n).mean())
    return MsssimResult(value, n)
