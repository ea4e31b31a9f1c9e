"""Enhancement adaptation: -e 8 / -e 9 files with the gradient update against the closed form.

No effort adapts since 2026-12-07 (encoder/adapt.ADAPT_CONFIGS); this measures what it would buy.
For each photo, quality and effort, the file without its ENHANCE layer is made once; then the
encoder's ENHANCE step (encoder/enhance.enhanced_file) runs twice: with the per-class gains and
offsets alone (the closed form) and with an adaptation (``ADAPTATIONS``: the network's update
where it pays). Both files are decoded by the real decoder and scored (PSNR, MS-SSIM,
SSIMULACRA 2); the ENHANCE step's CPU seconds (one torch thread) are recorded. One JSON line
per photo, quality and effort, then a table: per quality and effort the means of the
differences, and per effort the BD-rate of the adapted files against the closed form (PCHIP on
the per-quality means, PSNR, MS-SSIM in dB and SSIMULACRA 2).

    .venv/bin/python tools/enhance_adapt.py IMAGES... [--qualities 30,60,90] [--out F.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from semcodec import metrics
from semcodec.bench.bdrate import bd_rate_result
from semcodec.encoder import adapt, enhance
from semcodec.encoder.codec import Codec
from semcodec.encoder.options import EncodeOptions
from semcodec.format import container
from semcodec.format.container import LayerKind

EFFORTS = (8, 9)
KINDS = ("closed", "adapt")
#: effort → the adaptation measured: as efforts 8 and 9 ran it until 2026-12-07
ADAPTATIONS = {8: adapt.WHOLE, 9: adapt.BANDED}


def scores(codec: Codec, rgb: np.ndarray, data: bytes) -> dict:
    """The file's bytes and its decoded picture's metrics."""
    out = np.asarray(codec.decode(data).image)
    return {
        "bytes": len(data),
        "psnr": metrics.psnr(rgb, out),
        "msssim_db": float(metrics.msssim_to_db(metrics.ms_ssim(rgb, out).value)),
        "ssimulacra2": metrics.ssimulacra2(rgb, out),
    }


def measure(codec: Codec, rgb: np.ndarray, quality: int, effort: int) -> dict:
    """One photo at one quality and effort: both files' scores, layer bytes and CPU seconds."""
    plain, _ = codec.finish(codec.analyse(rgb), quality=quality, effort=effort, enhance=False)
    header, layers = container.unpack(plain)
    opts = EncodeOptions(quality=quality, effort=effort)
    shipped = adapt.ADAPT_CONFIGS
    row: dict = {"quality": quality, "effort": effort}
    try:
        for kind in KINDS:
            adapt.ADAPT_CONFIGS = ADAPTATIONS if kind == "adapt" else {}
            start = time.process_time()
            data, kept = enhance.enhanced_file(codec.decoder, plain, header, layers, rgb, opts)
            seconds = time.process_time() - start
            layer = kept.get(LayerKind.ENHANCE, b"")
            row[kind] = scores(codec, rgb, data) | {
                "enhance_cpu_s": seconds,
                "layer_bytes": len(layer),
                "update": bool(layer) and layer[0] == 2,
            }
    finally:
        adapt.ADAPT_CONFIGS = shipped
    return row


def table(rows: list[dict]) -> str:
    """Means of the differences per quality and effort, and BD-rates per effort."""
    lines = [
        "| effort | quality | files with update | update bytes | Δ bytes | Δ PSNR | Δ MS-SSIM dB "
        "| Δ SSIMULACRA 2 | ENHANCE step s (closed / adapted) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for effort in EFFORTS:
        curves: dict[str, list[list[float]]] = {k: [] for k in KINDS}
        for quality in sorted({r["quality"] for r in rows}):
            sel = [r for r in rows if r["effort"] == effort and r["quality"] == quality]
            if not sel:
                continue

            def mean(kind: str, key: str, sel: list[dict] = sel) -> float:
                return float(np.mean([r[kind][key] for r in sel]))

            def diff(key: str) -> float:
                return mean("adapt", key) - mean("closed", key)

            upd = [r for r in sel if r["adapt"]["update"]]
            extra = [r["adapt"]["layer_bytes"] - r["closed"]["layer_bytes"] for r in upd]
            lines.append(
                f"| {effort} | {quality} | {len(upd)}/{len(sel)} | "
                f"{np.mean(extra) if extra else 0:.0f} | {diff('bytes'):+.1f} | "
                f"{diff('psnr'):+.3f} | {diff('msssim_db'):+.3f} | {diff('ssimulacra2'):+.2f} | "
                f"{mean('closed', 'enhance_cpu_s'):.1f} / {mean('adapt', 'enhance_cpu_s'):.1f} |"
            )
            for kind in KINDS:
                curves[kind].append(
                    [mean(kind, k) for k in ("bytes", "psnr", "msssim_db", "ssimulacra2")]
                )
        if len(curves["closed"]) >= 3:
            c, a = np.array(curves["closed"]), np.array(curves["adapt"])
            bd = [
                bd_rate_result(c[:, 0], c[:, i], a[:, 0], a[:, i], min_points=3).value
                for i in (1, 2, 3)
            ]
            lines.append(
                f"\nBD-rate of -e {effort} adapted against closed form (PCHIP, per-quality means): "
                f"PSNR {bd[0]:+.2f} %, MS-SSIM dB {bd[1]:+.2f} %, SSIMULACRA 2 {bd[2]:+.2f} %\n"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure the photos named, print the JSON lines and the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", type=Path)
    parser.add_argument("--qualities", default="30,60,90")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    parser.add_argument("--load", type=Path, help="only print the table of earlier JSON lines")
    args = parser.parse_args(argv)
    if args.load:
        print(table([json.loads(line) for line in args.load.read_text().splitlines()]))
        return
    torch.set_num_threads(1)
    codec = Codec()
    rows = []
    for path in args.images:
        rgb = np.asarray(Image.open(path).convert("RGB"))
        for quality in (int(q) for q in args.qualities.split(",")):
            for effort in EFFORTS:
                row = {"image": path.name} | measure(codec, rgb, quality, effort)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as f:
                        f.write(json.dumps(row) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
