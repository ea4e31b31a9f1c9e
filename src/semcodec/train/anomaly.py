"""The map's open-set benchmarks: pasted objects it has no class for, and other cameras.

`eval seg --anomaly GT` pastes one object of train.outliers' benchmark photos (BSDS500 test,
never trained on) into each frame of a CamVid split, a fixed seed per frame, and scores the
UNKNOWN score of every labelled pixel: one minus the largest class probability after the
network's offsets, the quantity the map's UNKNOWN test thresholds. `eval seg --shift SEED`
scores a copy of the split as another camera would see it (data.camera_shift, a larger frame).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.format.classes import NUM_CLASSES
from semcodec.train.outliers import OUTLIER, OutlierObject, paste_object

BINS = 1 << 16  # resolution of the score histograms (scores in [0, 1])
PASTE_SEED = 20261206  # the benchmark's frames: frame i pasted with generator (seed, i)


@dataclass
class ScoreHistogram:
    """Counts of the UNKNOWN score in BINS bins, apart for pasted and in-vocabulary pixels:
    enough for AUROC, FPR at 95 % TPR and AP over millions of pixels, streamed frame by frame."""

    outlier: np.ndarray = field(default_factory=lambda: np.zeros(BINS, np.int64))
    inlier: np.ndarray = field(default_factory=lambda: np.zeros(BINS, np.int64))

    def add(self, score: np.ndarray, is_outlier: np.ndarray) -> None:
        """Count the scores (in [0, 1]) of some pixels, each an outlier or not."""
        idx = np.clip((score * BINS).astype(np.int64), 0, BINS - 1)
        self.outlier += np.bincount(idx[is_outlier], minlength=BINS)
        self.inlier += np.bincount(idx[~is_outlier], minlength=BINS)


def _rates(h: ScoreHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True and false positive rates and precision with every bin edge as the threshold,
    from the highest score down (a pixel at or above the threshold is called an outlier)."""
    tp = np.cumsum(h.outlier[::-1])
    fp = np.cumsum(h.inlier[::-1])
    tpr = tp / max(1, int(h.outlier.sum()))
    fpr = fp / max(1, int(h.inlier.sum()))
    precision = tp / np.maximum(tp + fp, 1)
    return tpr, fpr, precision


def auroc(h: ScoreHistogram) -> float:
    """Area under the ROC curve (ties within a bin counted as half)."""
    tpr, fpr, _ = _rates(h)
    tpr, fpr = np.concatenate([[0.0], tpr]), np.concatenate([[0.0], fpr])
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2))


def fpr_at_tpr(h: ScoreHistogram, tpr_wanted: float = 0.95) -> float:
    """The share of in-vocabulary pixels called outliers at the first threshold that finds
    ``tpr_wanted`` of the outliers."""
    tpr, fpr, _ = _rates(h)
    at = int(np.searchsorted(tpr, tpr_wanted - 1e-12))
    return float(fpr[min(at, len(fpr) - 1)])


def average_precision(h: ScoreHistogram) -> float:
    """AP: precision summed over the recall steps, from the highest score down."""
    tpr, _, precision = _rates(h)
    recall = np.concatenate([[0.0], tpr])
    return float(np.sum((recall[1:] - recall[:-1]) * precision))


def unknown_score(scores: torch.Tensor, class_bias: tuple[float, ...] = ()) -> torch.Tensor:
    """(H, W) one minus the largest class probability of (C, H, W) scores plus the offsets:
    what the map's UNKNOWN test compares with ``unknown_below`` (encoder.segment.labels_of)."""
    if class_bias:
        scores = scores + torch.tensor(class_bias, dtype=scores.dtype)[:, None, None]
    return 1.0 - torch.softmax(scores.float(), 0).amax(0)


