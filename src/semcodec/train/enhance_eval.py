"""Held-out gains of a bundle's enhancement network, as a release would deliver them.

Three figures on the held-out training pictures (never Kodak): the float network, its integer
form with the trained gains, and the integer form with the encoder's per-file fit
(encoder/enhance.py `choose`: per-class gains, offsets from ADAPT_EFFORT, tile mask). The last
is what a file gets before the layer's bytes are counted; candidates for a release are chosen
on it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from semcodec.encoder.enhance import choose
from semcodec.format.tiling import MAP_SCALE
from semcodec.intgrid.enhancer import IntEnhancer, neutral


@dataclass(frozen=True)
class HeldOutGains:
    """Mean PSNR of the decoded pictures and the gain (dB) of each form of the network."""

    pictures: int
    psnr_before: float
    float_gain: float
    integer_gain: float
    fitted_gain: float

    def as_dict(self) -> dict:
        return asdict(self)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two 0..255 pictures."""
    mse = float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean())
    return 10 * np.log10(255.0**2 / max(mse, 1e-10))


def pictures_of(shards: list[dict]):
    """(original, decoded, labels, quality) of every picture, cut to the map's 8-pixel grid."""
    for s in shards:
        h, w = (d // MAP_SCALE * MAP_SCALE for d in s["original"].shape[:2])
        for k in range(len(s["quality"])):
            labels = s["labels"][k, : h // MAP_SCALE, : w // MAP_SCALE].astype(np.int64)
            yield s["original"][:h, :w], s["decoded"][k, :h, :w], labels, int(s["quality"][k])


@torch.no_grad()
def float_picture(net, decoded: np.ndarray, labels: np.ndarray, quality: int) -> np.ndarray:
    """The float network's enhanced picture, rounded to levels."""
    d = torch.from_numpy(np.ascontiguousarray(decoded)).permute(2, 0, 1)[None].float()
    m = torch.from_numpy(labels)[None]
    e = net(d, m, torch.tensor([quality])).round().clamp(0, 255)
    return e[0].permute(1, 2, 0).numpy().astype(np.uint8)


def held_out_gains(bundle, shards: list[dict], effort: int = 5) -> HeldOutGains:
    """The three gains of ``bundle``'s enhancement network on the held-out ``shards``."""
    if bundle.enhancer is None or bundle.enh_table is None:
        raise ValueError("the bundle has no enhancement network")
    net = bundle.enhancer.float().eval()
    integer = IntEnhancer(bundle.enh_table, threads=1)
    before, flo, intg, fit = [], [], [], []
    for original, decoded, labels, q in pictures_of(shards):
        before.append(psnr(decoded, original))
        flo.append(psnr(float_picture(net, decoded, labels, q), original))
        intg.append(psnr(integer.enhance(decoded, labels, q, neutral(integer.classes)), original))
        fitted = choose(integer, original, decoded, labels, q, effort).picture
        fit.append(psnr(fitted, original))
    base = float(np.mean(before))
    return HeldOutGains(
        pictures=len(before),
        psnr_before=base,
        float_gain=float(np.mean(flo)) - base,
        integer_gain=float(np.mean(intg)) - base,
        fitted_gain=float(np.mean(fit)) - base,
    )
