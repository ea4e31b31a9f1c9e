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
    ssimulacra2: float = 0.0  # (100 − SSIMULACRA 2) / 100 of each crop; not part of A9


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
    """The trained segmentation network's RGB backbone as the perceptual feature network.

    ResNet layout: the outputs of layer1..layer3. EfficientNet-Lite0 (``lite0``): the ends of
    stages 3, 5 and 7 (40, 112 and 320 channels at strides 8, 16 and 32).
    """

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        b = self.backbone
        if hasattr(b, "net"):  # models.segmentation.LiteFPN
            return b.net.features(x)
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        out = []
        for name in ("layer1", "layer2", "layer3"):
            x = getattr(b, name)(x)
            out.append(x)
        return out


class ImageNetLite0Features(nn.Module):
    """A9's L_VGG features from ImageNet: the pinned EfficientNet-Lite0, frozen, tapped at the
    ends of stages 3, 5 and 7 (40, 112 and 320 channels at strides 8, 16 and 32), equal weights.

    Why: features trained on 1.28 M ImageNet photos describe what people see better than a
    backbone fine-tuned on 468 street frames; VGG-19's weights are not available offline.
    """

    def __init__(self, state: dict[str, torch.Tensor] | None = None):
        super().__init__()
        from semcodec.models.efficientnet import EfficientNetLite0, load_into, load_pretrained_state

        self.net = EfficientNetLite0(head=False)
        load_into(self.net, load_pretrained_state() if state is None else state)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.net.features(x)


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


# --- SSIMULACRA 2 as a training loss ----------------------------------------------------------

#: Scales of SSIMULACRA 2; its weight table has one row of 6 numbers per (channel, scale, norm).
S2_SCALES = 6


def _s2_reference():
    """The ``ssimulacra2`` port's module: its opsin matrix and 108 weights define the metric."""
    try:
        from ssimulacra2 import ssimulacra2 as ref
    except ImportError as e:
        raise ImportError(
            "the SSIMULACRA 2 loss needs the optional extra: pip install 'semcodec[bench]' "
            f"[{type(e).__name__}: {e}]"
        ) from None
    return ref


def _srgb_to_linear(x: torch.Tensor) -> torch.Tensor:
    """IEC 61966-2-1 decoding curve on [0, 1] values."""
    x = x.clamp(0, 1)
    return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055).clamp_min(1e-12) ** 2.4)


def _linear_to_positive_xyb(lin: torch.Tensor, ref) -> torch.Tensor:
    """Linear RGB → XYB, shifted to positive values as SSIMULACRA 2 does."""
    m = lin.new_tensor(ref.kOpsinAbsorbanceMatrix.reshape(3, 3))
    bias = float(ref.kB0)
    mixed = torch.einsum("ij,njhw->nihw", m, lin) + bias
    mixed = mixed.clamp_min(1e-12) ** (1 / 3) - bias ** (1 / 3)  # the port clamps at 0
    x = 0.5 * (mixed[:, 0] - mixed[:, 1])
    y = 0.5 * (mixed[:, 0] + mixed[:, 1])
    b = mixed[:, 2]
    return torch.stack([x * 14.0 + 0.42, y + 0.01, (b - y) + 0.55], 1)


def _s2_blur(x: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """The port's Gaussian: radius 5, mirrored (edge-repeating) rows, zero padding on columns.

    (The port blurs a transposed array, padding its first axis with zeros: the image's width.)
    """
    r = int(3.33 * sigma + 0.5)
    t = torch.arange(-r, r + 1, dtype=x.dtype, device=x.device)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    c = x.shape[1]
    rows = torch.cat([x[..., :r, :].flip(-2), x, x[..., -r:, :].flip(-2)], -2)
    x = F.conv2d(rows, k.view(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)
    return F.conv2d(x, k.view(1, 1, 1, -1).repeat(c, 1, 1, 1), padding=(0, r), groups=c)


def _norms(d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image and channel: the 1-norm mean and the 4-norm of a non-negative error map."""
    m4 = (d**4).mean((-2, -1))
    # an all-zero map has norm 0; the clamp keeps the gradient of the root finite there
    return d.mean((-2, -1)), torch.where(m4 > 0, m4.clamp_min(1e-30) ** 0.25, 0.0)


def ssimulacra2_torch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """SSIMULACRA 2 of reconstructions x against originals y ([0, 1] RGB, N×3×H×W), per image.

    The formula of libjxl's ssimulacra2 with the port's constants and blur, written in torch
    so that a generator can be trained on it. The weight of each (channel, scale, norm) term
    is taken at its place in the 6-scale table, so crops with fewer scales (128 px: 5) are
    scored by the terms that exist, not by shifted ones. Equals the port to 1e-6 in float64
    (0.05 in float32) on images with all six scales (tests/test_perceptual.py).
    """
    ref = _s2_reference()
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = torch.as_tensor(ref.weights, dtype=dt, device=x.device)
    w = w.view(3, S2_SCALES, 2, 3)  # channel, scale, norm, (ssim, artifact, detail lost)
    lin1, lin2 = _srgb_to_linear(y.to(dt)), _srgb_to_linear(x.to(dt))
    total = x.new_zeros(x.shape[0], dtype=dt)
    for scale in range(S2_SCALES):
        if min(lin1.shape[-2:]) < 8:
            break
        i1, i2 = _linear_to_positive_xyb(lin1, ref), _linear_to_positive_xyb(lin2, ref)
        mu1, mu2 = _s2_blur(i1), _s2_blur(i2)
        s11, s22, s12 = _s2_blur(i1 * i1), _s2_blur(i2 * i2), _s2_blur(i1 * i2)
        num_m = 1.0 - (mu1 - mu2) ** 2
        num_s = 2.0 * (s12 - mu1 * mu2) + float(ref.kC2)
        den_s = (s11 - mu1 * mu1) + (s22 - mu2 * mu2) + float(ref.kC2)
        ssim = _norms((1.0 - num_m * num_s / den_s).clamp_min(0))
        ratio = (1.0 + (i2 - mu2).abs()) / (1.0 + (i1 - mu1).abs()) - 1.0
        art, lost = _norms(ratio.clamp_min(0)), _norms((-ratio).clamp_min(0))
        for n in range(2):  # per (N, 3) terms; weights of this scale and norm per channel
            terms = torch.stack([ssim[n], art[n], lost[n]], -1)  # N, 3 channels, 3 kinds
            total = total + (terms.abs() * w[:, scale, n]).sum((-2, -1))
        if scale < S2_SCALES - 1:
            lin1 = F.avg_pool2d(lin1, 2, ceil_mode=True)
            lin2 = F.avg_pool2d(lin2, 2, ceil_mode=True)
    # the port's (and libjxl's) final mapping of the weighted sum to the 100-point scale
    s = total * 0.9562382616834844
    s = 2.326765642916932 * s - 0.020884521182843837 * s**2 + 6.248496625763138e-05 * s**3
    return torch.where(s > 0, 100.0 - 10.0 * s.clamp_min(1e-12) ** 0.6276336467831387, 100.0)


def ssimulacra2_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(100 − SSIMULACRA 2) / 100, batch mean: 0 for identical images, about 1.2 at 0.1 bpp."""
    return ((100.0 - ssimulacra2_torch(x, y)) / 100.0).mean()
