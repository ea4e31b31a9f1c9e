"""`make demo`: encode and decode a real photograph shipped with matplotlib, and report the numbers."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from semcodec.defaults import DEFAULT_MODEL


def demo_photo() -> Path:
    """A real photograph available offline after install (matplotlib's sample data)."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"


def main(argv: list[str] | None = None) -> int:
    """Encode at two qualities, decode, print bpp per layer, PSNR, MS-SSIM and timings."""
    import torch
    from PIL import Image

    from semcodec.encoder.codec import Codec
    from semcodec.metrics import ms_ssim, psnr

    model = os.environ.get("SEMCODEC_MODEL", DEFAULT_MODEL)
    out_dir = Path("demo-out")
    out_dir.mkdir(exist_ok=True)
    src = demo_photo()
    img = Image.open(src).convert("RGB")
    rgb = np.asarray(img)
    h, w = rgb.shape[:2]
    print(
        f"semcodec demo: {src.name} ({w}x{h}), model {model!r}, torch threads {torch.get_num_threads()}"
    )
    t = time.perf_counter()
    codec = Codec(model)
    print(f"models loaded in {time.perf_counter() - t:.2f} s (hash {codec.bundle.hash})")
    print(
        f"{'quality':>7} {'bytes':>7} {'bpp':>6} {'map':>6} {'compact':>7} {'resid':>6} {'PSNR':>6} {'MS-SSIM':>7} {'base':>5} {'enc s':>6} {'dec s':>6}"
    )
    for quality in (0, 30, 60, 90):
        t0 = time.perf_counter()
        data, stats = codec.encode_with_stats(rgb, quality=quality)
        t1 = time.perf_counter()
        res = codec.decode(data)
        t2 = time.perf_counter()
        dec = np.asarray(res.image.convert("RGB"))
        bpp = {k: 8 * v / (w * h) for k, v in stats.layer_bytes.items()}
        (out_dir / f"grace_hopper-q{quality}.sem").write_bytes(data)
        res.image.save(out_dir / f"grace_hopper-q{quality}.png")
        print(
            f"{quality:>7} {len(data):>7} {8 * len(data) / (w * h):>6.3f} {bpp.get('semantic_map', 0):>6.3f} "
            f"{bpp.get('compact', 0):>7.3f} {bpp.get('residual', 0):>6.3f} {psnr(rgb, dec):>6.2f} "
            f"{ms_ssim(rgb, dec).value:>7.4f} {_base_share(res.modes):>5} {t1 - t0:>6.2f} {t2 - t1:>6.2f}"
        )
    print(
        f"outputs in {out_dir}/ (quality 0 = base layer only: semantic map + compact representation"
        " + generator; 'base' = share of tiles whose residual is coded against it)"
    )
    return 0


def _base_share(modes) -> str:
    """Share of tiles that use the base layer: all of them when the file is not gated."""
    if modes is None:
        return "100%"
    return f"{100 * float((modes != 2).mean()):.0f}%"


if __name__ == "__main__":
    sys.exit(main())
