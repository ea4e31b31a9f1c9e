"""Crops for docs/roi.md: semcodec --roi against semcodec without it, at equal bytes.

For each photo: the file with ``--roi`` at a quality, then the largest uniform file that is
not larger (ratecontrol.search_quality); both decoded, and a crop where the codec's ROI is
densest saved as original | uniform | ROI side by side (docs/crops/roi/roi-NAME.png). Prints the
bytes and the PSNR inside and outside the codec's ROI (its map plus margin) for each.

    .venv/bin/python tools/roi_crops.py [--kodak DIR] [--camvid DIR] [--out docs/crops/roi]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from semcodec.encoder.codec import Codec
from semcodec.encoder.ratecontrol import search_quality
from semcodec.encoder.roi import block_weights
from semcodec.encoder.roi_spec import parse_roi
from semcodec.format.tiling import pad_rgb

ROI = "pedestrian,car,bicyclist,signsymbol"
KODAK = ("kodim04", "kodim05", "kodim12", "kodim14", "kodim15")
CAMVID = ("test/0001TP_008850.webp", "test/Seq05VD_f02370.webp")
CROP = (192, 128)  # width, height


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR of two equal-sized uint8 regions."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / max(mse, 1e-10))


def _densest(mask: np.ndarray) -> tuple[int, int]:
    """Top-left corner of the CROP window holding the most ROI pixels."""
    w, h = CROP
    ii = np.pad(mask.astype(np.int64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    sums = ii[h:, w:] - ii[:-h, w:] - ii[h:, :-w] + ii[:-h, :-w]
    y, x = np.unravel_index(int(np.argmax(sums)), sums.shape)
    return int(y), int(x)


def one(codec: Codec, rgb: np.ndarray, quality: int, name: str, out: Path) -> str:
    """Write one crop image; a table row of bytes and PSNRs."""
    cfg = parse_roi(ROI)
    with_roi = codec.encode(rgb, quality=quality, roi=cfg)
    q_uni, uniform, _ = search_quality(lambda q: codec.encode(rgb, quality=q), len(with_roi))
    dec = [np.asarray(codec.decode(d).image.convert("RGB")) for d in (uniform, with_roi)]
    h, w = rgb.shape[:2]
    blocks = block_weights(codec.semantic_map(pad_rgb(rgb)), cfg) > 0
    mask = np.repeat(np.repeat(blocks, 8, 0), 8, 1)[:h, :w]
    y, x = _densest(mask)
    cw, ch = CROP
    gap = np.full((ch, 4, 3), 255, np.uint8)
    panels = [rgb, *dec]
    strip = np.concatenate(
        [p for im in panels for p in (im[y : y + ch, x : x + cw], gap)][:-1], axis=1
    )
    Image.fromarray(strip).save(out / f"roi-{name}.png", optimize=True)
    cells = [f"{name}", f"{len(uniform)} (q{q_uni})", f"{len(with_roi)} (q{quality})"]
    for d in dec:
        cells.append(f"{_psnr(rgb[mask], d[mask]):.2f} / {_psnr(rgb[~mask], d[~mask]):.2f}")
    cells.append(f"{100 * mask.mean():.0f} %")
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> None:
    """Crops of the Kodak photos with people and two CamVid test frames."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kodak", type=Path, default=Path("../shared/data/kodak"))
    ap.add_argument("--camvid", type=Path, default=Path("../shared/data/camvid"))
    ap.add_argument("--out", type=Path, default=Path("docs/crops/roi"))
    ap.add_argument("--quality", type=int, default=40)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    codec = Codec("default")
    print(
        "| image | uniform bytes | ROI bytes | uniform PSNR ROI / rest | ROI PSNR ROI / rest | ROI share |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for k in KODAK:
        rgb = np.asarray(Image.open(args.kodak / f"{k}.png").convert("RGB"))
        print(one(codec, rgb, args.quality, k, args.out), flush=True)
    for c in CAMVID:
        rgb = np.asarray(Image.open(args.camvid / c).convert("RGB"))
        print(one(codec, rgb, args.quality, Path(c).stem, args.out), flush=True)


if __name__ == "__main__":
    main()
