"""The map's open-set training and benchmark: outlier objects, their paste, the loss on them,
and the benchmark's arithmetic (AUROC, FPR at 95 % TPR, AP) on known inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.encoder.segment import labels_of
from semcodec.format.classes import NUM_CLASSES, UNKNOWN, VOID
from semcodec.train.anomaly import (
    ScoreHistogram,
    auroc,
    average_precision,
    fpr_at_tpr,
    pasted_frame,
    score_anomaly,
    shifted_frame,
    unknown_score,
)
from semcodec.train.data import camera_shift
from semcodec.train.outliers import (
    OUTLIER,
    OutlierObject,
    OutlierPaste,
    cut_object,
    object_mask,
    paste_object,
    uniform_ce,
)
from semcodec.train.seg import seg_loss


def _hist(outliers: list[float], inliers: list[float]) -> ScoreHistogram:
    h = ScoreHistogram()
    scores = np.array(outliers + inliers)
    h.add(scores, np.arange(len(scores)) < len(outliers))
    return h


def test_auroc_of_separated_reversed_and_equal_scores():
    assert auroc(_hist([0.9, 0.8], [0.1, 0.2, 0.3])) == pytest.approx(1.0)
    assert auroc(_hist([0.1, 0.2], [0.8, 0.9])) == pytest.approx(0.0)
    assert auroc(_hist([0.5] * 4, [0.5] * 6)) == pytest.approx(0.5)


def test_auroc_is_the_mann_whitney_statistic():
    rng = np.random.default_rng(3)
    out, inl = rng.uniform(0.3, 1, 300), rng.uniform(0, 0.7, 500)
    want = float((out[:, None] > inl[None, :]).mean())  # no ties among continuous draws
    assert auroc(_hist(list(out), list(inl))) == pytest.approx(want, abs=2e-3)


def test_fpr_at_95_tpr_counts_the_inliers_above_the_threshold_that_finds_95_percent():
    # 90 outliers at 0.9 and 10 at 0.3: finding 95 % needs the threshold at 0.3, which takes
    # the 10 inliers at 0.5 and none of the 90 at 0.05
    h = _hist([0.9] * 90 + [0.3] * 10, [0.5] * 10 + [0.05] * 90)
    assert fpr_at_tpr(h) == pytest.approx(0.10)
    assert fpr_at_tpr(_hist([0.9] * 100, [0.5] * 100)) == pytest.approx(0.0)


def test_average_precision_on_a_ranking_worked_by_hand():
    # ranked: out (0.9), in (0.8), out (0.7), in (0.1): precision 1 at recall 0.5, 2/3 at 1
    assert average_precision(_hist([0.9, 0.7], [0.8, 0.1])) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert average_precision(_hist([0.9, 0.8], [0.1])) == pytest.approx(1.0)


def test_unknown_score_thresholds_as_the_map_decides():
    rng = np.random.default_rng(0)
    scores = torch.from_numpy(rng.normal(0, 2, (NUM_CLASSES, 6, 7)).astype(np.float32))
    bias = tuple(float(v) for v in rng.normal(0, 0.5, NUM_CLASSES))
    s = unknown_score(scores, bias).numpy()
    for t in (0.3, 0.5, 0.7):
        unknown = labels_of(scores, t, bias) == UNKNOWN
        assert np.array_equal(unknown, (1 - s) < t)


def test_score_anomaly_counts_pasted_and_inlier_pixels_apart():
    scores = torch.zeros(NUM_CLASSES, 2, 3)
    scores[0, 0] = 10.0  # top row: sure of class 0; bottom row: all classes equal
    lab = np.array([[0, 0, VOID], [OUTLIER, OUTLIER, 1]])
    res = score_anomaly(iter([(scores, lab)]), (), (0.5,))
    d = res.as_dict(0.5)
    assert (d["pasted_pixels"], d["inlier_pixels"]) == (2, 3)  # the VOID pixel left out
    assert d["pasted_unknown"] == 1.0 and d["inlier_unknown"] == pytest.approx(1 / 3)


def _blob_segmentation() -> np.ndarray:
    seg = np.ones((60, 80), np.uint16)
    seg[20:40, 30:50] = 2  # an object inside the frame (8 % of it)
    seg[:, :10] = 3  # a strip along the border (12 %)
    return seg


def test_object_mask_takes_the_subject_not_the_background():
    seg = _blob_segmentation()
    mask = object_mask([seg, np.arange(4800, dtype=np.uint16).reshape(60, 80)])
    assert mask is not None and np.array_equal(mask, seg == 2)  # the coarser segmentation
    assert object_mask([np.ones((60, 80), np.uint16)]) is None  # all background


def _object() -> OutlierObject:
    """A disc of one colour, cut from a photo of that colour: its bounding box holds pixels
    that are not the object, and only the disc's may be pasted."""
    yy, xx = np.mgrid[:60, :80]
    disc = (yy - 30) ** 2 + (xx - 40) ** 2 < 15**2
    rgb = np.zeros((60, 80, 3), np.uint8)
    rgb[:] = (250, 10, 200)
    return cut_object(rgb, disc, "disc")


