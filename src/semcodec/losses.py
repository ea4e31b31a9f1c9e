"""A7–A9: the fused perceptual loss L_E = L_Dp + L_Gp and the rate term."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from pytorch_msssim.ssim import _fspecial_gauss_1d, _ssim
from torch import nn

MS_SSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)  # Wang et al. 2003


@dataclass
class LossWeights:
    """Weights of every term; DSSLIC used GAN 1, FM 10, VGG 10, L1 20, SSIM 1."""

    gan: float = 0.1
    feature_matching: float = 1.0
    perceptual: float = 1.0
    l1: float = 20.0
    msssim: float = 4.0
    rate: float = 1.0  # per bit per pixel


def ms_ssim_scales(
    x: torch.Tensor, y: torch.Tensor, data_range: float = 1.0, scales: int | None = None
) -> torch.Tensor:
    """MS-SSIM (Wang et al. 2003) per image, with the coarsest scales dropped when the image is small.

    The standard 5 scales need a short side over 160 px (11-px window after 4 halvings); smaller
    inputs use the largest number of scales that fits, with the remaining weights renormalised.
    """
    if scales is None:
        short = min(x.shape[-2:])
        scales = 5
        while scales > 1 and short <= (11 - 1) * 2 ** (scales - 1):
            scales -= 1
    w = x.new_tensor(MS_SSIM_WEIGHTS[:scales])
    if scales < len(MS_SSIM_WEIGHTS):  # all five are used as published (they sum to 1.0001)
        w = w / w.sum()
    win = _fspecial_gauss_1d(11, 1.5).to(x).repeat([x.shape[1], 1, 1, 1])
    if min(x.shape[-2:]) < 11:  # smaller than the window: shrink the window (SSIM of tiny images)
        k = min(x.shape[-2:]) | 1
        k = k if k <= min(x.shape[-2:]) else k - 2
        win = _fspecial_gauss_1d(max(1, k), 1.5).to(x).repeat([x.shape[1], 1, 1, 1])
    mcs = []
    for i in range(scales):
        ssim_c, cs = _ssim(x, y, data_range=data_range, win=win, size_average=False, K=(0.01, 0.03))
        if i < scales - 1:
            mcs.append(torch.relu(cs))
            pad = [s % 2 for s in x.shape[2:]]
            x, y = F.avg_pool2d(x, 2, padding=pad), F.avg_pool2d(y, 2, padding=pad)
    vals = torch.stack(mcs + [torch.relu(ssim_c)], 0)
    return torch.prod(vals ** w.view(-1, 1, 1), 0).mean(1)


def msssim_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1 - MS-SSIM on [0,1] images, using as many scales as the crop size allows."""
    return 1 - ms_ssim_scales(x.float(), y.float()).mean()


def d_loss(real: list[list[torch.Tensor]], fake: list[list[torch.Tensor]]) -> torch.Tensor:
    """L_Dp: least-squares adversarial loss of the discriminator, summed over both scales."""
    return sum(
        ((r[-1].float() - 1) ** 2).mean() + (f[-1].float() ** 2).mean()
        for r, f in zip(real, fake, strict=True)
    )


def g_adv_loss(fake: list[list[torch.Tensor]]) -> torch.Tensor:
    """The generator's least-squares adversarial term, both scales."""
    return sum(((f[-1].float() - 1) ** 2).mean() for f in fake)


def feature_matching_loss(
    real: list[list[torch.Tensor]], fake: list[list[torch.Tensor]]
) -> torch.Tensor:
    """L_p: L1 distance of discriminator features of target and generated sub-blocks, per layer and scale."""
    total = 0.0
    for r, f in zip(real, fake, strict=True):
        for fr, ff in zip(r[:-1], f[:-1], strict=True):
            total = total + F.l1_loss(ff.float(), fr.detach().float()) / (len(r) - 1)
    return total


class VGG19Features(nn.Module):
    """VGG-19 convolutional trunk with torchvision's 'features.N' names, for a user-supplied file."""

    CFG = (
        64,
        64,
        "M",
        128,
        128,
        "M",
        256,
        256,
        256,
        256,
        "M",
        512,
        512,
        512,
        512,
        "M",
        512,
        512,
        512,
        512,
    )
    TAPS = (3, 8, 17, 26, 35)  # relu1_2, relu2_2, relu3_4, relu4_4, relu5_4

    def __init__(self):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(False)]
                cin = v
        self.features = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in self.TAPS:
                out.append(x)
        return out


class SegBackboneFeatures(nn.Module):
    """The trained segmentation network's RGB backbone as the perceptual feature network."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        b = self.backbone
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        out = []
        for name in ("layer1", "layer2", "layer3"):
            x = getattr(b, name)(x)
            out.append(x)
        return out


class PerceptualLoss(nn.Module):
    """L_VGG: distance of frozen feature maps of target and reconstruction (ImageNet-normalised input)."""

    def __init__(self, features: nn.Module):
        super().__init__()
        self.features = features.eval()
        for p in self.features.parameters():
            p.requires_grad_(False)
        self.register_buffer(
            "mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), persistent=False
        )
        self.register_buffer(
            "std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1), persistent=False
        )

    def train(self, mode: bool = True):
        """Keep the frozen feature network in eval mode (BatchNorm statistics fixed)."""
        super().train(mode)
        self.features.eval()
        return self

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        fx = self.features((x - self.mean) / self.std)
        with torch.no_grad():
            fy = self.features((y - self.mean) / self.std)
        return sum(F.l1_loss(a.float(), b.float()) for a, b in zip(fx, fy, strict=True)) / len(fx)


def load_vgg19(path: str) -> VGG19Features:
    """Build VGG-19 features from a torchvision-format state dict file (no download)."""
    net = VGG19Features()
    state = torch.load(path, map_location="cpu", weights_only=True)
    own = {k: v for k, v in state.items() if k.startswith("features.")}
    net.load_state_dict(own)
    return net
