"""`semcodec train calibrate-gating`: fit the gating rate proxy to the real residual coder.

For photos (never the test sets), the image itself and the model's generator residual are
coded with the AVIF residual coder at each quality. Per quality: the DCT step at which the
proxy's total bits equal the coded bits over both kinds, then each kind's coded / proxy
ratio, and the coder's own slope in dB per doubling of rate (on the images). The printed
tables are what ``gating.py`` holds.
"""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

QUALITIES = (10, 25, 40, 55, 70, 85)


def _step(rows: list[tuple[np.ndarray, int]], tile: int) -> float:
    """The step at which the proxy's bits over all rows equal their coded bits (bisection)."""
    from semcodec.encoder.gating import tile_bits

    want = sum(b for _, b in rows)
    lo, hi = np.log(0.05), np.log(2000.0)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        got = sum(tile_bits(r, float(np.exp(mid)), tile).sum() for r, _ in rows)
        lo, hi = (mid, hi) if got > want else (lo, mid)
    return float(np.exp(0.5 * (lo + hi)))


def calibrate(photos: list[Path], model: str = "default") -> list[dict]:
    """One row per quality: step, image and predicted-residual scales, slope."""
    from PIL import Image

    from semcodec.encoder.codec import Codec
    from semcodec.encoder.gating import tile_bits
    from semcodec.format.residual import get_backend
    from semcodec.format.tiling import MAP_SCALE

    codec, backend = Codec(model), get_backend("avif")
    pairs = []
    for p in photos:
        x = np.asarray(Image.open(p).convert("RGB"))
        h, w = x.shape[0] // MAP_SCALE * MAP_SCALE, x.shape[1] // MAP_SCALE * MAP_SCALE
        x = np.ascontiguousarray(x[:h, :w])
        an = codec.analyse(x)
        rec = codec.reconstruct(an.symbols, an.labels, (h, w))
        pairs.append((x, x.astype(np.int16) - 128, x.astype(np.int16) - rec.astype(np.int16)))
    out, prev = [], None
    for q in QUALITIES:
        rows_img = [(im, 8 * len(backend.encode(im, q))) for _, im, _ in pairs]
        rows_gen = [(g, 8 * len(backend.encode(g, q))) for _, _, g in pairs]
        step = _step(rows_img + rows_gen, 64)

        def ratio(rows: list[tuple[np.ndarray, int]], step: float = step) -> float:
            return float(np.mean([b / tile_bits(r, step, 64).sum() for r, b in rows]))

        bits = float(np.mean([b for _, b in rows_img]))
        psnr = []
        for x, im, _ in pairs:
            dec = np.clip(backend.decode(backend.encode(im, q), *im.shape[:2]) + 128, 0, 255)
            mse = float(np.mean((dec - x.astype(np.int16)) ** 2.0))
            psnr.append(10 * np.log10(255.0**2 / mse))
        row = {"q": q, "step": step, "image": ratio(rows_img), "predicted": ratio(rows_gen)}
        row.update(bits=bits, psnr=float(np.mean(psnr)))
        if prev is not None:
            row["slope_db"] = (row["psnr"] - prev["psnr"]) / np.log2(bits / prev["bits"])
        out.append(row)
        prev = row
    return out


@click.command("calibrate-gating")
@click.option(
    "--photos",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("../shared/data/photos"),
    show_default=True,
)
@click.option("--count", default=5, show_default=True, help="Photos used, spread over the folder.")
@click.option("--model", default="default", show_default=True)
def calibrate_gating_command(photos: Path, count: int, model: str) -> None:
    """Fit the gating rate proxy's step and scales to the AVIF residual coder."""
    from semcodec.imageio import list_images

    paths = list_images(photos)
    chosen = paths[:: max(1, len(paths) // count)][:count]
    for r in calibrate(chosen, model):
        slope = f"{r['slope_db']:.2f}" if "slope_db" in r else "-"
        click.echo(
            f"q {r['q']:>3}  step {r['step']:7.2f}  image scale {r['image']:.3f}  "
            f"predicted scale {r['predicted']:.3f}  AVIF slope {slope} dB/doubling"
        )
