"""The map-conditioned enhancement network: a small post-filter after the residual (float form).

The decoded picture (AVIF or native residual on top of the prediction) goes through a few 3x3
convolutions at half resolution (2x2 space-to-depth); the semantic map and the residual's
quality enter as a per-class, quality-scaled bias of the first layer, and the output is a
correction added to the decoded pixels. Training uses this float form; files are decoded by
its integer twin (``intgrid/enhancer.py``), which gives the same pixels on every CPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from semcodec.format.classes import NUM_CLASSES
from semcodec.intgrid.ops import grid_exponent, quantise

CENTRE = 128  # pixels enter as (v - 128) / IN_SCALE
IN_SCALE = 128.0
OUT_SCALE = 8.0  # the last conv's output unit in pixel levels (keeps its weights in range)


@dataclass(frozen=True)
class EnhanceConfig:
    """Sizes of the enhancement network."""

    width: int = 32
    layers: int = 2  # 3x3 convolutions between the first and the last
    s2d: int = 4  # space-to-depth factor of the input
    classes: int = NUM_CLASSES  # the map's classes; an unknown pixel gets no class bias


ENHANCE_CONFIGS: dict[str, EnhanceConfig] = {
    "small": EnhanceConfig(),  # 2.9 kMAC per pixel
    "small-s2": EnhanceConfig(width=16, layers=2, s2d=2),  # 2.0 kMAC per pixel
    "tiny": EnhanceConfig(width=8, layers=1, s2d=2),
    # the complexity-gain curve (docs/training.md): wider and deeper, 8.6 to 18.1 kMAC per pixel
    "s2-w32-l3": EnhanceConfig(width=32, layers=3, s2d=2),
    "s4-w64-l4": EnhanceConfig(width=64, layers=4, s2d=4),
    "s2-w48-l3": EnhanceConfig(width=48, layers=3, s2d=2),
    # a decode under 0.15 CPU-s (docs/benchmarks.md): 4.0 kMAC per pixel, 0.07 s on AVX2
    "s4-w32-l4": EnhanceConfig(width=32, layers=4, s2d=4),
    "s4-w48-l3": EnhanceConfig(width=48, layers=3, s2d=4),  # 6.5 kMAC per pixel, 0.10 s
}


class EnhanceNet(nn.Module):
    """Decoded picture + map + quality → corrected picture (float, for training)."""

    def __init__(self, cfg: EnhanceConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or EnhanceConfig()
        cin = 3 * cfg.s2d**2
        self.first = nn.Conv2d(cin, cfg.width, 3, padding=1)
        self.class_bias = nn.Parameter(torch.zeros(cfg.classes + 1, cfg.width))  # last: unknown
        self.quality_bias = nn.Parameter(torch.zeros(cfg.width))
        self.class_quality = nn.Parameter(torch.zeros(cfg.classes + 1, cfg.width))
        self.body = nn.ModuleList(
            nn.Conv2d(cfg.width, cfg.width, 3, padding=1) for _ in range(cfg.layers)
        )
        self.last = nn.Conv2d(cfg.width, cin, 3, padding=1)
        nn.init.zeros_(self.last.weight)
        nn.init.zeros_(self.last.bias)

    def config_dict(self) -> dict:
        """The configuration a bundle records."""
        return asdict(self.cfg)

    def label_index(self, labels: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """(B,h,w) labels at 1/8 → class indices (B,H/s,W/s); unknown and void → the last row."""
        idx = labels.long().clamp(0, self.cfg.classes)
        idx = F.interpolate(idx[:, None].float(), size=size, mode="nearest")[:, 0].long()
        return idx

    def hidden(
        self, decoded: torch.Tensor, labels: torch.Tensor, quality: torch.Tensor
    ) -> list[torch.Tensor]:
        """Each hidden layer's ReLU output: the first with its class and quality biases."""
        x = F.pixel_unshuffle((decoded - CENTRE) / IN_SCALE, self.cfg.s2d)
        h = self.first(x)
        idx = self.label_index(labels, h.shape[-2:])
        q = (quality.float() / 100.0).view(-1, 1, 1, 1)
        cb = self.class_bias[idx].permute(0, 3, 1, 2) + q * (
            self.quality_bias.view(1, -1, 1, 1) + self.class_quality[idx].permute(0, 3, 1, 2)
        )
        out = [F.relu(h + cb)]
        for conv in self.body:
            out.append(F.relu(conv(out[-1])))
        return out

    def correction(
        self, decoded: torch.Tensor, labels: torch.Tensor, quality: torch.Tensor
    ) -> torch.Tensor:
        """The correction in pixel levels (B,3,H,W) of decoded uint8-valued pixels (float)."""
        h = self.hidden(decoded, labels, quality)[-1]
        return F.pixel_shuffle(self.last(h), self.cfg.s2d) * OUT_SCALE

    def forward(
        self, decoded: torch.Tensor, labels: torch.Tensor, quality: torch.Tensor
    ) -> torch.Tensor:
        """decoded (B,3,H,W) in 0..255, H and W multiples of 8; returns the enhanced picture."""
        return decoded + self.correction(decoded, labels, quality)


def build_enhance(name: str = "small") -> EnhanceNet:
    """Construct a registered enhancement configuration."""
    return EnhanceNet(ENHANCE_CONFIGS[name])


# ----- the integer form (intgrid/enhancer.py): conversion from the trained float network ------------
@torch.no_grad()
def activation_maxima(
    net: EnhanceNet, calibration: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
) -> list[float]:
    """The largest ReLU output of each hidden layer over calibration (decoded, labels, quality)."""
    net.eval()
    top = [0.0] * (net.cfg.layers + 1)
    for decoded, labels, quality in calibration:
        for i, h in enumerate(net.hidden(decoded, labels, quality)):
            top[i] = max(top[i], float(h.max()))
    return top


def to_integer(
    net: EnhanceNet,
    calibration: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    act_max: int = 511,
) -> dict[str, np.ndarray]:
    """The integer table (intgrid.enhancer.IntEnhancer) of a trained network, grids from calibration."""
    from semcodec.intgrid.enhancer import CORR_SHIFT, IntEnhancer

    cfg = net.cfg
    e_h = [grid_exponent(m, act_max) for m in activation_maxima(net, calibration)]

    def np_(p: torch.Tensor) -> np.ndarray:
        return p.detach().double().numpy()

    cb = np_(net.class_bias)
    qb = np_(net.class_quality) + np_(net.quality_bias)[None]
    first = quantise(
        np_(net.first.weight), np_(net.first.bias), 1.0 / IN_SCALE, CENTRE, e_h[0], (cb, qb)
    )
    layers = [first]
    for i, conv in enumerate(net.body, 1):
        w, b = np_(conv.weight), np_(conv.bias)
        layers.append(quantise(w, b, 2.0 ** e_h[i - 1], act_max, e_h[i]))
    w, b = np_(net.last.weight) * OUT_SCALE, np_(net.last.bias) * OUT_SCALE
    layers.append(quantise(w, b, 2.0 ** e_h[-1], act_max, -CORR_SHIFT))
    meta = [cfg.s2d, cfg.width, cfg.layers, cfg.classes, act_max]
    state: dict[str, np.ndarray] = {"meta": np.array(meta, np.int64)}
    for i, layer in enumerate(layers):
        state[f"c{i}.w"], state[f"c{i}.b"], state[f"c{i}.s"] = layer.weight, layer.bias, layer.shift
        if i == 0:  # the stored order: the class tables follow conv 0
            state["class_bias"], state["quality_bias"] = (x.astype(np.int32) for x in first.extras)
    IntEnhancer(state).check()
    return state
