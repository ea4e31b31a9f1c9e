"""A4: the compact representation upsampled, and the generator that adds the enhancement."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from semcodec.models.compnet import SafeReflectionPad2d, make_norm, one_hot_map


@dataclass(frozen=True)
class GeneratorConfig:
    """'paper': pix2pixHD-style global generator; 'default': space-to-depth net sized for CPUs."""

    kind: str = "s2d"  # "s2d" or "global"
    width: int = 96
    blocks: int = 8
    space_to_depth: int = 4
    downsamplings: int = 3  # global generator only
    norm: str = "none"
    num_classes: int = 11
    compact_channels: int = 3
    factor: int = 8  # upsampling factor of the compact representation (A3: 1/8)


GENERATOR_CONFIGS: dict[str, GeneratorConfig] = {
    "paper": GeneratorConfig(kind="global", width=64, blocks=9, norm="instance"),
    "default": GeneratorConfig(),
    "tiny": GeneratorConfig(width=8, blocks=1),
    "c8": GeneratorConfig(compact_channels=8),
    "c16": GeneratorConfig(compact_channels=16),
}

RGB = 3  # the first three compact channels are the image's colours; the rest only feed the body


class ResBlock(nn.Module):
    """Two 3x3 convs with a skip: the generator's workhorse."""

    def __init__(self, ch: int, norm: str):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(ch, ch, 3, padding=1), make_norm(norm, ch), nn.ReLU(True),
            nn.Conv2d(ch, ch, 3, padding=1), make_norm(norm, ch),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def upsample_base(compact: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A4: the base image description, the compact representation bilinearly upsampled."""
    return F.interpolate(compact, size=size, mode="bilinear", align_corners=False)


class Generator(nn.Module):
    """A4: predicts the enhancement from base + map; output = base + enhancement, in [-1, 1]."""

    def __init__(self, cfg: GeneratorConfig | None = None):
        super().__init__()
        cfg = cfg or GeneratorConfig()
        self.cfg = cfg
        cin = cfg.compact_channels + cfg.num_classes
        if cfg.kind == "s2d":
            s, w = cfg.space_to_depth, cfg.width
            self.body = nn.Sequential(
                nn.PixelUnshuffle(s), nn.Conv2d(cin * s * s, w, 3, padding=1), nn.ReLU(True),
                *[ResBlock(w, cfg.norm) for _ in range(cfg.blocks)],
                nn.Conv2d(w, 3 * s * s, 3, padding=1), nn.PixelShuffle(s),
            )  # fmt: skip
            self.multiple = s
        elif cfg.kind == "global":
            w = cfg.width
            layers: list[nn.Module] = [
                SafeReflectionPad2d(3),
                nn.Conv2d(cin, w, 7),
                make_norm(cfg.norm, w),
                nn.ReLU(True),
            ]
            for _ in range(cfg.downsamplings):
                layers += [nn.Conv2d(w, 2 * w, 3, 2, 1), make_norm(cfg.norm, 2 * w), nn.ReLU(True)]
                w *= 2
            layers += [ResBlock(w, cfg.norm) for _ in range(cfg.blocks)]
            for _ in range(cfg.downsamplings):
                layers += [
                    nn.ConvTranspose2d(w, w // 2, 3, 2, 1, output_padding=1),
                    make_norm(cfg.norm, w // 2),
                    nn.ReLU(True),
                ]
                w //= 2
            layers += [SafeReflectionPad2d(3), nn.Conv2d(w, 3, 7)]
            self.body = nn.Sequential(*layers)
            self.multiple = 2**cfg.downsamplings
        else:
            raise ValueError(f"unknown generator kind {cfg.kind!r}")
        last = self.body[-2] if cfg.kind == "s2d" else self.body[-1]
        nn.init.zeros_(
            last.weight
        )  # start as the identity on the base: training refines from there
        nn.init.zeros_(last.bias)

    def forward(
        self, compact: torch.Tensor, labels: torch.Tensor, size: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(enhanced reconstruction, base), both (B,3,H,W) in [-1, 1]; labels at any resolution."""
        base, x = self.body_input(compact, labels, size)
        return base[:, :RGB] + self.body(x), base[:, :RGB]

    def body_input(
        self, compact: torch.Tensor, labels: torch.Tensor, size: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(upsampled compact layer, what the body sees: it and the one-hot map); the base image
        is its first three channels."""
        base = upsample_base(compact, size)
        return base, torch.cat([base, one_hot_map(labels, self.cfg.num_classes, size)], 1)


def pixels(v: torch.Tensor) -> torch.Tensor:
    """A [-1, 1] reconstruction as uint8 pixels, rounded as the float decoder does."""
    return ((v.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
