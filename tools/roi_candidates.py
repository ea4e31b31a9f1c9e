"""The candidate means for semantic ROI coding, measured on CamVid val (docs/roi.md, table
"Candidates"): libaom's rate guide at several ratios, background blur alone, both, and the
native coder at uniform quality, each against AVIF 4:4:4 of the image at uniform quality.

The codec's own map (its blocks of the ROI classes grown by one block) steers; the ground
truth measures. Pooled PSNR per quality; BD-rates (PCHIP) against the uniform curve. Needs
scipy (the ``[bench]`` extra pulls it in).

    .venv/bin/python tools/roi_candidates.py [--data ../shared/data/camvid] [--every 10]
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.ndimage import binary_dilation, gaussian_filter

from semcodec.bench.bdrate import bd_rate
from semcodec.codec import Codec
from semcodec.roi import guide_file

ROI = [6, 8, 9, 10]  # signsymbol, car, pedestrian, bicyclist
QUALITIES = (20, 30, 40, 50, 60, 70, 80)


def avif(img: np.ndarray, q: int, advanced: dict | None = None) -> bytes:
    """AVIF 4:4:4 at speed 6, one thread: what semcodec's residual coder runs."""
    buf = io.BytesIO()
    extra = {} if advanced is None else {"advanced": advanced}
    Image.fromarray(img).save(
        buf, "AVIF", quality=q, speed=6, subsampling="4:4:4", max_threads=1, range="full", **extra
    )
    return buf.getvalue()


def mask(labels: np.ndarray, h: int, w: int, margin: int = 1) -> np.ndarray:
    """The codec's ROI at pixel resolution."""
    m = binary_dilation(np.isin(labels, ROI), iterations=margin) if margin else np.isin(labels, ROI)
    return np.kron(m, np.ones((8, 8), bool))[:h, :w]


def blur(sigma: float, margin: int = 1, share: float = 1.0) -> Callable:
    """Pre-filter: the background blurred by sigma px (mixed in at ``share``)."""

    def prep(im: np.ndarray, labels: np.ndarray) -> np.ndarray:
        h, w = im.shape[:2]
        a = gaussian_filter(mask(labels, h, w, margin).astype(float), 4)[..., None]
        b = np.stack([gaussian_filter(im[..., c].astype(float), sigma) for c in range(3)], -1)
        b = share * b + (1 - share) * im
        return np.clip(np.round(a * im + (1 - a) * b), 0, 255).astype(np.uint8)

    return prep


def run(frames, prep=None, ratio: float | None = None, margin: int = 1, native: bool = False):
    """bpp and pooled ROI / background / whole PSNR per quality of one candidate."""
    from semcodec.entropy.residual import get_backend

    nat = get_backend("native")
    out = {"bpp": [], "roi": [], "bg": [], "whole": []}
    for q in QUALITIES:
        bits, err = 0, {"roi": [0.0, 0], "bg": [0.0, 0], "whole": [0.0, 0]}
        for im, gt, labels in frames:
            h, w = im.shape[:2]
            x = prep(im, labels) if prep else im
            if native:
                data = nat.encode(x.astype(np.int16) - 128, max(1, q - 10))
                dec = np.clip(nat.decode(data, h, w) + 128, 0, 255)
            elif ratio is None:
                data = avif(x, q)
                dec = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
            else:
                rows, cols = -(-h // 16), -(-w // 16)
                m = np.zeros((rows * 16, cols * 16), bool)
                m[:h, :w] = mask(labels, h, w, margin)
                guide = np.where(m.reshape(rows, 16, cols, 16).any((1, 3)), ratio, 1.0)
                with guide_file(guide) as path:
                    adv = {"deltaq-mode": "3", "enable-rate-guide-deltaq": "1",
                           "rate-distribution-info": path}  # fmt: skip
                    data = avif(x, q, adv)
                dec = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
            bits += 8 * (len(data) + 200)  # header and map, as a .sem file carries
            e = ((im.astype(float) - dec) ** 2).mean(2)
            g = np.isin(gt, ROI)
            for k, sel in (("roi", g), ("bg", ~g), ("whole", np.ones_like(g))):
                err[k][0] += float(e[sel].sum())
                err[k][1] += int(sel.sum())
        out["bpp"].append(bits / sum(f[0].shape[0] * f[0].shape[1] for f in frames))
        for k, (s, n) in err.items():
            out[k].append(10 * np.log10(255.0**2 / (s / n)))
    return out


def main() -> None:
    """Every candidate of the table, printed as BD-rates against uniform AVIF 4:4:4."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/camvid"))
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args()
    codec = Codec("default")
    pairs = [ln.split() for ln in (args.data / "val.txt").read_text().split("\n") if ln.strip()]
    frames = []
    for a, b in pairs[:: args.every][: args.limit]:
        im = np.asarray(Image.open(args.data / a).convert("RGB"))
        frames.append((im, np.asarray(Image.open(args.data / b)), codec.semantic_map(im)))
    uniform = run(frames)
    candidates = {
        "(a) rate guide 10:1": dict(ratio=10),
        "(a) rate guide 30:1": dict(ratio=30),
        "(a) rate guide 1000:1": dict(ratio=1000),
        "(a) rate guide 1000:1, margin 2": dict(ratio=1000, margin=2),
        "(d) blur 2 px": dict(prep=blur(2)),
        "(d) blur 4 px": dict(prep=blur(4)),
        "(a)+(d) 0.5 px": dict(prep=blur(0.5), ratio=1000),
        "(a)+(d) 0.7 px": dict(prep=blur(0.7), ratio=1000),
        "(a)+(d) 1 px": dict(prep=blur(1), ratio=1000),
        "(a)+(d) 50 % of 2 px": dict(prep=blur(2, share=0.5), ratio=1000),
        "(a)+(d) 2 px": dict(prep=blur(2), ratio=1000),
        "(c) native, uniform": dict(native=True),
    }
    for name, kw in candidates.items():
        r = run(frames, **kw)
        bds = [bd_rate(uniform["bpp"], uniform[k], r["bpp"], r[k]) for k in ("roi", "bg", "whole")]
        print(
            f"{name:32s} ROI {bds[0]:+6.1f} %  background {bds[1]:+6.1f} %  whole {bds[2]:+6.1f} %"
        )


if __name__ == "__main__":
    main()
