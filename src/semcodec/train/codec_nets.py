"""`train codec`'s networks: CompNet, generator, context model, perceptual net, warm starts."""

from __future__ import annotations

import math
from pathlib import Path

import click
import numpy as np
import torch
from torch import nn

from semcodec.format.compact import table_neighbours
from semcodec.models.compnet import COMPNET_CONFIGS, CompNet, quantize_ste
from semcodec.models.context_model import ContextModel
from semcodec.models.generator import GENERATOR_CONFIGS, Generator
from semcodec.models.losses import ImageNetLite0Features, SegBackboneFeatures, load_vgg19
from semcodec.zoo.bundles import load_bundle


class CodecNets(nn.Module):
    """The trainable parts of the base layer: CompNet, generator and compact context model."""

    def __init__(self, compnet: str = "default", generator: str = "default", neighbours: int = 2):
        super().__init__()
        self.comp = CompNet(COMPNET_CONFIGS[compnet])
        self.gen = Generator(GENERATOR_CONFIGS[generator])
        self.ctx = ContextModel(self.comp.cfg.out_channels, self.comp.cfg.levels, neighbours)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training forward pass with straight-through quantisation; x in [0, 1]."""
        t = self.comp(x, labels)
        t_q, y = quantize_ste(t, self.comp.cfg.levels)
        bits = self.ctx.bits(y)
        out, base = self.gen(t_q, labels, x.shape[-2:])
        return {"x_hat": (out + 1) * 0.5, "base": (base + 1) * 0.5, "bits": bits}


PERCEPTUAL_FEATURES = ("seg", "imagenet")


def perceptual_features(kind: str, vgg: Path | None, seg: nn.Module) -> nn.Module:
    """The frozen network of the perceptual term: VGG-19 when given, else the segmentation
    net's RGB backbone ('seg') or the ImageNet EfficientNet-Lite0 ('imagenet')."""
    if vgg is not None:
        return load_vgg19(str(vgg))
    if kind == "imagenet":
        return ImageNetLite0Features()
    if kind != "seg":
        raise ValueError(f"perceptual features must be one of {PERCEPTUAL_FEATURES}, got {kind!r}")
    return SegBackboneFeatures(seg.rgb.backbone)


def init_from_bundle(nets: CodecNets, bundle_path: Path) -> tuple[int, float]:
    """Start fine-tuning from a shipped bundle: its weights, and its step/hour counts.

    The bundle keeps only the integer table of the context model; the logits are set to its
    log-probabilities, so the rate term starts where the coder is.
    """
    bundle = load_bundle(str(bundle_path))
    n = table_neighbours(bundle.compact_table)
    if n != nets.ctx.neighbours:
        raise click.UsageError(
            f"{bundle_path} codes the compact layer with {n} context neighbours: "
            f"train with --context-neighbours {n}"
        )
    old, new = bundle.comp.cfg.out_channels, nets.comp.cfg.out_channels
    if new < old:
        raise click.UsageError(f"{bundle_path} has {old} compact channels, the run {new}")
    if new == old:
        nets.comp.load_state_dict(bundle.comp.state_dict())
        nets.gen.load_state_dict(bundle.gen.state_dict())
        nets.ctx.load_integer_table(bundle.compact_table)
    else:
        expand_from(nets, bundle)
    return int(bundle.info.get("codec_steps", 0)), float(bundle.info.get("codec_hours", 0.0))


@torch.no_grad()
def expand_from(nets: CodecNets, bundle) -> None:
    """Warm-start a model with more compact channels from a bundle: it starts as the bundle.

    The new channels' CompNet outputs start with zero weights and a bias at the centre of a
    quantisation level (a zero start sits on a level boundary and costs about a bit per
    symbol); the generator's weights for them start at zero, so the reconstruction is the
    bundle's; their context table starts as a near-certain constant symbol, which is what
    the first symbols are, so they cost almost no bits until they carry information.
    """
    old, levels = bundle.comp.cfg.out_channels, bundle.comp.cfg.levels
    comp_sd = bundle.comp.state_dict()
    out_w, out_b = nets.comp.net[-2].weight, nets.comp.net[-2].bias
    last = f"net.{len(nets.comp.net) - 2}"
    for k, v in comp_sd.items():
        if k.startswith(last):
            continue
        nets.comp.state_dict()[k].copy_(v)
    out_w.zero_()
    out_w[:old] = comp_sd[f"{last}.weight"]
    centre = levels // 2  # its value 2 c / (L - 1) - 1 is a level centre next to 0
    out_b.fill_(math.atanh(2 * centre / (levels - 1) - 1))
    out_b[:old] = comp_sd[f"{last}.bias"]
    gen_sd = bundle.gen.state_dict()
    s2 = nets.gen.cfg.space_to_depth**2
    for k, v in gen_sd.items():
        dst = nets.gen.state_dict()[k]
        if dst.shape == v.shape:
            dst.copy_(v)
            continue
        # conv 0 over unshuffled [compact channels, map]: channel c occupies rows c*s2..(c+1)*s2
        dst.zero_()
        dst[:, : old * s2] = v[:, : old * s2]
        dst[:, nets.gen.cfg.compact_channels * s2 :] = v[:, old * s2 :]
    t = torch.from_numpy(np.asarray(bundle.compact_table, np.float64))
    logits = nets.ctx.logits
    logits[:old] = torch.log(t / t.sum(-1, keepdim=True)).float()
    logits[old:] = 0.0
    logits[old:, :, centre] = 8.0  # p(centre) = 1 - 5e-3 at 16 levels
