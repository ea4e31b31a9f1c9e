"""Every registered network configuration: shapes, forward/backward, and the design's structural claims."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.models.compnet import (
    COMPNET_CONFIGS,
    ChannelNorm,
    CompNet,
    dequantize,
    quantize,
    quantize_ste,
)
from semcodec.models.discriminator import DISCRIMINATOR_CONFIGS, Discriminator
from semcodec.models.generator import GENERATOR_CONFIGS, Generator, upsample_base
from semcodec.models.segmentation import (
    SEG_CONFIGS,
    AtrousPyramid,
    ReNet,
    SegNet,
    coord_channels,
    load_backbone_weights,
)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SEG_CONFIGS))
def test_segnet_forward_backward(name: str) -> None:
    torch.manual_seed(0)
    net = SegNet(SEG_CONFIGS[name])
    x = torch.rand(1, 3, 48, 64)
    out = net(x)
    assert out.shape == (1, 11, 48, 64)
    out.mean().backward()
    assert net.fusion.grad is not None and torch.all(net.fusion.grad != 0)
    assert net.logits_lowres(x).shape == (1, 11, 6, 8)  # output stride 8
    p = net.predict(x)
    assert torch.allclose(p.sum(1), torch.ones(1, 48, 64), atol=1e-5)


def test_coord_channels_corners_and_centre() -> None:
    c = coord_channels(5, 7, torch.device("cpu"), torch.float32)
    i, j, r = c
    assert i[0, 0] == -1 and i[-1, 0] == 1 and j[0, 0] == -1 and j[0, -1] == 1
    assert i[2, 3] == 0 and j[2, 3] == 0 and r[2, 3] == 0
    assert torch.isclose(r[0, 0], torch.tensor(2.0).sqrt())


def test_renet_sweeps_rows_and_columns_both_directions() -> None:
    torch.manual_seed(0)
    renet = ReNet(2, 4)
    x = torch.zeros(1, 2, 5, 6)
    base = renet(x)
    for (yy, xx), should_reach in (
        ((2, 0), (2, 5)),
        ((2, 5), (2, 0)),
        ((0, 3), (4, 3)),
        ((4, 3), (0, 3)),
    ):
        x2 = x.clone()
        x2[0, :, yy, xx] = 1.0
        diff = (renet(x2) - base).abs().sum(1)[0]
        assert diff[should_reach] > 0  # information travels along the row / column, both ways
    # a change reaches the whole map (row sweep, then column sweep)
    x3 = x.clone()
    x3[0, :, 0, 0] = 1.0
    assert ((renet(x3) - base).abs().sum(1)[0] > 0).all()


def test_atrous_rates() -> None:
    pyr = AtrousPyramid(4, 3, (4, 6, 8, 12))
    assert [b.dilation[0] for b in pyr.branches] == [4, 6, 8, 12]
    assert all(b.kernel_size == (3, 3) for b in pyr.branches)
    assert pyr(torch.rand(1, 4, 16, 16)).shape == (1, 3, 16, 16)


def test_atrous_pyramid_in_one_product_is_the_convolutions_sum() -> None:
    """Without gradients the pyramid runs as one matrix product and shifted adds: the same
    scores as its dilated convolutions (to fp32 rounding), at every position, edges included."""
    torch.manual_seed(0)
    pyr = AtrousPyramid(5, 3, (1, 2, 5))
    for conv in pyr.branches:
        torch.nn.init.normal_(conv.weight)
        torch.nn.init.normal_(conv.bias)
    x = torch.rand(2, 5, 9, 13)
    convs = sum(conv(x) for conv in pyr.branches)
    with torch.no_grad():
        fast = pyr(x)
    assert fast.shape == convs.shape
    assert torch.allclose(fast, convs, atol=1e-5)
    assert pyr(x).requires_grad  # with gradients: the convolutions, for training


def test_backbone_weights_from_torchvision_style_state_dict(tmp_path) -> None:
    net = SegNet(SEG_CONFIGS["tiny"])
    state = {
        k: torch.full_like(v, 0.5)
        for k, v in net.rgb.backbone.state_dict().items()
        if v.is_floating_point()
    }
    torch.save(state, tmp_path / "resnet.pth")
    loaded = load_backbone_weights(net, torch.load(tmp_path / "resnet.pth", weights_only=True))
    assert "conv1.weight" in loaded and "layer1.0.conv1.weight" in loaded
    assert torch.all(net.gray.backbone.conv1.weight == 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMPNET_CONFIGS))
def test_compnet_layers_and_shape(name: str) -> None:
    net = CompNet(COMPNET_CONFIGS[name])
    convs = [m for m in net.net if isinstance(m, torch.nn.Conv2d)]
    w, k = COMPNET_CONFIGS[name].widths, COMPNET_CONFIGS[name].out_channels
    assert [c.out_channels for c in convs] == [*w, k]
    assert [c.kernel_size[0] for c in convs] == [7, 3, 3, 3, 7]
    assert [c.stride[0] for c in convs] == [1, 2, 2, 2, 1]
    assert isinstance(net.net[-1], torch.nn.Tanh)
    x, lab = torch.rand(2, 3, 32, 40), torch.randint(0, 11, (2, 4, 5))
    t = net(x, lab)
    assert t.shape == (2, k, 4, 5) and t.abs().max() <= 1
    t.sum().backward()


@pytest.mark.slow
def test_paper_compnet_is_blind_to_affine_changes_default_is_not() -> None:
    """The reason the shipped CompNet deviates from A3: instance norm removes mean and contrast.

    With a one-class map (a typical case: sky, a wall) the map adds a constant that the first
    instance norm removes, so A3 as written cannot tell a dark image from a bright one.
    """
    torch.manual_seed(0)
    x, lab = torch.rand(1, 3, 32, 32) * 0.5, torch.zeros(1, 4, 4, dtype=torch.long)
    paper = CompNet(COMPNET_CONFIGS["paper"]).eval()
    default = CompNet(COMPNET_CONFIGS["default"]).eval()
    with torch.no_grad():
        d_paper = (paper(x, lab) - paper(0.5 * x + 0.3, lab)).abs().max()
        d_default = (default(x, lab) - default(0.5 * x + 0.3, lab)).abs().max()
    assert d_paper < 2e-3  # only instance norm's epsilon leaks a trace of the change
    assert d_default > 20 * d_paper
    assert any(isinstance(m, ChannelNorm) for m in default.modules())


def test_quantisation_round_trip() -> None:
    levels = 16
    sym = torch.arange(levels).view(1, 1, 1, levels)
    assert torch.equal(quantize(dequantize(sym, levels), levels), sym)
    t = torch.linspace(-1, 1, 101, requires_grad=True)
    deq, y = quantize_ste(t, levels)
    assert torch.allclose(deq, dequantize(quantize(t.detach(), levels), levels), atol=1e-6)
    deq.sum().backward()
    assert torch.allclose(t.grad, torch.ones_like(t))  # straight-through


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GENERATOR_CONFIGS))
def test_generator_adds_enhancement_to_base(name: str) -> None:
    torch.manual_seed(0)
    gen = Generator(GENERATOR_CONFIGS[name])
    k = GENERATOR_CONFIGS[name].compact_channels
    t, lab = torch.rand(1, k, 8, 8) * 2 - 1, torch.randint(0, 11, (1, 8, 8))
    out, base = gen(t, lab, (64, 64))
    assert out.shape == base.shape == (1, 3, 64, 64)
    assert torch.allclose(base, upsample_base(t[:, :3], (64, 64)), atol=1e-6)  # RGB only
    # the last conv starts at zero: an untrained generator returns the base exactly
    assert torch.allclose(out, base)
    out.sum().backward()


@pytest.mark.parametrize("name", sorted(DISCRIMINATOR_CONFIGS))
def test_discriminator_two_scales(name: str) -> None:
    torch.manual_seed(0)
    d = Discriminator(DISCRIMINATOR_CONFIGS[name])
    seen: list[torch.Tensor] = []
    hooks = [net.register_forward_pre_hook(lambda _m, a: seen.append(a[0])) for net in d.scales]
    image, onehot, base = (
        torch.rand(2, 3, 32, 32),
        torch.rand(2, 11, 32, 32),
        torch.rand(2, 3, 32, 32),
    )
    feats = d(image, onehot, base)
    for h in hooks:
        h.remove()
    assert len(feats) == 2 and len(seen) == 2
    block = torch.cat([image, onehot, base], 1)
    assert torch.equal(seen[0], block)  # scale 1 sees the block itself
    # scale 2 sees the 2x (bilinear) upsampled block
    up = torch.nn.functional.interpolate(
        block, scale_factor=2, mode="bilinear", align_corners=False
    )
    assert seen[1].shape == (2, 17, 64, 64) and torch.equal(seen[1], up)
    s1, s2 = feats[0][-1], feats[1][-1]
    assert s1.shape[1] == s2.shape[1] == 1 and s2.shape[-1] > s1.shape[-1]
    assert len(feats[0]) == DISCRIMINATOR_CONFIGS[name].layers + 1


def test_thumbnail_skip_feeds_only_the_colour_channels() -> None:
    """With zero output weights the first three channels are the thumbnail, the rest tanh(bias)."""
    net = CompNet(COMPNET_CONFIGS["c8"]).eval()
    with torch.no_grad():
        net.net[-2].bias[3:] = 0.25
        x = torch.rand(1, 3, 32, 32)
        t = net(x, torch.zeros(1, 4, 4, dtype=torch.long))
    thumb = torch.nn.functional.avg_pool2d(x * 2 - 1, 8).clamp(-0.96, 0.96)
    assert torch.allclose(t[:, :3], thumb, atol=1e-6)
    assert torch.allclose(t[:, 3:], torch.full_like(t[:, 3:], float(np.tanh(0.25))), atol=1e-6)
