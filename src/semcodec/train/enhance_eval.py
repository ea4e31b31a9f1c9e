"""Held-out gains of a bundle's enhancement network, as a release would deliver them.

Three figures on the held-out training pictures (never Kodak): the float network (the training
ledger's measure, train/enhance.py `evaluate`), its integer form with the trained gains, and
the integer form with the encoder's per-file fit (encoder/enhance.py `choose`: per-class gains,
tile mask). The last is what a file gets before the layer's bytes
are counted; candidates for a release are chosen on it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from semcodec.encoder.enhance import choose
from semcodec.intgrid.enhancer import IntEnhancer, neutral
from semcodec.metrics import psnr
from semcodec.train.enhance import evaluate, held_pictures


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


def held_out_gains(bundle, shards: list[dict]) -> HeldOutGains:
    """The three gains of ``bundle``'s enhancement network on the held-out ``shards``."""
    if bundle.enhancer is None or bundle.enh_table is None:
        raise ValueError("the bundle has no enhancement network")
    floats = evaluate(bundle.enhancer.float(), shards)
    integer = IntEnhancer(bundle.enh_table, threads=1)
    before, intg, fit = [], [], []
    for original, decoded, labels, q in held_pictures(shards):
        before.append(psnr(original, decoded))
        intg.append(psnr(original, integer.enhance(decoded, labels, q, neutral(integer.classes))))
        fit.append(psnr(original, choose(integer, original, decoded, labels, q).picture))
    base = float(np.mean(before))
    return HeldOutGains(
        pictures=len(intg),
        psnr_before=base,
        float_gain=floats["psnr_after"] - floats["psnr_before"],
        integer_gain=float(np.mean(intg)) - base,
        fitted_gain=float(np.mean(fit)) - base,
    )
