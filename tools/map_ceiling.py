"""The per-class IoU a map at 1/8 resolution can reach at best on CamVid, as `eval seg` scores it.

The oracle's class scores at each map position are the true shares of the classes in its 8x8
cell; `eval seg` upsamples a network's 1/8 scores bilinearly to the labels' size, and so does
this. A thin class (a pole a few pixels wide) rarely holds the largest share of a cell, so
its IoU has a ceiling well under 100 % even for a perfect network; scaling that class's share
(--boost CLASS=F, like a decision offset) shows how far a decision rule can move it.

    .venv/bin/python tools/map_ceiling.py --data ../shared/data/camvid --split val \\
        --boost pole=3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.format.tiling import MULTIPLE
from semcodec.models.segmentation import CLASS_NAMES, NUM_CLASSES, VOID
from semcodec.train.data import read_split


def oracle_labels(lab: np.ndarray, boost: torch.Tensor) -> np.ndarray:
    """Labels from the cells' class shares (times ``boost``), upsampled bilinearly."""
    h, w = lab.shape
    onehot = F.one_hot(
        torch.from_numpy(lab.astype(np.int64)).clamp(max=NUM_CLASSES), NUM_CLASSES + 1
    )
    share = F.avg_pool2d(
        onehot[..., :NUM_CLASSES].permute(2, 0, 1)[None].float(), MULTIPLE, MULTIPLE, ceil_mode=True
    )
    share = share * boost[None, :, None, None]
    up = F.interpolate(share, size=(h, w), mode="bilinear", align_corners=False)
    return up[0].argmax(0).numpy()


def ceiling(labels: np.ndarray, boost: torch.Tensor) -> dict[str, float]:
    """Per-class IoU of the oracle over a split's labels (void pixels ignored)."""
    conf = np.zeros((NUM_CLASSES, NUM_CLASSES), np.int64)
    for lab in labels:
        pred, valid = oracle_labels(lab, boost), lab != VOID
        idx = lab[valid].astype(np.int64) * NUM_CLASSES + pred[valid]
        conf += np.bincount(idx, minlength=NUM_CLASSES**2).reshape(NUM_CLASSES, NUM_CLASSES)
    inter = np.diag(conf).astype(np.float64)
    iou = inter / np.maximum(conf.sum(0) + conf.sum(1) - inter, 1)
    return {
        "miou": float(iou.mean()),
        **{n: float(v) for n, v in zip(CLASS_NAMES, iou, strict=True)},
    }


def main(argv: list[str] | None = None) -> None:
    """Print the ceiling of each class as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/camvid"))
    ap.add_argument("--split", default="val")
    ap.add_argument("--boost", action="append", default=[], metavar="CLASS=F")
    args = ap.parse_args(argv)
    boost = torch.ones(NUM_CLASSES)
    for item in args.boost:
        name, _, factor = item.partition("=")
        boost[CLASS_NAMES.index(name)] = float(factor)
    _, labels = read_split(args.data, args.split)
    result = {k: round(100 * v, 1) for k, v in ceiling(labels, boost).items()}
    print(json.dumps({"split": args.split, "boost": args.boost, "iou": result}))


if __name__ == "__main__":
    main()
