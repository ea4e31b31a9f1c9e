"""`semcodec train fix-generator`: put a bundle's generator on its integer grid (intgrid/generator_torch.py).

Why: a float generator decodes to slightly different pixels on different instruction sets and
thread counts. The integer generator is exact everywhere; its grids (the activation ranges)
are calibrated here on training photos through the real encoder, its weights rounded under
the 2**24 budget, and the resulting integer table is stored in a new bundle. Float and integer
generator are compared on held-out training photos (never the test sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
import numpy as np
import torch

from semcodec.format.tiling import MAP_SCALE
from semcodec.imageio import list_images
from semcodec.intgrid import generator_torch
from semcodec.metrics import psnr
from semcodec.models.generator import pixels, to_integer
from semcodec.train.common import bundle_option, dest_option, photos_option
from semcodec.zoo.bundles import load_bundle, save_bundle_in


def _encoded(
    model: str, images: Sequence[Path]
) -> list[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """(rgb, symbols, labels) of each image through the real encoder."""
    from semcodec.encoder.codec import Codec

    codec = Codec(model)
    out = []
    for im in images:
        a = codec.analyse(im)
        sym = torch.from_numpy(a.symbols.astype(np.int64))[None]
        lab = torch.from_numpy(a.labels.astype(np.int64))[None]
        out.append((a.img.rgb, sym, lab))
    return out


def compare(
    bundle_gen: torch.nn.Module,
    integer: generator_torch.TorchIntegerGenerator,
    levels: int,
    held_out: list,
) -> dict:
    """Mean PSNR of the float and the integer generator, and between them, on held-out images."""
    from semcodec.models.compnet import dequantize

    pf, pq, pd = [], [], []
    for rgb, sym, lab in held_out:
        h, w = rgb.shape[:2]
        with torch.no_grad():
            v, _ = bundle_gen(
                dequantize(sym, levels), lab, (sym.shape[-2] * MAP_SCALE, sym.shape[-1] * MAP_SCALE)
            )
        vf = pixels(v[0]).permute(1, 2, 0).numpy()
        vq = integer.forward(sym, lab)[0].permute(1, 2, 0).numpy()
        vf, vq = vf[:h, :w], vq[:h, :w]
        pf.append(psnr(rgb, vf))
        pq.append(psnr(rgb, vq))
        pd.append(psnr(vf, vq))
    return {
        "held_out_images": len(held_out),
        "psnr_float": float(np.mean(pf)),
        "psnr_integer": float(np.mean(pq)),
        "psnr_float_vs_integer": float(np.mean(pd)),
    }


def fix_bundle(
    bundle_path: Path,
    photos: Sequence[Path],
    dest: Path,
    calibration: int = 12,
    held_out: int = 8,
    spec: generator_torch.IntegerGridSpec | None = None,
    source: str = "",
) -> tuple[Path, dict]:
    """Write '<dest>/<name>-<sha8>.pt': the same networks plus the integer generator table."""
    spec = spec or generator_torch.IntegerGridSpec()
    bundle = load_bundle(str(bundle_path))
    data = _encoded(str(bundle_path), list(photos[:calibration]) + list(photos[-held_out:]))
    cal, val = data[:calibration], data[calibration:]
    integer = to_integer(bundle.gen, bundle.levels, [(s, lab) for _, s, lab in cal], spec)
    record = {
        "calibration_images": len(cal),
        "source": source,
        "act_max": spec.act_max,
        "input_max": spec.input_max,
        **compare(bundle.gen, integer, bundle.levels, val),
    }
    info = dict(bundle.info)
    info["integer_generator"] = record
    path = save_bundle_in(
        dest, bundle.spec, bundle.seg, bundle.comp, bundle.gen, bundle.compact_table, info,
        generator_table=integer.state,
    )  # fmt: skip
    return path, record


@click.command("fix-generator")
@bundle_option("whose generator to put on the integer grid")
@photos_option(": the first N calibrate, the last M are held out")
@click.option("--calibration", type=int, default=12, show_default=True)
@click.option("--held-out", type=int, default=8, show_default=True)
@dest_option
def fix_generator_command(bundle_path, photos, calibration, held_out, dest):
    """Calibrate and store a bundle's integer generator (bit-exact decoding)."""
    files = list_images(photos)
    if len(files) < calibration + held_out:
        raise click.UsageError(f"need {calibration + held_out} images in {photos}")
    out, rec = fix_bundle(bundle_path, files, dest, calibration, held_out, source=str(photos))
    click.echo(
        f"wrote {out}: held-out PSNR float {rec['psnr_float']:.3f} dB, integer "
        f"{rec['psnr_integer']:.3f} dB (float vs integer {rec['psnr_float_vs_integer']:.1f} dB)"
    )


if __name__ == "__main__":
    fix_generator_command()
