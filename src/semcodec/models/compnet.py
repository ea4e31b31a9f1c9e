"""A2/A3: CompNet, the encoder from image + semantic map to the quantised compact representation."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from semcodec.format.classes import UNKNOWN_AS
from semcodec.format.tiling import MAP_SCALE


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
    # the default plus 5 or 13 learned channels beside the thumbnail (capacity expansion)
    "c8": CompNetConfig(out_channels=8, thumbnail_skip=True),
    "c16": CompNetConfig(out_channels=16, thumbnail_skip=True),
}

THUMB_CHANNELS = 3  # the thumbnail skip feeds the first three channels (RGB)


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
        """(x - mean) / sqrt(var + eps) over channels: layer_norm's fused kernel on NHWC."""
        c = x.shape[1]
        y = F.layer_norm(
            x.permute(0, 2, 3, 1), (c,), self.weight.view(c), self.bias.view(c), self.eps
        )
        return y.permute(0, 3, 1, 2)


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
    """(B,h,w) integer labels → (B,C,H,W) one-hot, nearest-upsampled to `size`; an unknown
    label (num_classes and above, the map's UNKNOWN) counts as classes.UNKNOWN_AS."""
    lab = labels.long().clamp(min=0)
    lab = torch.where(lab >= num_classes, UNKNOWN_AS, lab)
    oh = F.one_hot(lab, num_classes).permute(0, 3, 1, 2).float()
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
        image = image.contiguous(memory_format=torch.channels_last)  # 1.3-7x faster convs/norms
        z = self.net[2:-1](self._first_conv(image * 2 - 1, labels))
        if not self.cfg.thumbnail_skip:
            return self.net[-1](z)
        thumb = F.avg_pool2d(image * 2 - 1, 8, ceil_mode=True)  # (-1, 1) at 1/8 size
        skip = torch.atanh(thumb.clamp(-0.96, 0.96))
        extra = z.shape[1] - THUMB_CHANNELS  # channels beyond the thumbnail's have no skip
        return torch.tanh(z + F.pad(skip, (0, 0, 0, 0, 0, extra)) if extra else z + skip)

    def _first_conv(self, img: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The 7x7 conv over image + map, with the map's part computed at 1/8 resolution.

        The map is constant on 8x8 blocks, so its share of the conv is a 3x3 conv over the
        1/8-resolution one-hot map into 64 sub-pixel phases (``phase_kernel``): the same sum,
        5x fewer multiply-adds than at full resolution (at the borders, reflecting 3 pixels
        stays inside the border block, which is replicating one block at 1/8).
        """
        pad, conv = self.net[0], self.net[1]
        n = self.cfg.num_classes
        f = FACTOR
        if (
            tuple(labels.shape[-2:]) != (img.shape[-2] // f, img.shape[-1] // f)
            or img.shape[-2] % f
            or img.shape[-1] % f
        ):
            return conv(pad(torch.cat([img, one_hot_map(labels, n, img.shape[-2:])], 1)))
        y = F.conv2d(pad(img), conv.weight[:, :3], conv.bias)
        oh = F.pad(one_hot_map(labels, n).to(y.dtype), (1, 1, 1, 1), mode="replicate")
        with torch.autocast("cpu", enabled=False):
            k = phase_kernel(conv.weight[:, 3:].float(), f)
        z = F.conv2d(oh, k.to(y.dtype))  # (B, O*f*f, h, w)
        b, o, h, w = y.shape[0], y.shape[1], z.shape[-2], z.shape[-1]
        # add phase (a, b) of block (i, j) to pixel (f*i + a, f*j + b): pixel_shuffle without a copy
        y.view(b, o, h, f, w, f).add_(z.view(b, o, f, f, h, w).permute(0, 1, 4, 2, 5, 3))
        return y


FACTOR = MAP_SCALE  # CompNet's stride: the map enters as 8x8 blocks


def phase_kernel(w: torch.Tensor, factor: int) -> torch.Tensor:
    """(O,C,k,k) full-resolution kernel → (O*f*f, C, 3, 3) on blocks of f x f pixels.

    Output phase (a, b) of block (i, j) sums the taps dy, dx that land in block
    (i + p, j + q), p, q in {-1, 0, 1}; the channel order is the one pixel_shuffle expects.
    """
    o, c, k, _ = w.shape
    r = k // 2
    taps = torch.arange(k) - r
    phase = torch.arange(factor)
    block = torch.div(phase[:, None] + taps[None, :], factor, rounding_mode="floor")  # (f, k)
    sel = (block[:, None, :] == torch.arange(-1, 2)[None, :, None]).to(w.dtype)  # (f, 3, k)
    kern = torch.einsum("apk,bql,ockl->oabcpq", sel, sel, w)
    return kern.reshape(o * factor * factor, c, 3, 3)


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
