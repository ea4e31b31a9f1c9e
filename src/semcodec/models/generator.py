"""A4: the compact representation upsampled, and the generator that adds detail to it: the base."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from semcodec.intgrid import generator_torch
from semcodec.intgrid import ops as intops
from semcodec.models.compnet import SafeReflectionPad2d, dequantize, make_norm, one_hot_map


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
    """A4: the compact representation bilinearly upsampled (the bilinear base)."""
    return F.interpolate(compact, size=size, mode="bilinear", align_corners=False)


class Generator(nn.Module):
    """A4: predicts the detail the bilinear upsampling lacks from it and the map; output (the
    base) = upsampling + detail, in [-1, 1]."""

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
        """(the base, the bilinear upsampling alone), both (B,3,H,W) in [-1, 1]; labels at any
        resolution."""
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


def has_integer_layout(gen: Generator) -> bool:
    """Whether a generator has the layout this module runs (s2d body, no normalisation)."""
    c = gen.cfg
    return (
        c.kind == "s2d"
        and c.norm == "none"
        and c.factor == generator_torch.FACTOR
        and generator_torch.FACTOR % c.space_to_depth == 0
    )


# ----- its integer form (at export, or at load for random test bundles): intgrid/generator_torch.py
def _int_weights(
    w: np.ndarray, b: np.ndarray, in_scale: np.ndarray, in_max: np.ndarray, e_out: int
) -> generator_torch.TorchIntConv:
    """intops.quantise as a TorchIntConv: the finest per-channel grid within the 2**24 bound."""
    q = intops.quantise(w, b, in_scale, in_max, e_out)
    return generator_torch.TorchIntConv(
        torch.from_numpy(q.weight), torch.from_numpy(q.bias), torch.from_numpy(q.shift)
    )


def _stat(values: list[torch.Tensor], quantile: float) -> float:
    """The calibration statistic of one activation over all calibration inputs."""
    flat = torch.cat([v.abs().flatten() for v in values]).double()
    if quantile >= 1.0:
        return float(flat.max())
    k = max(1, int(round(quantile * flat.numel())))
    return float(flat.kthvalue(k).values)


@torch.no_grad()
def to_integer(
    gen: Generator,
    levels: int,
    calibration: Iterable[tuple[torch.Tensor, torch.Tensor]],
    spec: generator_torch.IntegerGridSpec | None = None,
) -> generator_torch.TorchIntegerGenerator:
    """The integer generator of a trained s2d generator, its grids fixed from calibration
    (symbols, labels) pairs."""
    spec = spec or generator_torch.IntegerGridSpec()
    if not has_integer_layout(gen):
        raise ValueError("only s2d generators without normalisation run on the integer grid")
    cfg = gen.cfg
    body = list(gen.body)
    conv0, blocks, last = body[1], body[3:-2], body[-2]
    stream_in: list[list[torch.Tensor]] = [[] for _ in range(len(blocks) + 1)]
    hidden: list[list[torch.Tensor]] = [[] for _ in blocks]
    for symbols, labels in calibration:
        t = dequantize(symbols, levels)
        _, x = gen.body_input(
            t, labels, (t.shape[-2] * generator_torch.FACTOR, t.shape[-1] * generator_torch.FACTOR)
        )
        x = F.relu(conv0(body[0](x)))
        for i, blk in enumerate(blocks):
            stream_in[i].append(x.abs().amax(dim=(0, 2, 3)))
            h = F.relu(blk.body[0](x))
            hidden[i].append(h)
            x = x + blk.body[3](h)  # body: conv, norm(identity), relu, conv, norm
        stream_in[-1].append(x.abs().amax(dim=(0, 2, 3)))
    s2 = cfg.space_to_depth**2
    e_x = intops.grid_exponent(
        max(float(torch.stack(v).max()) for v in stream_in), 1 << spec.stream_bits
    )
    e_q = [intops.grid_exponent(float(torch.stack(v).max()), spec.input_max) for v in stream_in]
    e_h = [intops.grid_exponent(_stat(v, spec.quantile), spec.act_max) for v in hidden]
    step = generator_torch.base_step(levels)
    qb_max = 256 * (levels - 1) // step
    nb = cfg.compact_channels * s2
    in_scale0 = np.array([step / (256 * (levels - 1))] * nb + [1.0] * (cfg.num_classes * s2))
    in_max0 = np.array([qb_max] * nb + [1] * (cfg.num_classes * s2))

    def np_(p: torch.Tensor) -> np.ndarray:
        return p.detach().double().numpy()

    convs = [_int_weights(np_(conv0.weight), np_(conv0.bias), in_scale0, in_max0, e_x)]
    width = cfg.width
    for i, blk in enumerate(blocks):
        c1, c2 = blk.body[0], blk.body[3]
        q_scale, q_max = np.full(width, 2.0 ** e_q[i]), np.full(width, spec.input_max)
        convs.append(_int_weights(np_(c1.weight), np_(c1.bias), q_scale, q_max, e_h[i]))
        h_scale, h_max = np.full(width, 2.0 ** e_h[i]), np.full(width, spec.act_max)
        convs.append(_int_weights(np_(c2.weight), np_(c2.bias), h_scale, h_max, e_x))
    q_scale, q_max = np.full(width, 2.0 ** e_q[-1]), np.full(width, spec.input_max)
    convs.append(
        _int_weights(
            np_(last.weight), np_(last.bias), q_scale, q_max, -generator_torch.DETAIL_SHIFT
        )
    )
    meta = (levels, cfg.num_classes, cfg.space_to_depth, len(blocks), spec.act_max, spec.input_max)
    state: dict[str, torch.Tensor] = {"meta": torch.tensor(meta, dtype=torch.int64)}
    for i, c in enumerate(convs):
        state[f"c{i}.w"], state[f"c{i}.b"], state[f"c{i}.s"] = c.weight, c.bias, c.shift
    state["qshift"] = torch.tensor([e - e_x for e in e_q], dtype=torch.int64)
    table = generator_torch.TorchIntegerGenerator(state)
    table.check()
    return table


def synthetic_calibration(
    channels: int, levels: int, classes: int, seed: int = 0, n: int = 2, side: int = 16
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Seeded smooth random (symbols, labels) pairs: calibration for bundles without photos."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        coarse = torch.rand(1, channels, side // 4, side // 4, generator=g)
        smooth = F.interpolate(coarse, size=(side, side), mode="bilinear", align_corners=False)
        symbols = torch.round(smooth * (levels - 1)).to(torch.int64)
        labels = torch.randint(0, classes, (1, side // 4, side // 4), generator=g)
        labels = F.interpolate(labels[:, None].float(), size=(side, side), mode="nearest")[:, 0]
        out.append((symbols, labels.to(torch.int64)))
    return out