def test_paste_labels_exactly_the_object_pixels_and_leaves_the_inputs():
    x = torch.full((1, 3, 48, 64), 0.25)
    y = torch.zeros((1, 48, 64), dtype=torch.long)
    px, py = paste_object(x, y, _object(), np.random.default_rng(1))
    pasted = py[0] == OUTLIER
    assert 0.005 < float(pasted.float().mean()) < 0.2
    colour = torch.tensor([250, 10, 200]).float().div(255)[:, None]
    assert torch.allclose(px[0][:, pasted], colour.expand(-1, int(pasted.sum())), atol=1e-5)
    assert bool((px[0][:, ~pasted] == 0.25).all()) and bool((py[0][~pasted] == 0).all())
    assert bool((x == 0.25).all()) and bool((y == 0).all())


def test_benchmark_frames_are_fixed_by_seed_and_index():
    img = np.full((48, 64, 3), 60, np.uint8)
    lab = np.zeros((48, 64), np.uint8)
    a = pasted_frame(img, lab, [_object()], 3, 7)
    b = pasted_frame(img, lab, [_object()], 3, 7)
    c = pasted_frame(img, lab, [_object()], 4, 7)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])
    assert (a[1] == OUTLIER).any()


def test_outlier_paste_resumes_its_draws():
    x = torch.full((4, 3, 48, 64), 0.5)
    y = torch.zeros((4, 48, 64), dtype=torch.long)
    paste = OutlierPaste([_object()], 0.5, seed=5)
    paste(x, y)
    state = paste.rng.bit_generator.state
    want = paste(x, y)
    again = OutlierPaste([_object()], 0.5, seed=99)
    again.rng.bit_generator.state = state
    got = again(x, y)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


def test_outlier_pixels_are_trained_toward_equal_class_probabilities():
    """Outlier exposure's loss: the labelled pixels' mean plus the weighted mean over the
    pasted ones, lowest where every class is equally likely."""
    logits = torch.randn(1, NUM_CLASSES, 4, 4)
    target = torch.full((1, 4, 4), OUTLIER)
    target[0, 0, 0] = 2
    loss = seg_loss(logits, target, None, outlier_weight=0.5)
    ce = torch.nn.functional.cross_entropy(logits[:, :, 0, 0], torch.tensor([2]))
    want = ce + 0.5 * uniform_ce(logits)[target == OUTLIER].mean()  # two means, weighted
    assert float(loss) == pytest.approx(float(want), rel=1e-5)
    flat = torch.zeros(1, NUM_CLASSES, 1, 1)
    assert float(uniform_ce(flat)) == pytest.approx(np.log(NUM_CLASSES), rel=1e-6)
    sharp = flat.clone()
    sharp[0, 3] = 5.0
    assert float(uniform_ce(sharp)) > float(uniform_ce(flat))


def test_camera_shift_is_seeded_and_stays_an_image():
    x = torch.rand(1, 3, 40, 56)
    a = camera_shift(x, np.random.default_rng(2))
    b = camera_shift(x, np.random.default_rng(2))
    assert torch.equal(a, b) and a.shape == x.shape
    assert float(a.min()) >= 0 and float(a.max()) <= 1 and not torch.equal(a, x)


def test_shifted_frame_keeps_labels_aligned_with_pixels():
    img = np.zeros((48, 64, 3), np.uint8)
    img[:, 32:] = 255
    lab = np.zeros((48, 64), np.uint8)
    lab[:, 32:] = 1
    for i in range(6):
        rgb, y = shifted_frame(img, lab, i, 11)
        assert rgb.shape[:2] == y.shape
        right = y == 1
        assert rgb[right].mean() > rgb[~right].mean() + 40
