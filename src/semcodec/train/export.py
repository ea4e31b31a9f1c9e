"""`semcodec train export`: freeze training checkpoints into a shipped model bundle."""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from semcodec.train.codec_nets import CodecNets
from semcodec.train.common import read_seg_source
from semcodec.zoo.bundles import BundleSpec, load_bundle, save_bundle_in


def export_bundle(
    seg_ckpt: Path,
    codec_ckpt: Path,
    dest: Path,
    name: str = "default",
    compact_from: Path | None = None,
) -> Path:
    """Write '<dest>/<name>-<sha8>.pt' (fp16 weights + integer compact table); returns its path.

    compact_from: a bundle whose CompNet and compact table are kept verbatim (a generator
    fine-tuned with --freeze-compnet), so its base layer costs exactly that bundle's bytes.
    """
    source = read_seg_source(seg_ckpt)
    codec_state = torch.load(codec_ckpt, map_location="cpu", weights_only=True)
    seg = source.net()
    cfg = json.loads(codec_state.get("config", "{}"))
    nets = CodecNets(
        cfg.get("compnet", "default"),
        cfg.get("generator", "default"),
        cfg.get("context_neighbours", 2),
    )
    nets.load_state_dict(codec_state["nets"])
    spec = BundleSpec(
        name,
        seg=source.config,
        compnet=cfg.get("compnet", "default"),
        generator=cfg.get("generator", "default"),
    )
    info = {
        "seg_steps": source.steps, "seg_hours": source.hours,
        "codec_steps": int(codec_state["step"]), "codec_hours": float(codec_state.get("hours", 0.0)),
        "codec_recipe": cfg,
    }  # fmt: skip
    table = nets.ctx.integer_table()
    if compact_from is not None:
        src = load_bundle(str(compact_from))
        nets.comp.load_state_dict(src.comp.state_dict())
        table = src.compact_table
        info["compact_from"] = f"{src.name}-{src.hash[:8]}"
    for old in dest.glob(f"{name}-*.pt"):
        old.unlink()
    return save_bundle_in(dest, spec, seg, nets.comp, nets.gen, table, info)


@click.command("export")
@click.option(
    "--seg",
    "seg_ckpt",
    type=click.Path(path_type=Path, exists=True),
    default=Path("runs/seg/seg-checkpoint.pt"),
    show_default=True,
)
@click.option(
    "--codec",
    "codec_ckpt",
    type=click.Path(path_type=Path, exists=True),
    default=Path("runs/codec/codec-checkpoint.pt"),
    show_default=True,
)
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("models"),
    show_default=True,
)
@click.option("--name", default="default", show_default=True)
@click.option(
    "--compact-from",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="keep this bundle's CompNet and compact table (runs trained with --freeze-compnet)",
)
def export_command(
    seg_ckpt: Path, codec_ckpt: Path, dest: Path, name: str, compact_from: Path | None
) -> None:
    """Freeze checkpoints into models/<name>-<sha8>.pt."""
    path = export_bundle(seg_ckpt, codec_ckpt, dest, name, compact_from)
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    export_command()
