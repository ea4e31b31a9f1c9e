"""EfficientNet-Lite0 (B10's ImageNet backbone): its layer table against the pinned weights.

The pretrained package is a training dependency in the [dev] extra; these tests skip only where
it is not installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcodec.errors import ModelError
from semcodec.models.efficientnet import (
    PRETRAINED_SHA256,
    EfficientNetLite0,
    load_into,
    load_pretrained_state,
    pretrained_path,
)
from semcodec.models.segmentation import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    SEG_CONFIGS,
    SegNet,
    load_imagenet_weights,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _state() -> dict[str, torch.Tensor]:
    try:
        return load_pretrained_state()
    except ModelError as exc:
        pytest.skip(f"pretrained EfficientNet-Lite0 not installed: {exc}")


def _grace_hopper() -> torch.Tensor:
    """matplotlib's sample photo (the demo's) at 224², normalised as the backbone expects."""
    matplotlib = pytest.importorskip("matplotlib")
    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    img = Image.open(path).convert("RGB").resize((224, 224), Image.BICUBIC)
    x = torch.from_numpy(np.array(img)).permute(2, 0, 1).float()[None] / 255
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


@torch.no_grad()
def _probabilities(net: EfficientNetLite0) -> torch.Tensor:
    return net.eval()(_grace_hopper()).softmax(1)[0]


def test_pretrained_weights_recognise_the_demo_photo() -> None:
    """Grace Hopper in uniform: 'suit' 834 and 'military uniform' 652 lead, 'bow tie' 457 next.

    The probabilities are golden values of this layer table with the pinned weights: a wrong
    padding, activation or block order moves them by far more than the tolerance.
    """
    net = EfficientNetLite0()
    load_into(net, _state())
    p = _probabilities(net)
    top = p.topk(3)
    assert top.indices.tolist() == [834, 652, 457]
    assert abs(float(p[834]) - 0.2466) < 0.01 and abs(float(p[652]) - 0.2446) < 0.01
    assert abs(float(p[457]) - 0.0967) < 0.01


def test_a_wrong_layer_fails_the_golden_check() -> None:
    """The check above has teeth: one depthwise padding off, or two blocks swapped, fails it."""
    state = _state()
    padded = EfficientNetLite0()
    load_into(padded, state)
    padded._blocks[3]._depthwise_conv.padding = (0, 0)  # a 3x3 stride-2 conv without padding
    swapped = EfficientNetLite0()
    load_into(swapped, state)
    b = swapped._blocks
    b[6], b[7] = b[7], b[6]  # two blocks of the same shape, in the wrong order
    for net in (padded, swapped):
        p = _probabilities(net)
        assert not (
            p.topk(3).indices.tolist() == [834, 652, 457] and abs(float(p[834]) - 0.2466) < 0.01
        )


def test_loader_refuses_a_file_with_another_hash(tmp_path: Path) -> None:
    try:
        src = pretrained_path()
    except ModelError as exc:
        pytest.skip(str(exc))
    if not src.is_file():
        pytest.skip("pretrained EfficientNet-Lite0 not installed")
    copy = tmp_path / src.name
    shutil.copy(src, copy)
    with open(copy, "r+b") as f:  # one byte changed: still a loadable file, not the pinned one
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(ModelError, match="SHA-256"):
        load_pretrained_state(copy)
    assert len(load_pretrained_state(src, PRETRAINED_SHA256)) > 200


def test_loader_refuses_weights_that_do_not_fit_the_table() -> None:
    state = dict(_state())
    del state["_blocks.4._project_conv.weight"]
    with pytest.raises(ModelError, match="1 keys missing"):
        load_into(EfficientNetLite0(), state)
    state = dict(_state())
    state["_conv_stem.weight"] = torch.zeros(16, 3, 3, 3)
    with pytest.raises(ModelError, match="1 misshapen"):
        load_into(EfficientNetLite0(), state)


def test_imagenet_weights_go_into_both_segmentation_branches() -> None:
    torch.manual_seed(0)
    net = SegNet(SEG_CONFIGS["lite0-tiny"])
    state = _state()
    keys = load_imagenet_weights(net, state)
    assert "_blocks.15._project_conv.weight" in keys and "_fc.weight" not in keys
    for branch in (net.rgb, net.gray):
        got = branch.backbone.net.state_dict()["_blocks.15._project_conv.weight"]
        assert torch.equal(got, state["_blocks.15._project_conv.weight"])
    with pytest.raises(ValueError, match="lite0"):
        load_imagenet_weights(SegNet(SEG_CONFIGS["tiny"]), state)


def test_features_have_strides_8_16_32() -> None:
    net = EfficientNetLite0(head=False)
    f8, f16, f32 = net.features(torch.zeros(1, 3, 64, 96))
    assert (
        f8.shape == (1, 40, 8, 12) and f16.shape == (1, 112, 4, 6) and f32.shape == (1, 320, 2, 3)
    )
    with pytest.raises(RuntimeError):
        net(torch.zeros(1, 3, 32, 32))


def test_perceptual_term_can_use_the_frozen_imagenet_features() -> None:
    """`train codec --features imagenet`: the pinned ImageNet weights, frozen, three taps; a
    reconstruction farther from the target costs more."""
    from semcodec.models.losses import ImageNetLite0Features, PerceptualLoss
    from semcodec.train.codec_nets import perceptual_features

    state = _state()
    feats = perceptual_features("imagenet", None, None)
    assert isinstance(feats, ImageNetLite0Features)
    assert torch.equal(feats.net._conv_stem.weight, state["_conv_stem.weight"])
    loss = PerceptualLoss(feats)
    assert not any(p.requires_grad for p in loss.parameters())
    y = torch.rand(1, 3, 64, 64)
    maps = feats(y)
    assert [m.shape[1] for m in maps] == [40, 112, 320]
    x = y.clone().requires_grad_(True)
    near = loss(x + 0.01 * torch.randn_like(y), y)
    near.backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert loss(1 - y, y) > near
    with pytest.raises(ValueError, match="perceptual features"):
        perceptual_features("vgg", None, None)
