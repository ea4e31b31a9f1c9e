"""Straight-edged structure photos: semcodec files against header + map + AVIF of the image.

The photos are the BSDS500 test images named below: the 12 with the largest share of strong
gradients within 4 degrees of horizontal or vertical, of which the six showing buildings,
facades or steps were kept by eye (before any codec was run on them). For each photo and
semcodec quality 10..85 (the default encoder), the reference is AVIF (the `bench rd` anchor:
Pillow, 4:2:0, speed 6) of the image plus the bytes semcodec's file spends besides its
residual (header, map, gating). Prints per photo the BD-rate (PSNR, PCHIP) and, per quality,
how much larger semcodec's file is than the reference at the same PSNR (log-linear
interpolation on the reference's curve; '—' outside it).

    .venv/bin/python tools/structure_photos.py [--data ../shared/data/bsds500-test] [--out F]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcodec.bench.bdrate import bd_rate
from semcodec.bench.codecs import AvifAdapter
from semcodec.encoder.codec import Codec
from semcodec.format import container
from semcodec.format.container import LayerKind
from semcodec.metrics import psnr

PHOTOS = ("140006", "181021", "288024", "223004", "69007", "78098")
QUALITIES = (10, 25, 40, 55, 70, 85)


def measure(rgb: np.ndarray, codec: Codec, avif: AvifAdapter) -> dict:
    """One photo's BD-rate and per-quality excess over header + map + AVIF."""
    px = rgb.shape[0] * rgb.shape[1]
    analysis = codec.analyse(rgb)
    ours, side = [], 0
    for q in QUALITIES:
        data, _ = codec.finish(analysis, quality=q)
        side = len(data) - len(container.unpack(data)[1][LayerKind.RESIDUAL])
        ours.append((8 * len(data) / px, psnr(rgb, np.asarray(codec.decode(data).image))))
    ref = []
    for q in avif.default_settings:
        a = avif.encode(rgb, q)
        ref.append((8 * (len(a) + side) / px, psnr(rgb, avif.decode(a))))
    bd = bd_rate(*zip(*ref, strict=True), *zip(*ours, strict=True))
    rr, rp = np.log([r for r, _ in ref]), np.array([p for _, p in ref])
    order = np.argsort(rp)
    excess = [
        float(100 * (r / np.exp(np.interp(p, rp[order], rr[order])) - 1))
        if rp.min() <= p <= rp.max()
        else None
        for r, p in ours
    ]
    return {"bd_psnr": bd, "excess_pct": excess, "side_bytes": side}


def main(argv: Sequence[str] | None = None) -> None:
    """Every photo's BD-rate and per-quality excess, printed (and written as JSON with --out)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/bsds500-test"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    codec, avif, out = Codec("default"), AvifAdapter(), {}
    for name in PHOTOS:
        rgb = np.asarray(Image.open(args.data / f"{name}.jpg").convert("RGB"))
        out[name] = r = measure(rgb, codec, avif)
        ex = " / ".join("—" if e is None else f"{e:+.1f}" for e in r["excess_pct"])
        print(
            f"{name}: BD-rate {r['bd_psnr']:+.1f} %, per quality {ex} %, side {r['side_bytes']} B"
        )
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
