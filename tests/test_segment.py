"""The encoder's map of an image larger than the segmentation net's training scale."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec.encoder import segment
from semcodec.models.segmentation import SEG_CONFIGS, SegNet


def _net(work_side: int) -> SegNet:
    torch.manual_seed(7)
    net = SegNet(dataclasses.replace(SEG_CONFIGS["lite0-tiny"], work_side=work_side)).eval()
    with torch.no_grad():  # class scores that differ visibly across the image
        for conv in net.rgb.pyramid.branches:
            conv.weight.normal_(0.0, 0.5)
    return net


def _image(h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // w, y * 255 // h, (x + y) * 127 // (h + w)], -1)
    return np.clip(base + rng.integers(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    ("h", "w", "side", "expected"),
    [
        (64, 96, 0, (64, 96)),  # no working scale: the input's size
        (64, 96, 96, (64, 96)),  # not larger than the training scale
        (64, 96, 64, (43, 64)),  # toward it, long side first
        (96, 64, 64, (64, 43)),  # portrait
        (64, 96, 16, (32, 48)),  # at most MAX_DOWNSCALE smaller
    ],
)
def test_working_size(h: int, w: int, side: int, expected: tuple[int, int]) -> None:
    assert segment.working_size(_net(side), h, w) == expected


@pytest.mark.slow
def test_large_image_is_segmented_at_the_working_size() -> None:
    """The map of a 64x96 image with work_side 64 is the 43x64 image's scores, resized to the
    8x12 grid; it differs from the map at the input's size, so the scale is really used."""
    rgb = _image(64, 96)
    net = _net(64)
    labels = segment.label_map(net, rgb, bf16=False)
    assert labels.shape == (8, 12)
    small = np.asarray(Image.fromarray(rgb).resize((64, 43), Image.Resampling.BILINEAR))
    scores = segment.class_scores(net, segment.pad_rgb(small), bf16=False)[:, :, :6, :8]
    want = F.interpolate(scores, size=(8, 12), mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(labels, want[0].argmax(0).numpy())
    native = segment.class_scores(_net(0), segment.pad_rgb(rgb), bf16=False)[0].argmax(0)
    assert (native.numpy() != labels).any()


def test_full_resolution_labels_follow_the_same_scale() -> None:
    """`semcodec segment` and `eval seg` see the map the encoder stores, upsampled."""
    rgb = _image(60, 90)
    net = _net(48)
    assert segment.working_size(net, 60, 90) == (32, 48)
    small = np.asarray(Image.fromarray(rgb).resize((48, 32), Image.Resampling.BILINEAR))
    scores = segment.class_scores(net, segment.pad_rgb(small), bf16=False)[:, :, :4, :6]
    grid = F.interpolate(scores, size=(8, 12), mode="bilinear", align_corners=False)
    assert grid.shape[-2:] == (8, 12)
    full = segment.full_resolution_labels(net, rgb, bf16=False)
    assert full.shape == (60, 90)
    up = F.interpolate(grid, size=(64, 96), mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(full, up[0, :, :60, :90].argmax(0).numpy())


def _with_statistics(net: SegNet) -> SegNet:
    """BatchNorms with running statistics and affine terms far from the identity."""
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.3, generator=g)
                m.running_var.uniform_(0.5, 2.0, generator=g)
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.normal_(0, 0.2, generator=g)
    return net


def _scores(net: SegNet, rgb: np.ndarray) -> torch.Tensor:
    """Both branches and their fusion, run directly (no folding)."""
    x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255
    a, b = net.branch_inputs(x)
    with torch.no_grad():
        return net.fuse(net.rgb(a), net.gray(b))


def test_folded_batchnorm_gives_the_networks_scores() -> None:
    """Folding every EfficientNet BatchNorm into its convolution keeps the class scores (to
    fp32 rounding), leaves no such BatchNorm behind, and is what class_scores runs in fp32."""
    from semcodec.models.efficientnet import fold_batchnorm

    net = _with_statistics(_net(0))
    rgb = _image(64, 96)
    folded = segment.inference_form(net)
    assert folded is not net
    before, after = _scores(net, rgb), _scores(folded, rgb)
    assert not torch.equal(before, after)  # folded: other roundings
    assert torch.allclose(after, before, atol=1e-4 * float(before.abs().max()))
    n = sum(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())
    left = sum(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert left < n and fold_batchnorm(folded) == 0  # every EfficientNet one went
    assert torch.equal(  # class_scores runs the folded copy
        segment.class_scores(net, rgb, bf16=False), segment.class_scores(folded, rgb, bf16=False)
    )


def test_inference_form_follows_the_weights() -> None:
    """The folded copy is made once and made again when the weights change in place, and a
    network in training mode runs as it is."""
    net = _with_statistics(_net(0))
    first = segment.inference_form(net)
    assert segment.inference_form(net) is first
    with torch.no_grad():
        net.rgb.backbone.net._conv_stem.weight.mul_(2.0)
    second = segment.inference_form(net)
    assert second is not first
    assert not torch.equal(
        second.rgb.backbone.net._conv_stem.weight, first.rgb.backbone.net._conv_stem.weight
    )
    net.train()
    assert segment.inference_form(net) is net