def pasted_frame(
    img: np.ndarray, lab: np.ndarray, objects: list[OutlierObject], index: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Frame ``index`` of the benchmark: one object (chosen by the frame's own generator)
    pasted into the frame, its pixels labelled OUTLIER; the same for every run."""
    rng = np.random.default_rng([seed, index])
    obj = objects[int(rng.integers(0, len(objects)))]
    x = torch.from_numpy(img.copy()).permute(2, 0, 1).float().div(255)[None]
    y = torch.from_numpy(lab.astype(np.int64))[None]
    x, y = paste_object(x, y, obj, rng)
    rgb = (x[0].permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
    return rgb, y[0].numpy()


def pasted_frames(
    images: np.ndarray, labels: np.ndarray, objects: list[OutlierObject], seed: int = PASTE_SEED
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The benchmark's frames of a split, one by one."""
    for i, (img, lab) in enumerate(zip(images, labels, strict=True)):
        yield pasted_frame(img, lab, objects, i, seed)


def shifted_frame(
    img: np.ndarray, lab: np.ndarray, index: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Frame ``index`` as another camera gives it: half the frames at 1.3-2.2 times the size
    (a dash camera's resolution; labels resized with them), then data.camera_shift."""
    from semcodec.train.data import camera_shift

    rng = np.random.default_rng([seed, index])
    x = torch.from_numpy(img.copy()).permute(2, 0, 1).float().div(255)[None]
    y = torch.from_numpy(lab.astype(np.float32))[None, None]
    if rng.random() < 0.5:
        s = float(rng.uniform(1.3, 2.2))
        size = (round(x.shape[-2] * s / 8) * 8, round(x.shape[-1] * s / 8) * 8)
        x = F.interpolate(x, size=size, mode="bicubic", align_corners=False).clamp(0, 1)
        y = F.interpolate(y, size=size, mode="nearest")
    x = camera_shift(x, rng)
    rgb = (x[0].permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
    return rgb, y[0, 0].numpy().astype(np.uint8)


@dataclass
class AnomalyResult:
    """The benchmark's figures at the network's threshold and at others."""

    hist: ScoreHistogram
    pasted_unknown: dict[float, int]  # threshold -> pasted pixels called UNKNOWN
    inlier_unknown: dict[float, int]  # threshold -> in-vocabulary pixels called UNKNOWN

    def as_dict(self, threshold: float) -> dict:
        """JSON figures: AUROC, FPR at 95 % TPR, AP, and the UNKNOWN shares per threshold."""
        n_out, n_in = int(self.hist.outlier.sum()), int(self.hist.inlier.sum())
        shares = {
            f"{t:g}": {
                "pasted_unknown": self.pasted_unknown[t] / max(1, n_out),
                "inlier_unknown": self.inlier_unknown[t] / max(1, n_in),
            }
            for t in sorted(self.pasted_unknown)
        }
        return {
            "auroc": auroc(self.hist),
            "fpr95": fpr_at_tpr(self.hist),
            "ap": average_precision(self.hist),
            "pasted_pixels": n_out,
            "inlier_pixels": n_in,
            "unknown_below": threshold,
            **shares[f"{threshold:g}"],
            "sweep": shares,
        }


def score_anomaly(
    frame_scores: Iterator[tuple[torch.Tensor, np.ndarray]],
    class_bias: tuple[float, ...],
    thresholds: tuple[float, ...],
) -> AnomalyResult:
    """Stream (C, H, W) scores and labels (OUTLIER where pasted) into the benchmark's counts."""
    hist = ScoreHistogram()
    pasted = dict.fromkeys(thresholds, 0)
    inlier = dict.fromkeys(thresholds, 0)
    for scores, lab in frame_scores:
        s = unknown_score(scores, class_bias).numpy()
        keep = (lab < NUM_CLASSES) | (lab == OUTLIER)  # labelled or pasted; VOID left out
        is_out = lab[keep] == OUTLIER
        hist.add(s[keep], is_out)
        prob = 1.0 - s[keep]
        for t in thresholds:
            unknown = prob < t
            pasted[t] += int((unknown & is_out).sum())
            inlier[t] += int((unknown & ~is_out).sum())
    return AnomalyResult(hist, pasted, inlier)
