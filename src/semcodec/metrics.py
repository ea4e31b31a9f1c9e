"""Objective quality metrics of 8-bit RGB images: PSNR and MS-SSIM (the benchmarks, the demo and
the generator fixing all score with these), and the perceptual SSIMULACRA 2 and Butteraugli
that need no downloaded weights: SSIMULACRA 2 through the optional ``ssimulacra2`` package
(``pip install 'semcodec[bench]'``), Butteraugli through libjxl's ``butteraugli_main`` tool
where it is installed."""

from __future__ import annotations

import io
import math
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from pytorch_msssim import ms_ssim as _lib_ms_ssim

from semcodec.models.losses import (  # Wang et al. 2003, finest first
    MS_SSIM_WEIGHTS as MSSSIM_WEIGHTS,
)
from semcodec.models.losses import ms_ssim_scales

__all__ = [
    "BUTTERAUGLI_TOOL",
    "MSSSIM_WEIGHTS",
    "SSIMULACRA2_VERSION",
    "MetricUnavailable",
    "MsssimResult",
    "butteraugli",
    "butteraugli_unavailable_reason",
    "colour_shift",
    "msssim_scales",
    "msssim_to_db",
    "ms_ssim",
    "parse_butteraugli",
    "psnr",
    "ssimulacra2",
    "ssimulacra2_unavailable_reason",
]

WIN_SIZE = 11


def _check(ref: np.ndarray, test: np.ndarray) -> None:
    """Reject mismatched inputs early: a silent broadcast would give a meaningless score."""
    if ref.shape != test.shape:
        raise ValueError(f"image shapes differ: {ref.shape} vs {test.shape}")
    if ref.ndim != 3 or ref.shape[2] != 3:
        raise ValueError(f"expected (H, W, 3) RGB arrays, got {ref.shape}")
    if ref.dtype != np.uint8 or test.dtype != np.uint8:
        raise ValueError(f"expected uint8 arrays, got {ref.dtype} and {test.dtype}")


def colour_shift(ref: np.ndarray, test: np.ndarray) -> list[float]:
    """Mean of decoded − original per channel, in 8-bit levels: a colour cast or darkening
    shows here even when PSNR barely moves (a wrong normalisation layer did exactly that)."""
    _check(ref, test)
    diff = test.astype(np.float64) - ref.astype(np.float64)
    return [float(v) for v in diff.reshape(-1, 3).mean(0)]


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


# --- SSIMULACRA 2 -----------------------------------------------------------------------------

#: The pinned version of the ``ssimulacra2`` package (a Python port of libjxl's ssimulacra2).
SSIMULACRA2_VERSION = "0.3.0"
#: SSIMULACRA 2 needs at least this many pixels on each side (its first scale's 8x8 minimum).
SSIMULACRA2_MIN_SIDE = 8


class MetricUnavailable(RuntimeError):
    """An optional metric whose package or tool is not installed (the message says how to)."""


def _ssimulacra2_function():
    """The port's entry point, or a one-line install hint when the extra is missing."""
    try:
        from ssimulacra2 import compute_ssimulacra2
    except ImportError as e:
        raise MetricUnavailable(
            f"SSIMULACRA 2 needs the optional extra: pip install 'semcodec[bench]' "
            f"(ssimulacra2=={SSIMULACRA2_VERSION}, scipy) [{type(e).__name__}: {e}]"
        ) from None
    return compute_ssimulacra2


def ssimulacra2_unavailable_reason() -> str | None:
    """Why SSIMULACRA 2 cannot be computed here (None when it can): reports say, not guess."""
    try:
        _ssimulacra2_function()
    except MetricUnavailable as e:
        return str(e)
    return None


def _ppm_stream(rgb: np.ndarray) -> io.BytesIO:
    """An in-memory binary PPM: the port opens its inputs with Pillow, which takes file objects,
    so arrays reach it without temporary files or lossy steps."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, format="PPM")
    buf.seek(0)
    return buf


def ssimulacra2(ref: np.ndarray, test: np.ndarray) -> float:
    """SSIMULACRA 2 of 8-bit sRGB images (100 = identical; higher is better).

    Computed by the ``ssimulacra2`` package (a Python port of libjxl's reference ssimulacra2:
    XYB colour space, six scales, SSIM and edge-difference maps in 1- and 4-norms). The
    reference's anchors: 30 low, 50 medium, 70 high, 90 very high quality; strong distortions
    score below 0. Raises ``MetricUnavailable`` without the extra and ``ValueError`` for
    images under 8 px on a side (the port would return 100 for them, having no scale).
    """
    _check(ref, test)
    if min(ref.shape[:2]) < SSIMULACRA2_MIN_SIDE:
        raise ValueError(
            f"image {ref.shape[1]}x{ref.shape[0]} too small for SSIMULACRA 2 "
            f"(< {SSIMULACRA2_MIN_SIDE} px)"
        )
    compute = _ssimulacra2_function()
    return float(compute(_ppm_stream(ref), _ppm_stream(test)))


# --- Butteraugli ------------------------------------------------------------------------------

#: libjxl's command-line tool (Debian/Ubuntu package ``libjxl-devtools``).
BUTTERAUGLI_TOOL = "butteraugli_main"
#: Seconds one butteraugli_main call may take before it counts as failed.
BUTTERAUGLI_TIMEOUT_S = 600.0

_PNORM_LINE = re.compile(r"^\s*3-norm:\s*([-+0-9.eE]+|nan|inf)\s*$", re.MULTILINE)


def butteraugli_unavailable_reason() -> str | None:
    """Why Butteraugli cannot be computed here (None when butteraugli_main is on PATH)."""
    if shutil.which(BUTTERAUGLI_TOOL) is None:
        return (
            f"{BUTTERAUGLI_TOOL} not found on PATH (libjxl's tool; Debian/Ubuntu package "
            "libjxl-devtools)"
        )
    return None


def parse_butteraugli(output: str) -> float:
    """The 3-norm from butteraugli_main's output (its first line is the max-norm distance, then
    a line ``3-norm: X``); ValueError when the line is missing, so no number is invented."""
    m = _PNORM_LINE.search(output)
    if m is None:
        raise ValueError(f"no '3-norm:' line in {BUTTERAUGLI_TOOL} output: {output.strip()!r}")
    return float(m.group(1))


def butteraugli(ref: np.ndarray, test: np.ndarray, *, tool: str | None = None) -> float:
    """Butteraugli distance, 3-norm (lower is better; about 1 is "just noticeable"), from
    libjxl's butteraugli_main on two lossless PNGs in a temporary folder.

    Raises ``MetricUnavailable`` when the tool is not installed and ``RuntimeError`` when it
    fails.
    """
    from PIL import Image

    _check(ref, test)
    exe = tool or shutil.which(BUTTERAUGLI_TOOL)
    if exe is None:
        raise MetricUnavailable(butteraugli_unavailable_reason() or BUTTERAUGLI_TOOL)
    with tempfile.TemporaryDirectory(prefix="semcodec-butteraugli-") as tmp:
        a, b = Path(tmp) / "ref.png", Path(tmp) / "test.png"
        Image.fromarray(ref, "RGB").save(a, compress_level=1)
        Image.fromarray(test, "RGB").save(b, compress_level=1)
        proc = subprocess.run(
            [exe, str(a), str(b), "--pnorm", "3"],
            capture_output=True,
            text=True,
            timeout=BUTTERAUGLI_TIMEOUT_S,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{BUTTERAUGLI_TOOL} exited with {proc.returncode}: {proc.stderr.strip()[:200]}"
        )
    return parse_butteraugli(proc.stdout)
