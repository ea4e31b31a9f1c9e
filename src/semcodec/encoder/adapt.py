"""Per-picture adaptation of the enhancement network: the encoder's gradient fit (ADAPT_CONFIGS).

The release's enhancement network (intgrid/enhancer.py) is trained on many pictures; for the one
being encoded, a few of its parameters can do better. The encoder fine-tunes the first layer's
class bias rows (one row of ``width`` values per class the map shows), jointly with the per-class
gains and offsets, by Adam on the mean squared error of a float copy of the integer table
(rounding left out), then rounds the change to integer steps of the layer's own activation grid
(``Update``), each entry kept within the range where the first layer's accumulators stay exact
(``IntEnhancer.update_range``). A row whose bits cost more than its error saves (estimated on the float copy,
by the rate-distortion cost the encoder's other choices use) is left out. The decoder adds those
integers to its integer table, so its pixels are exact; the encoder then checks the result with
the integer network itself (encoder/enhance.py) and keeps the update only where the file's
rate-distortion cost falls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from semcodec import runtime
from semcodec.encoder.rdcost import rd_cost
from semcodec.format.enhance import best_order, code_bits
from semcodec.intgrid import ops
from semcodec.intgrid.enhancer import (
    CENTRE,
    CORR_SHIFT,
    GAIN_ONE,
    OFFSET_UNIT,
    UPDATE_LIMIT,
    Adjust,
    IntEnhancer,
    Update,
    class_rows,
    halo_bands,
)

MIN_PIXELS = 256  # a class with fewer pixels keeps its trained row


@dataclass(frozen=True)
class AdaptConfig:
    """How hard the encoder fits the network to a picture."""

    steps: int  # Adam steps on the float copy
    exponent: int = 3  # the update's step: 2**exponent activation units
    lr: float = 2.0  # Adam's step on the rows, in activation units
    lr_gain: float = 0.01  # on the gains (1.0 = the network as trained)
    lr_offset: float = 0.05  # on the offsets (levels)
    bands: int = 1  # each step sees one of this many bands of rows in turn (1: the picture)


#: The adaptations measured (tools/enhance_adapt.py): every step on the whole picture (effort 8
#: until 2026-12-07, chosen on held-out BSDS500 training photos) and each step on a quarter of
#: its rows (effort 9 until then).
WHOLE = AdaptConfig(steps=30, exponent=4)
BANDED = AdaptConfig(steps=80, exponent=3, bands=4)
#: effort → the adaptation it runs: none since 2026-12-07. On 4 BSDS500 val photos and 4 CamVid
#: val frames BANDED after an AV1 speed-0 encode took 3.1 CPU-s of a picture for 0.0 / 0.1 /
#: 0.0 points of BD-rate (PSNR / MS-SSIM dB / SSIMULACRA 2), and WHOLE after speed 3 took 3.3 s
#: where speed 1 alone, 1.1 s more than speed 3, bought 1.2 / 0.5 / -0.3 points more
#: (format/residual_avif.SPEEDS): the efforts spend that CPU on AV1.
ADAPT_CONFIGS: dict[int, AdaptConfig] = {}


def adapt_config(effort: int) -> AdaptConfig | None:
    """The adaptation an effort asks for (ADAPT_CONFIGS; None: none)."""
    return ADAPT_CONFIGS.get(int(effort))


@dataclass
class FloatTable:
    """The integer table as float convolutions (exact dyadic weights), for gradients."""

    layers: list[tuple[torch.Tensor, torch.Tensor, int]]
    rows: torch.Tensor  # (classes + 1, width): the class bias at the quality, activation units
    act_max: float
    s2d: int

    @classmethod
    def of(cls, enh: IntEnhancer, quality: int) -> FloatTable:
        """The float copy of enh's table at this quality."""
        layers = []
        for conv in enh.convs:
            w, b = ops.scaled(conv.weight, conv.bias, conv.shift)
            layers.append((torch.from_numpy(w), torch.from_numpy(b), conv.pad))
        rows = torch.from_numpy(enh.bias_rows(quality))
        return cls(layers, rows, float(enh.meta["act_max"]), enh.meta["s2d"])

    def correction(self, x: torch.Tensor, idx: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """(1, 3, H, W) correction in levels of the unshuffled input x, rows changed by delta."""
        v = x
        for i, (w, b, pad) in enumerate(self.layers[:-1]):
            v = F.conv2d(v, w, b, padding=pad)
            if i == 0:
                v = v + (self.rows + delta)[idx].permute(0, 3, 1, 2)
            v = v.clamp(0, self.act_max)
        w, b, pad = self.layers[-1]
        return F.pixel_shuffle(F.conv2d(v, w, b, padding=pad), self.s2d) / (1 << CORR_SHIFT)

    def band_correction(
        self,
        x: torch.Tensor,
        idx: torch.Tensor,
        delta: torch.Tensor,
        band: tuple[int, int, int, int],
    ) -> torch.Tensor:
        """The correction of a band's own network rows r0..r1 (``step_bands``), run with its
        halo a..b: the whole picture's correction on those rows."""
        a, b, r0, r1 = band
        top = (r0 - a) * self.s2d
        corr = self.correction(x[:, :, a:b], idx[:, a:b], delta)
        return corr[..., top : top + (r1 - r0) * self.s2d, :]


def pixel_classes(labels: np.ndarray, classes: int, scale: int) -> torch.Tensor:
    """(1, h, w) class rows of the map at 1/scale of the picture (unknown: the last row)."""
    return torch.from_numpy(class_rows(labels, classes, 8 // scale))[None]


def image_tensor(rgb: np.ndarray) -> torch.Tensor:
    """(1, 3, H, W) float pixels."""
    return torch.from_numpy(np.array(rgb, np.float32)).permute(2, 0, 1)[None]


@torch.no_grad()
def quantised(
    delta: torch.Tensor, active: torch.Tensor, exponent: int, enh: IntEnhancer
) -> np.ndarray:
    """The rows' change in integer steps (zero outside the active classes), within the range
    that keeps the integer network exact."""
    lo, hi = enh.update_range()
    step = 2.0**exponent
    low = np.maximum(np.ceil(lo / step), -UPDATE_LIMIT)
    high = np.minimum(np.floor(hi / step), UPDATE_LIMIT)
    q = np.clip(np.round(delta.numpy().astype(np.float64) / step), low, high)
    return (q * active.numpy()[:, None]).astype(np.int64)


# one thread: split sums add in another order, and 80 Adam steps carry that to the rounded
# update, so the file would depend on the thread count
@runtime.single_thread()
def fit_update(
    enh: IntEnhancer,
    original: np.ndarray,
    decoded: np.ndarray,
    labels: np.ndarray,
    quality: int,
    start: Adjust,
    cfg: AdaptConfig,
    file_bytes: int,
) -> Update | None:
    """Gradient steps on the class bias rows (and gains, offsets) for this picture, rounded to
    an Update the integer network accepts, the rows that do not pay for their bits (in a file
    of about ``file_bytes``) left out; None when nothing is left."""
    h, w = decoded.shape[:2]
    table = FloatTable.of(enh, quality)
    s = table.s2d
    gh, gw = labels.shape
    rows = np.minimum(np.arange(gh * 8), h - 1)
    cols = np.minimum(np.arange(gw * 8), w - 1)
    padded = decoded[rows][:, cols].astype(np.int16) - CENTRE  # the map's grid, as the decoder
    x = torch.from_numpy(ops.unshuffle(padded, s).astype(np.float32)).permute(2, 0, 1)[None]
    idx = pixel_classes(labels, enh.classes, s)
    pix = pixel_classes(labels, enh.classes, 1)[:, :h, :w]
    counts = torch.bincount(pix.flatten(), minlength=enh.classes + 1)
    active = (counts >= MIN_PIXELS).float()
    dec, orig = image_tensor(decoded), image_tensor(original)
    delta = torch.zeros_like(table.rows, requires_grad=True)
    gains = torch.tensor(start.gains / GAIN_ONE, dtype=torch.float32, requires_grad=True)
    offs = torch.tensor(start.offsets / OFFSET_UNIT, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam(
        [
            {"params": [delta], "lr": cfg.lr},
            {"params": [gains], "lr": cfg.lr_gain},
            {"params": [offs], "lr": cfg.lr_offset},
        ]
    )
    lo, hi = (torch.from_numpy(v.astype(np.float32)) for v in enh.update_range())
    bands = step_bands(x.shape[2], cfg.bands, enh.reach)
    for i in range(cfg.steps):
        opt.zero_grad()
        band = bands[i % len(bands)]
        _, _, r0, r1 = band
        y0, y1 = r0 * s, min(h, r1 * s)
        corr = table.band_correction(x, idx, delta * active[:, None], band)[..., : y1 - y0, :w]
        cls = pix[:, y0:y1]
        out = dec[..., y0:y1, :] + gains[cls][:, None] * corr + offs[cls].permute(0, 3, 1, 2)
        loss = ((out - orig[..., y0:y1, :]) ** 2).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():  # the integer network's range: a projected gradient step
            delta.copy_(torch.maximum(torch.minimum(delta, hi), lo))
    steps = quantised(delta.detach(), active, cfg.exponent, enh)
    fit = Fit(table, x, idx, pix, dec, orig, gains.detach(), offs.detach())
    steps = paying_rows(fit, steps, cfg.exponent, quality, file_bytes)
    if not steps.any():
        return None
    update = Update(steps, cfg.exponent)
    try:
        enh.check_update(update)
    except ValueError:
        return None
    return update


def step_bands(rows: int, parts: int, halo: int) -> list[tuple[int, int, int, int]]:
    """(first, last) network rows each step runs, halo included, and the (first, last) rows
    of its band: ``parts`` bands of about equal height (the picture when 1 or too short)."""
    parts = max(1, min(parts, rows))
    return halo_bands([rows * k // parts for k in range(parts + 1)], halo)


@dataclass
class Fit:
    """One picture's tensors and the fitted gains and offsets: what a row's worth is judged by."""

    table: FloatTable
    x: torch.Tensor
    idx: torch.Tensor
    pix: torch.Tensor  # (1, H, W) class row per pixel
    dec: torch.Tensor
    orig: torch.Tensor
    gains: torch.Tensor
    offs: torch.Tensor

    @torch.no_grad()
    def errors(self, delta: torch.Tensor) -> torch.Tensor:
        """(1, H, W) squared error summed over colours with the rows changed by delta."""
        h, w = self.dec.shape[-2:]
        corr = self.table.correction(self.x, self.idx, delta)[..., :h, :w]
        out = self.dec + self.gains[self.pix][:, None] * corr
        out = out + self.offs[self.pix].permute(0, 3, 1, 2)
        return ((out - self.orig) ** 2).sum(1)


def paying_rows(
    fit: Fit, steps: np.ndarray, exponent: int, quality: int, file_bytes: int
) -> np.ndarray:
    """The update without the rows whose squared error saved (on their class's pixels, float
    copy) is worth less than their bits, by rdcost.rd_cost around the whole update."""
    delta = torch.from_numpy(steps.astype(np.float32) * 2.0**exponent)
    err_with = fit.errors(delta)
    saved = torch.zeros(len(steps), dtype=torch.float64)
    saved.index_add_(0, fit.pix.flatten(), (fit.errors(delta * 0) - err_with).flatten().double())
    n = err_with.numel() * 3
    mse, bits = float(err_with.sum()) / n, 8.0 * file_bytes
    order = best_order(steps[steps.any(axis=1)])
    keep = steps.copy()
    base = rd_cost(bits, mse, quality)
    for k in np.flatnonzero(steps.any(axis=1)):
        row_bits = len(code_bits(steps[k], order)) + 1  # and its bit of the row mask
        without = rd_cost(bits - row_bits, mse + float(saved[k]) / n, quality)
        if without <= base:
            keep[k] = 0
    return keep
