"""A2/A3: CompNet, the encoder from image + semantic map to the quantised compact representation."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class CompNetConfig:
    """A3's layer sizes; `norm` is the one deliberate deviation of the default configuration."""

    widths: tuple[int, int, int, int] = (64, 128, 256, 512)
    out_channels: int = 3
    norm: str = "channel"  # "instance" (A3 as written) or "channel" (per-pixel, HiFiC)
    levels: int = 16  # quantisation levels of each compact symbol
    num_classes: int = 11
    # add the 8x box-downsampled image before the Tanh (see docs/training.md)
    thumbnail_skip: bool = False


COMPNET_CONFIGS: dict[str, CompNetConfig] = {
    "paper": CompNetConfig(norm="instance"),
    "default": CompNetConfig(thumbnail_skip=True),
    "tiny": CompNetConfig(widths=(8, 8, 16, 16), levels=8),
}


class SafeReflectionPad2d(nn.Module):
    """Reflection padding that falls back to replicate padding on maps too small to reflect (tiny images)."""

    def __init__(self, pad: int):
        super().__init__()
        self.pad = pad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mode = "reflect" if min(x.shape[-2:]) > self.pad else "replicate"
        return F.pad(x, (self.pad,) * 4, mode=mode)


class ChannelNorm(nn.Module):
    """Per-pixel normalisation across channels: keeps the image's global mean and contrast."""

    def __init__(self, channels: int, eps: float = 1e-3):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.bias = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu = x.mean(1, keepdim=True)
        var = x.var(1, keepdim=True, unbiased=False)
        return (x - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias


def make_norm(kind: str, channels: int) -> nn.Module:
    """The normalisation layer of a configuration."""
    if kind == "instance":
        return nn.InstanceNorm2d(channels, affine=True)
    if kind == "channel":
        return ChannelNorm(channels)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}")


def one_hot_map(
    labels: torch.Tensor, num_classes: int, size: tuple[int, int] | None = None
) -> torch.Tensor:
    """(B,h,w) integer labels → (B,C,H,W) one-hot, nearest-upsampled to `size`."""
    oh = F.one_hot(labels.long().clamp(0, num_classes - 1), num_classes).permute(0, 3, 1, 2).float()
    if size is not None and tuple(oh.shape[-2:]) != tuple(size):
        oh = F.interpolate(oh, size=size, mode="nearest")
    return oh


class CompNet(nn.Module):
    """A3: 7x7 conv 64 → 3x3/2 convs 128, 256, 512 (each norm + ReLU) → 7x7 conv 3 → Tanh."""

    def __init__(self, cfg: CompNetConfig | None = None):
        super().__init__()
        cfg = cfg or CompNetConfig()
        self.cfg = cfg
        w = cfg.widths
        layers: list[nn.Module] = [
            SafeReflectionPad2d(3), nn.Conv2d(3 + cfg.num_classes, w[0], 7), make_norm(cfg.norm, w[0]), nn.ReLU(True),
        ]  # fmt: skip
        for cin, cout in zip(w[:-1], w[1:], strict=True):
            layers += [nn.Conv2d(cin, cout, 3, 2, 1), make_norm(cfg.norm, cout), nn.ReLU(True)]
        layers += [SafeReflectionPad2d(3), nn.Conv2d(w[-1], cfg.out_channels, 7), nn.Tanh()]
        self.net = nn.Sequential(*layers)
        if cfg.thumbnail_skip:  # start as the thumbnail; the convolutions learn what to change
            nn.init.zeros_(self.net[-2].weight)
            nn.init.zeros_(self.net[-2].bias)

    def forward(self, image: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Continuous compact representation in (-1, 1) at 1/8 size; image in [0, 1]."""
        x = torch.cat(
            [image * 2 - 1, one_hot_map(labels, self.cfg.num_classes, image.shape[-2:])], 1
        )
        if not self.cfg.thumbnail_skip:
            return self.net(x)
        z = self.net[:-1](x)
        thumb = F.avg_pool2d(image * 2 - 1, 8, ceil_mode=True)  # (-1, 1) at 1/8 size
        return torch.tanh(z + torch.atanh(thumb.clamp(-0.96, 0.96)))


def to_levels(t: torch.Tensor, levels: int) -> torch.Tensor:
    """Map (-1, 1) to the continuous symbol scale [0, levels-1]."""
    return (t + 1) * 0.5 * (levels - 1)


def quantize(t: torch.Tensor, levels: int) -> torch.Tensor:
    """Integer symbols 0..levels-1 (what the file stores)."""
    return torch.round(to_levels(t, levels)).clamp(0, levels - 1).to(torch.int64)


def dequantize(symbols: torch.Tensor, levels: int) -> torch.Tensor:
    """Integer symbols back to (-1, 1): the decoder's compact representation."""
    return symbols.float() * (2.0 / (levels - 1)) - 1.0


def quantize_ste(t: torch.Tensor, levels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Straight-through quantisation for training: (dequantised values, continuous symbol scale)."""
    y = to_levels(t, levels)
    y_hard = y + (torch.round(y).clamp(0, levels - 1) - y).detach()
    return y_hard * (2.0 / (levels - 1)) - 1.0, y
