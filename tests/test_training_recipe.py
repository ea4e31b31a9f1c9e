"""The segmentation recipes' options on the CPU trainer (aspect, blur, hard examples, the
boundary band), shared
with the GPU trainer: each does what it says, and off they leave the draws as they were."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.models.segmentation import VOID, build_segnet
from semcodec.train import gpu
from semcodec.train.data import SegAugment, synthetic_segmentation
from semcodec.train.persons import NOT_PERSON, PERSON
from semcodec.train.seg import boundary_band, ohem_loss, pixel_loss, seg_loss, train_step


def _spans(aug_seed: int, aspect: float, n: int = 12) -> list[float]:
    """Horizontal over vertical scale of n crops, read off labels that number columns and rows."""
    h, w, crop = 200, 240, (64, 64)
    rows = np.repeat(np.arange(h, dtype=np.uint8)[:, None], w, 1)[None]
    cols = np.repeat((np.arange(w) % 256).astype(np.uint8)[None], h, 0)[None]
    img = np.zeros((1, h, w, 3), np.uint8)
    out = []
    by_row = SegAugment(crop, scale=(1.0, 1.0), seed=aug_seed, aspect=aspect)
    by_col = SegAugment(crop, scale=(1.0, 1.0), seed=aug_seed, aspect=aspect)
    for _ in range(n):
        _, yr = by_row(img, rows, 1)  # the same draws: the same geometry
        _, yc = by_col(img, cols, 1)
        v = float(yr[0, :, 0].max() - yr[0, :, 0].min() + 1) / crop[0]  # source rows a row
        u = float(yc[0, 0].max() - yc[0, 0].min() + 1) / crop[1]  # source columns a column
        out.append(v / u)
    return out


@pytest.mark.slow
def test_aspect_changes_the_ratio_of_the_crops_source_region() -> None:
    """--aspect A stretches the width by exp(U(-A, A)); without it the source region keeps the
    crop's proportions."""
    plain = _spans(3, 0.0)
    assert all(abs(r - 1) < 0.05 for r in plain)
    stretched = _spans(3, 0.25)
    assert all(np.exp(-0.25) - 0.05 < r < np.exp(0.25) + 0.05 for r in stretched)
    assert max(stretched) / min(stretched) > 1.2


def _high_frequency_share(x: torch.Tensor) -> float:
    """Energy of neighbouring pixels' differences over the picture's variance."""
    d = (x[..., 1:] - x[..., :-1]).pow(2).mean() + (x[..., 1:, :] - x[..., :-1, :]).pow(2).mean()
    return float(d / x.var())


@pytest.mark.slow
def test_blur_lowers_high_frequency_energy() -> None:
    """--blur 1 blurs every crop: less energy in neighbouring-pixel differences of noise."""
    rng = np.random.default_rng(0)
    img = rng.integers(64, 192, (1, 96, 128, 3), dtype=np.uint8)
    lab = np.zeros((1, 96, 128), np.uint8)
    sharp = SegAugment((48, 64), scale=(1.0, 1.0), seed=1)(img, lab, 6)[0]
    soft = SegAugment((48, 64), scale=(1.0, 1.0), seed=1, blur=1.0)(img, lab, 6)[0]
    for a, b in zip(sharp, soft, strict=True):
        assert _high_frequency_share(b) < 0.8 * _high_frequency_share(a)  # sigma 0.5: 0.7x


@pytest.mark.slow
def test_cpu_and_gpu_trainers_draw_the_same_crops() -> None:
    """One definition of recipe C's augmentation: the CPU augmenter and the GPU trainer's
    sampler, from the same generator state, give the same crops."""
    images, labels = synthetic_segmentation(4, 80, 100, seed=2)
    run = gpu.SegRun(crop=(48, 64), scale=(0.5, 2.0), aspect=0.25, blur=0.5)
    x, y = SegAugment(run.crop, run.scale, seed=7, aspect=run.aspect, blur=run.blur)(
        images, labels, 8
    )
    rng = np.random.default_rng(7)
    for i in range(8):
        k = int(rng.integers(0, len(images)))
        gx, gy = gpu.seg_sample(torch.from_numpy(images[k]), torch.from_numpy(labels[k]), run, rng)
        assert torch.equal(gx[0], x[i]) and torch.equal(gy[0], y[i])


