"""The map's decision rule fitted on labelled frames: per-class offsets to the class scores.

Training weights rare classes up (median-frequency balancing, person photos), which moves the
network's priors. Offsets added to the scores before the argmax and the UNKNOWN test
(`encoder.segment.labels_of`) move them back. They are fitted by coordinate ascent on mIoU,
and checked on halves of the frames: fitted on one half, scored on the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from semcodec.models.segmentation import CLASS_NAMES, NUM_CLASSES, VOID, SegNet

# the offsets tried for each class in turn (logits); two sweeps over the classes
OFFSETS = tuple(float(v) for v in np.arange(-1.0, 2.01, 0.25))
ROUNDS = 2
CHUNK = 1 << 20  # pixels a step where every pixel's scores would otherwise be copied


@dataclass
class PixelScores:
    """The class scores of every labelled pixel of some frames, as `eval seg` scores them."""

    scores: torch.Tensor  # (N, C) float32
    labels: torch.Tensor  # (N,) int64, true class
    frame: torch.Tensor  # (N,) int64, index of the pixel's frame

    def half(self, second: int) -> PixelScores:
        """The pixels of the first (0) or the second (1) half of the frames, in their order:
        the frames of a video, so the halves are two stretches of a drive (alternate frames
        would be near copies of each other)."""
        mid = (int(self.frame.max()) + 1) // 2
        if bool((self.frame[1:] >= self.frame[:-1]).all()):  # in frame order: views, no copy
            cut = int(torch.searchsorted(self.frame, mid))
            part = slice(cut, None) if second else slice(0, cut)
            return PixelScores(self.scores[part], self.labels[part], self.frame[part])
        keep = (self.frame >= mid) == bool(second)
        return PixelScores(self.scores[keep], self.labels[keep], self.frame[keep])


@torch.no_grad()
def pixel_scores(
    net: SegNet, images: np.ndarray, labels: np.ndarray, bf16: bool = False
) -> PixelScores:
    """Full-resolution class scores (train.seg.image_scores) of the labelled pixels."""
    from semcodec.train.seg import image_scores

    net.eval()
    n = int(sum(int((lab != VOID).sum()) for lab in labels))
    scores = torch.empty(n, NUM_CLASSES)  # filled in place: no list of parts to join
    truth = torch.empty(n, dtype=torch.int64)
    frame = torch.empty(n, dtype=torch.int64)
    at = 0
    for i, (img, lab) in enumerate(zip(images, labels, strict=True)):
        valid = torch.from_numpy(lab != VOID)
        k = int(valid.sum())
        scores[at : at + k] = image_scores(net, img, bf16)[:, valid].T
        truth[at : at + k] = torch.from_numpy(lab.astype(np.int64))[valid]
        frame[at : at + k] = i
        at += k
    return PixelScores(scores, truth, frame)


def _miou(truth: torch.Tensor, pred: torch.Tensor) -> float:
    """mIoU of predictions (NUM_CLASSES is UNKNOWN, a miss of its true class), as eval seg
    scores a confusion (train.seg.scores_of_conf)."""
    from semcodec.train.seg import scores_of_conf

    n = NUM_CLASSES + 1
    conf = torch.bincount(truth * n + pred, minlength=NUM_CLASSES * n).reshape(NUM_CLASSES, n)
    return scores_of_conf(conf.numpy())["miou"]


def decide(scores: torch.Tensor, bias: torch.Tensor, unknown_below: float) -> torch.Tensor:
    """The map's decision (segment.labels_of) on (N, C) scores with offsets ``bias``."""
    from semcodec.encoder.segment import labels_of

    out = torch.empty(len(scores), dtype=torch.int64)
    for a in range(0, len(scores), CHUNK):  # labels_of's temporaries a chunk at a time
        part = scores[a : a + CHUNK].T[:, :, None]
        labels = labels_of(part, unknown_below, tuple(bias.tolist()))
        out[a : a + CHUNK] = torch.from_numpy(labels[:, 0].astype(np.int64))
    return out


def _sweep_class(
    px: PixelScores, bias: torch.Tensor, c: int, unknown_below: float
) -> tuple[float, float]:
    """The best offset of class ``c`` with the others held, and its mIoU: the other classes'
    top score, its class and their log-sum-exp are computed once for every offset tried."""
    top_other, arg_other, lse_other = _rivals(px.scores, bias, c)
    base = px.scores[:, c]
    best = (-1.0, float(bias[c]))
    for v in OFFSETS:
        sc = base + v
        pred = torch.where(sc > top_other, c, arg_other)
        if unknown_below > 0:
            log_top = torch.maximum(sc, top_other) - torch.logaddexp(lse_other, sc)
            pred = torch.where(log_top < math.log(unknown_below), NUM_CLASSES, pred)
        m = _miou(px.labels, pred)
        if m > best[0] + 1e-9:
            best = (m, v)
    return best[1], best[0]


def _rivals(
    scores: torch.Tensor, bias: torch.Tensor, c: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The top offset score of the classes other than ``c``, its class, and their
    log-sum-exp, for every pixel (computed a chunk at a time: a copy of all the scores is
    760 MB on CamVid val)."""
    n = len(scores)
    top, arg, lse = torch.empty(n), torch.empty(n, dtype=torch.int64), torch.empty(n)
    for a in range(0, n, CHUNK):
        others = scores[a : a + CHUNK] + bias
        others[:, c] = -math.inf
        top[a : a + CHUNK], arg[a : a + CHUNK] = others.max(1)
        lse[a : a + CHUNK] = torch.logsumexp(others, 1)
    return top, arg, lse


def fit_class_bias(px: PixelScores, unknown_below: float) -> torch.Tensor:
    """Offsets (C,) that raise the mIoU of ``px``: each class in turn takes its best offset
    of OFFSETS, the others held, over ROUNDS sweeps; an offset stays 0 unless it pays."""
    bias = torch.zeros(NUM_CLASSES)
    best = _miou(px.labels, decide(px.scores, bias, unknown_below))
    for _ in range(ROUNDS):
        for c in range(NUM_CLASSES):
            v, m = _sweep_class(px, bias, c, unknown_below)
            if m > best + 1e-9:
                best, bias[c] = m, v
    return bias


def fit_report(px: PixelScores, unknown_below: float) -> dict:
    """Offsets fitted on all the frames, and the check on halves: fitted on the first half of
    the frames and scored on the second, and the other way round (what they are worth on
    frames they were not fitted on)."""
    halves = []
    for fit_on, score_on in ((0, 1), (1, 0)):
        bias = fit_class_bias(px.half(fit_on), unknown_below)
        held = px.half(score_on)
        halves.append(
            {
                "fitted_on": ("first half", "second half")[fit_on],
                "miou_without": _miou(held.labels, decide(held.scores, 0 * bias, unknown_below)),
                "miou_with": _miou(held.labels, decide(held.scores, bias, unknown_below)),
            }
        )
    bias = fit_class_bias(px, unknown_below)
    return {
        "class_bias": {n: float(v) for n, v in zip(CLASS_NAMES, bias, strict=True) if v != 0},
        "halves": halves,
        "miou_without": _miou(px.labels, decide(px.scores, 0 * bias, unknown_below)),
    }
