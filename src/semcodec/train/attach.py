"""`semcodec train attach`: a new bundle from a shipped one, a new map network and a post-filter.

The compression networks, the compact table and the integer generator stay the source
bundle's byte for byte; the segmentation network (and its configuration, e.g. with an UNKNOWN
threshold) and the enhancement network (float weights and the integer table, its grids
calibrated on held-out training pictures) are replaced or added. The result is a new release:
its own hash, decoder parts and conformance files.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click
import torch

from semcodec.format.tiling import MAP_SCALE
from semcodec.models.enhance import build_enhance, to_integer
from semcodec.models.segmentation import build_segnet, parse_class_bias
from semcodec.train.common import read_seg_source, trained_weights
from semcodec.train.enhance import load_shards, split_shards
from semcodec.zoo.bundles import SEG_CLASS_BIAS, load_bundle, save_bundle_in


def calibration_of(shards: list[dict], limit: int = 24) -> list[tuple[torch.Tensor, ...]]:
    """(decoded, labels, quality) of held-out training pictures: the integer grids' range."""
    out = []
    for s in shards:
        for k in range(len(s["quality"])):
            h, w = (d // MAP_SCALE * MAP_SCALE for d in s["original"].shape[:2])
            d = torch.from_numpy(s["decoded"][k, :h, :w].copy()).permute(2, 0, 1)[None].float()
            m = torch.from_numpy(
                s["labels"][k, : h // MAP_SCALE, : w // MAP_SCALE].astype("int64")
            )[None]
            out.append((d, m, torch.tensor([int(s["quality"][k])])))
    return out[:limit]


def attach(
    source: Path,
    dest: Path,
    seg_ckpt: Path | None,
    seg_config: str | None,
    enh_ckpt: Path | None,
    enh_data: Path | None,
    name: str = "default",
    seg_bias: dict[str, float] | None = None,
) -> Path:
    """Write '<dest>/<name>-<sha8>.pt'; returns its path. A segmentation checkpoint that
    fine-tuned the source bundle's network (`train seg --init`) adds its steps and hours to
    the source's; one from a run of its own (from ImageNet) brings only its own. The map's
    class offsets are ``seg_bias`` where given; a new map network drops the source's (they
    were fitted to its weights)."""
    src = load_bundle(str(source))
    spec = replace(src.spec, name=name, weights=None)
    info = dict(src.info)
    seg = src.seg
    if seg_ckpt is not None:
        info.pop(SEG_CLASS_BIAS, None)
        got = read_seg_source(seg_ckpt)
        weights, steps, hours, start = got.weights, got.steps, got.hours, got.start
        seg = build_segnet(seg_config or spec.seg)
        seg.load_state_dict({k: v.float() for k, v in weights.items()})
        if start in ("imagenet", "random"):  # a run of its own: its totals are the network's
            for key in ("seg_finetune_steps", "seg_finetune_hours"):
                info.pop(key, None)
            info.update(seg_steps=steps, seg_hours=hours, seg_from=start)
        else:  # a fine-tune of the source's network (train seg --init): totals accumulate
            info.update(
                seg_steps=int(info.get("seg_steps", 0)) + steps,
                seg_hours=float(info.get("seg_hours", 0.0)) + hours,
                seg_finetune_steps=steps,
                seg_finetune_hours=hours,
                seg_from=f"{src.name}-{src.hash[:8]}",
            )
    if seg_config:
        seg = seg if seg_ckpt is not None else _reconfigured(src.seg, seg_config)
        spec = replace(spec, seg=seg_config)
    # without a new one, the source's enhancement network (float and table) carries over
    enhancer, table = src.enhancer, src.enh_table
    if enh_ckpt is not None:
        state = torch.load(enh_ckpt, map_location="cpu", weights_only=True)
        cfg = json.loads(state["config"])
        enhancer = build_enhance(cfg["model"])
        weights, averaged = trained_weights(state)  # a run's moving average where it kept one
        enhancer.load_state_dict(weights)
        # fp16 in the bundle: the table is calibrated from the weights it ships
        enhancer.load_state_dict({k: v.half().float() for k, v in enhancer.state_dict().items()})
        _, held = (
            split_shards(load_shards(enh_data), cfg.get("hold_out", 12)) if enh_data else ([], [])
        )
        table = to_integer(enhancer, calibration_of(held))
        spec = replace(spec, enhance=cfg["model"])
        info.update(
            enhance_steps=int(state["step"]),
            enhance_hours=float(state["hours"]),
            enhance_weights="moving average" if averaged else "last step",
            enhance_recipe=cfg,
            enhance_held_out=json.loads(state.get("held_out", "{}")),
        )
    if seg_bias is not None:
        info.pop(SEG_CLASS_BIAS, None)
        if seg_bias:
            info[SEG_CLASS_BIAS] = dict(seg_bias)
    integer = src.integer_generator
    generator_table = integer.state if integer is not None else None
    return save_bundle_in(
        dest,
        spec,
        seg,
        src.comp,
        src.gen,
        src.compact_table,
        info,
        generator_table,
        enhancer,
        table,
    )


def _reconfigured(seg, config: str):
    """The same weights under another configuration name (e.g. an UNKNOWN threshold)."""
    net = build_segnet(config)
    net.load_state_dict(seg.state_dict())
    return net


@click.command("attach")
@click.option("--bundle", "source", type=click.Path(path_type=Path, exists=True), required=True)
@click.option("--dest", type=click.Path(path_type=Path, file_okay=False), required=True)
@click.option("--seg", "seg_ckpt", type=click.Path(path_type=Path, exists=True), default=None)
@click.option("--seg-config", default=None, help="segmentation configuration name to record")
@click.option("--enhance", "enh_ckpt", type=click.Path(path_type=Path, exists=True), default=None)
@click.option(
    "--enhance-data",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="train enhance-data folder: its held-out pictures calibrate the integer grids",
)
@click.option(
    "--seg-bias",
    default=None,
    metavar="CLASS=OFFSET,...",
    help="the map's class offsets, as `eval seg --fit-bias` prints them ('' for none)",
)
@click.option("--name", default="default", show_default=True)
def attach_command(source, dest, seg_ckpt, seg_config, enh_ckpt, enhance_data, seg_bias, name):
    """Make a bundle from a shipped one with a new segmentation and/or enhancement network."""
    try:
        bias = None if seg_bias is None else parse_class_bias(seg_bias)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--seg-bias") from None
    click.echo(str(attach(source, dest, seg_ckpt, seg_config, enh_ckpt, enhance_data, name, bias)))