def test_ohem_is_the_mean_of_the_hardest_share() -> None:
    """--ohem K: the loss is the mean cross-entropy of the hardest K of the labelled pixels."""
    torch.manual_seed(0)
    logits = torch.randn(2, 11, 4, 5) * 3
    target = torch.randint(0, 11, (2, 4, 5))
    target[0, 0] = VOID
    per = torch.nn.functional.cross_entropy(logits, target, ignore_index=VOID, reduction="none")
    vals = per[target != VOID].sort(descending=True).values
    k = int(0.25 * vals.numel())
    assert float(ohem_loss(logits, target, None, 0.25)) == pytest.approx(float(vals[:k].mean()))
    assert float(ohem_loss(logits, target, None, 0.25)) > float(seg_loss(logits, target, None))
    assert float(ohem_loss(logits, target, None, 0.0)) == float(seg_loss(logits, target, None))


def _frozen_step_setup():
    """A tiny network, two synthetic frames and an optimiser that moves nothing (lr 0), with
    the logits before the step: a step's returned loss can be checked against a loss function."""
    torch.manual_seed(0)
    net = build_segnet("tiny")
    images, labels = synthetic_segmentation(2, 32, 32)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    y = torch.from_numpy(labels).long()
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    with torch.no_grad():
        logits = net(x)
    return net, opt, x, y, torch.device("cpu"), logits


@pytest.mark.slow
def test_train_step_trains_on_the_hard_examples_when_asked() -> None:
    """train seg --ohem reaches the step: its loss is the hard pixels' one."""
    net, opt, x, y, dev, logits = _frozen_step_setup()
    plain = train_step(net, opt, x, y, None, dev, False)
    hard = train_step(net, opt, x, y, None, dev, False, ohem=0.25)
    assert plain == pytest.approx(float(seg_loss(logits, y, None)), rel=1e-5)
    assert hard == pytest.approx(float(ohem_loss(logits, y, None, 0.25)), rel=1e-5)
    assert hard > plain


def test_boundary_band_is_the_pixels_near_another_labelled_class() -> None:
    """The band holds the labelled pixels within the radius of another class, never void's edge."""
    target = torch.zeros(1, 12, 16, dtype=torch.long)
    target[0, :, 8:] = 3  # one vertical edge between columns 7 and 8
    target[0, :, :2] = VOID  # an edge with void only
    band = boundary_band(target, radius=2)
    cols = band[0].any(0).nonzero().flatten().tolist()
    assert cols == [6, 7, 8, 9]
    assert bool(band[0].all(0)[6:10].all())
    pole = torch.full((1, 12, 16), 2, dtype=torch.long)
    pole[0, :, 7] = 5  # a pole one pixel wide: all of it in the band
    assert bool(boundary_band(pole, radius=2)[0, :, 7].all())


def test_boundary_weight_scales_the_band_in_the_mean() -> None:
    """--boundary-weight B: the band's pixels count B times in the weighted mean; 1 is the plain
    loss, class weights and person photos' negative terms included."""
    torch.manual_seed(0)
    logits = torch.randn(2, 11, 20, 24) * 2
    target = torch.zeros(2, 20, 24, dtype=torch.long)  # regions: the band is part of them
    target[:, :, 12:] = 1
    target[:, 14:] = 2
    target[1, :4] = NOT_PERSON
    target[1, 4:6] = PERSON
    weight = torch.rand(11) + 0.5
    assert float(pixel_loss(logits, target, weight, boundary=1.0)) == float(
        seg_loss(logits, target, weight)
    )
    t = target[:1]
    band = boundary_band(t).float()
    assert 0 < float(band.mean()) < 1
    per = torch.nn.functional.cross_entropy(logits[:1], t, weight=weight, reduction="none")
    pw = 1 + 2 * band
    want = (per * pw).sum() / (weight[t] * pw).sum()
    assert float(pixel_loss(logits[:1], t, weight, boundary=3.0)) == pytest.approx(float(want))
    assert float(pixel_loss(logits, target, weight, boundary=3.0)) != pytest.approx(
        float(seg_loss(logits, target, weight))
    )


@pytest.mark.slow
def test_train_step_weights_the_boundary_when_asked() -> None:
    """train seg --boundary-weight reaches the step."""
    net, opt, x, y, dev, logits = _frozen_step_setup()
    got = train_step(net, opt, x, y, None, dev, False, boundary=4.0)
    assert got == pytest.approx(float(pixel_loss(logits, y, None, boundary=4.0)), rel=1e-6)
    assert got != pytest.approx(float(seg_loss(logits, y, None)), rel=2e-5)
