"""Design B: dual-branch (RGB + grayscale) segmentation network with ReNet context (B2–B10, B13)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from semcodec.format.classes import CLASSES, NUM_CLASSES, PALETTE, VOID  # noqa: F401
from semcodec.models.efficientnet import EfficientNetLite0, load_into

CLASS_NAMES = CLASSES  # the name training and evaluation code use


@dataclass(frozen=True)
class SegConfig:
    """Sizes of the segmentation network; 'paper' is B as written, 'default' is sized for CPUs."""

    block: str = "basic"  # "basic" (ResNet-18/34) or "bottleneck" (ResNet-50/101)
    layers: tuple[int, int, int, int] = (2, 2, 2, 2)
    widths: tuple[int, int, int, int] = (32, 64, 96, 128)
    stem_width: int = 32
    gru_hidden: int = 150  # B6: 150 units per direction
    renet_out: int = 0  # 0: keep the 2*gru_hidden channels of the GRU output
    atrous_rates: tuple[int, ...] = (4, 6, 8, 12)  # B7
    num_classes: int = NUM_CLASSES
    output_stride: int = 8
    backbone: str = "resnet"  # "resnet" (DilatedResNet) or "lite0" (EfficientNet-Lite0 + FPN)
    fpn_width: int = 96  # lite0: channels of the stride-8 map merged from strides 8, 16, 32
    # long side (pixels) of the scale the network was trained at; larger images are segmented
    # downscaled toward it (by at most segment.MAX_DOWNSCALE); 0: always at the input's size
    work_side: int = 0
    # a map position whose largest class probability is below this is UNKNOWN (0: never)
    unknown_below: float = 0.0
    # per-class offsets added to the class scores before that decision (0 where absent): the
    # training's class weights shift its priors, and a release's offsets, fitted on CamVid val
    # (train.decision), shift them back; a bundle records them (`seg_class_bias` in its info)
    class_bias: tuple[float, ...] = ()


SEG_CONFIGS: dict[str, SegConfig] = {
    "paper": SegConfig(
        block="bottleneck", layers=(3, 4, 23, 3), widths=(64, 128, 256, 512), stem_width=64
    ),
    "default": SegConfig(),
    "tiny": SegConfig(layers=(1, 1, 1, 1), widths=(8, 8, 16, 16), stem_width=8, gru_hidden=8),
    # v2: both branches start from ImageNet EfficientNet-Lite0 (B10), a light top-down merge
    # to stride 8, narrower ReNet GRUs for CPU speed
    "lite0": SegConfig(backbone="lite0", gru_hidden=64, fpn_width=96, work_side=480),
    "lite0-tiny": SegConfig(backbone="lite0", gru_hidden=8, fpn_width=8),
    # v3 (default of 2026-12-02): lite0 whose map says UNKNOWN where the largest class
    # probability is below 0.5 (the highest CamVid val mIoU with at most 2 % unknown)
    "lite0-u": SegConfig(
        backbone="lite0", gru_hidden=64, fpn_width=96, work_side=480, unknown_below=0.5
    ),
    # v5 (default of 2026-12-06, `default-923db449`): lite0 trained with outlier exposure
    # (train.outliers), UNKNOWN where the largest class probability is below 0.4 (on CamVid val
    # with pasted objects: the highest threshold keeping in-vocabulary UNKNOWN under 3 %);
    # v6 (default of 2026-12-07, `default-6822cb1f`): the same network trained on with its
    # backbones, more camera shifts and person photos (seg-oe2, docs/training.md)
    "lite0-oe": SegConfig(
        backbone="lite0", gru_hidden=64, fpn_width=96, work_side=480, unknown_below=0.4
    ),
    # "tiny" whose map says UNKNOWN below a third of probability (tests of the 12-symbol map)
    "tiny-u": SegConfig(
        layers=(1, 1, 1, 1), widths=(8, 8, 16, 16), stem_width=8, gru_hidden=8, unknown_below=0.3
    ),
}


class BasicBlock(nn.Module):
    """ResNet basic block (two 3x3 convs), torchvision parameter names."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1, dilation: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(
            cin, width, 3, stride, padding=dilation, dilation=dilation, bias=False
        )
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, cout, 3, 1, padding=dilation, dilation=dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + idt)


