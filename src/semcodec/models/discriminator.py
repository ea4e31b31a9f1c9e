"""A8: two-scale conditional PatchGAN discriminator (same architecture at both scales)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DiscriminatorConfig:
    """n' layers of the PatchGAN and its width."""

    width: int = 64
    layers: int = 3
    scales: int = 2
    num_classes: int = 11


DISCRIMINATOR_CONFIGS: dict[str, DiscriminatorConfig] = {
    "paper": DiscriminatorConfig(),
    "default": DiscriminatorConfig(width=32),
    "tiny": DiscriminatorConfig(width=8, layers=2),
}


class PatchGAN(nn.Module):
    """One scale: 4x4 convs with stride 2, LeakyReLU; returns every layer's features."""

    def __init__(self, cin: int, width: int, layers: int):
        super().__init__()
        blocks = [nn.Sequential(nn.Conv2d(cin, width, 4, 2, 1), nn.LeakyReLU(0.2, True))]
        ch = width
        for i in range(1, layers):
            nxt = min(ch * 2, 512)
            blocks.append(
                nn.Sequential(
                    nn.Conv2d(ch, nxt, 4, 2 if i < layers - 1 else 1, 1),
                    nn.InstanceNorm2d(nxt),
                    nn.LeakyReLU(0.2, True),
                )
            )
            ch = nxt
        blocks.append(nn.Sequential(nn.Conv2d(ch, 1, 4, 1, 1)))
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        feats = []
        for b in self.blocks:
            x = b(x)
            feats.append(x)
        return feats


class Discriminator(nn.Module):
    """A8: d=1 sees the sub-block, d=2 the sub-block upsampled 2x; conditioned on map and base."""

    def __init__(self, cfg: DiscriminatorConfig | None = None):
        super().__init__()
        cfg = cfg or DiscriminatorConfig()
        self.cfg = cfg
        cin = 3 + cfg.num_classes + 3
        self.scales = nn.ModuleList(PatchGAN(cin, cfg.width, cfg.layers) for _ in range(cfg.scales))

    def forward(
        self, image: torch.Tensor, onehot: torch.Tensor, base: torch.Tensor
    ) -> list[list[torch.Tensor]]:
        """Features of every layer at every scale; the last of each list is the patch score map."""
        x = torch.cat([image, onehot, base], 1)
        out = []
        for d, net in enumerate(self.scales):
            xd = (
                x
                if d == 0
                else F.interpolate(x, scale_factor=2**d, mode="bilinear", align_corners=False)
            )
            out.append(net(xd))
        return out
