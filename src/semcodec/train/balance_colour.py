"""`semcodec train balance-colour`: remove a generator's mean colour cast through its output bias.

A generator fine-tuned for a perceptual objective can drift in mean colour (the `perceptual`
fine-tune gained +1.5 grey levels of green). The cast is measured on training photos through
the bundle's own networks and subtracted from the bias of the generator's last convolution,
before the integer generator is calibrated (`train fix-generator`)."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import torch

from semcodec.imageio import list_images
from semcodec.models.compnet import quantize_ste
from semcodec.train.codec_data import compute_maps, crop8
from semcodec.train.common import bundle_option, dest_option, photos_option
from semcodec.train.data import read_images
from semcodec.zoo.bundles import ModelBundle, load_bundle, save_bundle_in


def spread_indices(total: int, count: int) -> list[int]:
    """count indices spread evenly over range(total), starting at 0."""
    step = max(1, total // count)
    return list(range(0, total, step))[:count]


@torch.no_grad()
def mean_shift(bundle: ModelBundle, images: list[np.ndarray]) -> np.ndarray:
    """Mean of reconstruction − original per channel, in 8-bit levels (float generator)."""
    maps = compute_maps(bundle.seg, images)
    total = np.zeros(3)
    for img, mp in zip(images, maps, strict=True):
        x = torch.from_numpy(img.copy()).permute(2, 0, 1).float().div(255)[None]
        lab = torch.from_numpy(mp.astype(np.int64))[None]
        t_q, _ = quantize_ste(bundle.comp(x, lab), bundle.levels)
        out, _ = bundle.gen(t_q, lab, x.shape[-2:])
        total += (((out + 1) * 0.5).clamp(0, 1) - x).mean((0, 2, 3)).numpy()
    return total / len(images) * 255


@torch.no_grad()
def subtract_shift(bundle: ModelBundle, shift: np.ndarray) -> None:
    """Lower the last convolution's bias by the shift (its outputs are pixel-shuffled RGB)."""
    last = bundle.gen.body[-2]
    per = last.bias.numel() // 3
    for c in range(3):
        last.bias[c * per : (c + 1) * per] -= float(shift[c]) / 255 * 2  # [-1, 1] output


def balance_bundle(
    bundle_path: Path, photos: Path, count: int, hold_out: int, dest: Path
) -> tuple[Path, np.ndarray]:
    """Write the corrected bundle; returns its path and the shift that was removed."""
    bundle = load_bundle(str(bundle_path))
    if bundle.gen.cfg.kind != "s2d":
        raise click.UsageError("balance-colour needs a space-to-depth generator")
    files = list_images(photos)
    usable = len(files) - hold_out
    if usable < count:
        raise click.UsageError(f"need {count + hold_out} photos in {photos}, found {len(files)}")
    images = crop8(read_images([files[i] for i in spread_indices(usable, count)]))
    shift = mean_shift(bundle, images)
    subtract_shift(bundle, shift)
    info = dict(bundle.info)
    info["output_bias_correction"] = [round(float(v), 3) for v in shift]
    out = save_bundle_in(  # other bundles there stay, as with fix-generator
        dest, bundle.spec, bundle.seg, bundle.comp, bundle.gen, bundle.compact_table, info
    )
    return out, shift


@click.command("balance-colour")
@bundle_option("whose generator's mean colour cast to remove")
@photos_option(": N of the first photos, evenly spread, measure the cast")
@click.option("--images", "count", type=int, default=48, show_default=True)
@click.option("--hold-out", type=int, default=12, show_default=True, help="last photos left unused")
@dest_option
def balance_colour_command(bundle_path, photos, count, hold_out, dest):
    """Remove the generator's mean colour cast through its output bias."""
    out, shift = balance_bundle(bundle_path, photos, count, hold_out, dest)
    rgb = " ".join(f"{c} {v:+.2f}" for c, v in zip("RGB", shift, strict=True))
    click.echo(f"wrote {out}: removed a mean shift of {rgb} levels")


if __name__ == "__main__":
    balance_colour_command()