class Bottleneck(nn.Module):
    """ResNet bottleneck block (1x1, 3x3, 1x1), torchvision parameter names."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, dilation: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(
            width, width, 3, stride, padding=dilation, dilation=dilation, bias=False
        )
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + idt)


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    """Projection shortcut when shape changes (torchvision's downsample.0/.1 names)."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class DilatedResNet(nn.Module):
    """B4's fully convolutional module: ResNet layout, output stride 8 via dilation."""

    def __init__(self, cfg: SegConfig):
        super().__init__()
        block = BasicBlock if cfg.block == "basic" else Bottleneck
        self.conv1 = nn.Conv2d(3, cfg.stem_width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(cfg.stem_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = cfg.stem_width
        strides, dilations = (1, 2, 1, 1), (1, 1, 2, 4)
        for i, (n, w, s, d) in enumerate(
            zip(cfg.layers, cfg.widths, strides, dilations, strict=True)
        ):
            blocks = []
            for k in range(n):
                blocks.append(block(cin, w, s if k == 0 else 1, d))
                cin = w * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.out_channels = cin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class LiteFPN(nn.Module):
    """B4 on EfficientNet-Lite0: strides 32 and 16 merged top-down into the stride-8 map.

    The backbone keeps ImageNet's strides (no dilation) and its coarse maps are added back at
    stride 8, so the head still sees 1/8 resolution at a fraction of a dilated network's cost.
    """

    def __init__(self, cfg: SegConfig):
        super().__init__()
        self.net = EfficientNetLite0(head=False)
        self.lateral = nn.ModuleList(
            nn.Conv2d(c, cfg.fpn_width, 1, bias=False) for c in self.net.tap_channels
        )
        self.bn = nn.BatchNorm2d(cfg.fpn_width)
        self.out_channels = cfg.fpn_width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.merge(*self.net.features(x))

    def merge(self, f8: torch.Tensor, f16: torch.Tensor, f32: torch.Tensor) -> torch.Tensor:
        """The top-down merge alone, so training can feed it cached EfficientNet features."""
        y = self.lateral[2](f32)
        y = _up(y, f16) + self.lateral[1](f16)
        y = _up(y, f8) + self.lateral[0](f8)
        return F.relu(self.bn(y))


def _up(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Bilinear resize of x to the spatial size of `like`."""
    return F.interpolate(x, size=like.shape[-2:], mode="bilinear", align_corners=False)


def coord_channels(h: int, w: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """B5: rows i and columns j scaled to [-1, 1], and r = sqrt(i^2 + j^2); shape (3, h, w)."""
    i = _scaled_index(h, device, dtype)
    j = _scaled_index(w, device, dtype)
    ii, jj = torch.meshgrid(i, j, indexing="ij")
    return torch.stack([ii, jj, torch.sqrt(ii * ii + jj * jj)])


def _scaled_index(n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """0..n-1 scaled linearly to [-1, 1], exact at the ends and the centre."""
    if n == 1:
        return torch.zeros(1, device=device, dtype=dtype)
    k = torch.arange(n, device=device, dtype=torch.float64)
    return ((2 * k - (n - 1)) / (n - 1)).to(dtype)


class CoordConcat(nn.Module):
    """B5's coordinate-channel module."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        c = coord_channels(h, w, x.device, x.dtype).unsqueeze(0).expand(b, -1, -1, -1)
        return torch.cat([x, c], 1)


class ReNet(nn.Module):
    """B6: a bidirectional GRU sweeping every row, then one sweeping every column."""

    def __init__(self, cin: int, hidden: int):
        super().__init__()
        self.row_gru = nn.GRU(cin, hidden, batch_first=True, bidirectional=True)
        self.col_gru = nn.GRU(2 * hidden, hidden, batch_first=True, bidirectional=True)
        self.out_channels = 2 * hidden
        for gru in (
            self.row_gru,
            self.col_gru,
        ):  # B10: recurrent weights from U(-1/sqrt(h), 1/sqrt(h))
            for p in gru.parameters():
                nn.init.uniform_(p, -(hidden**-0.5), hidden**-0.5)

    @staticmethod
    def _sweep(gru: nn.GRU, x: torch.Tensor) -> torch.Tensor:
        """Run the GRU along the last axis of (B, C, H, W) for every row independently."""
        b, c, h, w = x.shape
        seq = x.permute(0, 2, 3, 1).reshape(b * h, w, c)
        out, _ = gru(seq)
        return out.reshape(b, h, w, -1).permute(0, 3, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sweep(self.row_gru, x)  # horizontal: along W, both directions
        x = self._sweep(self.col_gru, x.transpose(2, 3)).transpose(2, 3)  # vertical: along H
        return x.contiguous()


class AtrousPyramid(nn.Module):
    """B7: four 3x3 dilated convolutions (rates 4, 6, 8, 12) whose class scores are summed."""

    def __init__(self, cin: int, num_classes: int, rates: tuple[int, ...]):
        super().__init__()
        self.branches = nn.ModuleList(
            nn.Conv2d(cin, num_classes, 3, padding=r, dilation=r) for r in rates
        )
        for conv in self.branches:  # B10: Gaussian initialisation
            nn.init.normal_(conv.weight, 0.0, 0.01)
            nn.init.zeros_(conv.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return sum(branch(x) for branch in self.branches)
        return self.one_product(x)

    def one_product(self, x: torch.Tensor) -> torch.Tensor:
        """The summed scores without gradients: every tap of every rate in one matrix product
        (channels of the input × rates · 9 · classes), then each tap's scores added at its
        shift. oneDNN ran each dilated convolution with few output channels at about a
        quarter of the FMA units' peak: 20 of a Kodak map's 170 ms on one AVX2 thread, 6 this
        way."""
        b, c, h, w = x.shape
        k = self.branches[0].out_channels
        weights = torch.cat(
            [conv.weight.permute(1, 2, 3, 0).reshape(c, -1) for conv in self.branches], 1
        )
        taps = (x.permute(0, 2, 3, 1).reshape(-1, c) @ weights.to(x.dtype)).reshape(b, h, w, -1)
        out = torch.zeros((b, h, w, k), dtype=torch.float32, device=x.device)
        out += sum(conv.bias for conv in self.branches).float()
        col = 0
        for conv in self.branches:
            r = conv.dilation[0]
            for dy in (-r, 0, r):
                for dx in (-r, 0, r):
                    (ys, ys2), (xs, xs2) = _overlap(h, dy), _overlap(w, dx)
                    if ys.stop > ys.start and xs.stop > xs.start:
                        out[:, ys, xs] += taps[:, ys2, xs2, col : col + k]
                    col += k
        return out.permute(0, 3, 1, 2)


def _overlap(n: int, shift: int) -> tuple[slice, slice]:
    """Output positions i of an axis of n whose tap i + shift lies inside it, and those taps
    (the zero padding contributes nothing)."""
    out = slice(max(0, -shift), min(n, n - shift))
    return out, slice(out.start + shift, out.stop + shift)


class Branch(nn.Module):
    """B4: backbone → coords → ReNet → coords → ReNet → atrous pyramid."""

    def __init__(self, cfg: SegConfig):
        super().__init__()
        self.backbone = LiteFPN(cfg) if cfg.backbone == "lite0" else DilatedResNet(cfg)
        self.coord = CoordConcat()
        self.renet1 = ReNet(self.backbone.out_channels + 3, cfg.gru_hidden)
        self.renet2 = ReNet(self.renet1.out_channels + 3, cfg.gru_hidden)
        self.pyramid = AtrousPyramid(self.renet2.out_channels, cfg.num_classes, cfg.atrous_rates)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))

    def head(self, f: torch.Tensor) -> torch.Tensor:
        """Everything after the backbone: ReNet sweeps over whole rows and columns, pyramid."""
        f = self.renet1(self.coord(f))
        f = self.renet2(self.coord(f))
        return self.pyramid(f)


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class SegNet(nn.Module):
    """B2/B3/B8/B9: RGB and grayscale branches, learned weighted fusion, softmax, upsampling."""

    def __init__(self, cfg: SegConfig | None = None):
        super().__init__()
        cfg = cfg or SegConfig()
        self.cfg = cfg
        self.rgb = Branch(cfg)
        self.gray = Branch(cfg)
        self.fusion = nn.Parameter(torch.tensor([1.0, 1.0]))  # B8: learned branch weights
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def logits_lowres(self, x: torch.Tensor) -> torch.Tensor:
        """Fused class scores at 1/8 resolution; x is RGB in [0, 1], H and W multiples of 8."""
        rgb, gray = self.branch_inputs(x)
        return self.fuse(self.rgb(rgb), self.gray(gray))

    def branch_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """B2/B3: the normalised inputs of the RGB and the grayscale branch."""
        gray = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]).expand(-1, 3, -1, -1)
        return (x - self.mean) / self.std, (gray - self.mean) / self.std

    def fuse(self, rgb: torch.Tensor, gray: torch.Tensor) -> torch.Tensor:
        """B8: the learned weighted sum of the two branches' class scores."""
        return self.fusion[0] * rgb + self.fusion[1] * gray

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Full-resolution class scores (pre-softmax) for training with cross-entropy."""
        return F.interpolate(
            self.logits_lowres(x), size=x.shape[-2:], mode="bilinear", align_corners=False
        )

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """B9/B13: per-pixel probabilities at the input size."""
        return torch.softmax(self.forward(x), dim=1)


def parse_class_bias(text: str) -> dict[str, float]:
    """Class offsets written 'pole=0.75,road=-0.5' (the form `eval seg` and `train attach`
    take); ValueError names what is wrong."""
    bias: dict[str, float] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise ValueError(f"{item!r} is not CLASS=OFFSET")
        try:
            bias[name] = float(value)
        except ValueError:
            raise ValueError(f"offset {value!r} of {name} is not a number") from None
    checked_bias(bias)
    return bias


def checked_bias(bias: dict[str, float]) -> None:
    """ValueError unless every key is a class name and every offset a finite number."""
    for name, value in bias.items():
        if name not in CLASS_NAMES:
            raise ValueError(f"unknown class {name!r} (classes: {', '.join(CLASS_NAMES)})")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"offset of {name} is not a finite number")


def with_class_bias(cfg: SegConfig, bias: dict[str, float] | None) -> SegConfig:
    """``cfg`` with a release's class offsets, given by class name (an unnamed class gets 0)."""
    if not bias:
        return cfg
    checked_bias(bias)
    return replace(cfg, class_bias=tuple(float(bias.get(n, 0.0)) for n in CLASS_NAMES))


def build_segnet(name: str = "default") -> SegNet:
    """Construct a registered segmentation configuration."""
    return SegNet(SEG_CONFIGS[name])


def load_backbone_weights(net: SegNet, state: dict[str, torch.Tensor]) -> list[str]:
    """B10: copy a torchvision-format ResNet state dict into both branches; returns loaded keys."""
    loaded = []
    for branch in (net.rgb, net.gray):
        own = branch.backbone.state_dict()
        for k, v in state.items():
            if k in own and own[k].shape == v.shape:
                own[k] = v.clone()
                loaded.append(k)
        branch.backbone.load_state_dict(own)
    return sorted(set(loaded))


def load_imagenet_weights(net: SegNet, state: dict[str, torch.Tensor]) -> list[str]:
    """B10 for lite0 configurations: the ImageNet EfficientNet-Lite0 in both branches."""
    loaded: list[str] = []
    for branch in (net.rgb, net.gray):
        if not isinstance(branch.backbone, LiteFPN):
            raise ValueError("ImageNet EfficientNet-Lite0 weights need a 'lite0' configuration")
        loaded = load_into(branch.backbone.net, state)
    return loaded
