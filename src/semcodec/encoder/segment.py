"""A1 as every caller runs it: the class scores and label map of an image at 1/8 resolution.

One entry point for the encoder, `semcodec segment`, `semcodec eval seg` and the maps training
learns from, with one decision on scale (working_size: toward the scale the network was
trained at), tiling (tiling.py), threads (one per branch: the RGB and grey-level branches run
side by side) and precision (runtime.bf16_decision unless told).
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Sequence
from itertools import chain
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec import runtime
from semcodec.encoder.netinput import context_pixels
from semcodec.format.classes import UNKNOWN
from semcodec.format.tiling import DEFAULT_TILING, MULTIPLE, Region, Tiling, pad_rgb, paste
from semcodec.models.efficientnet import fold_batchnorm
from semcodec.models.segmentation import Branch, SegNet

T = TypeVar("T")
Runner = Callable[[Sequence[Callable[[], T]], str], list[T]]

SEG_HEAD_MAX = 1 << 20  # map positions (64 Mpixel) up to which the segmentation head is global
# a larger image is segmented at most this much smaller, so small objects keep a few pixels
MAX_DOWNSCALE = 2.0


def _side_by_side(tasks: Sequence[Callable[[], T]], _stage: str = "") -> list[T]:
    """The default runner: each task on its own thread (runtime.run_parallel)."""
    return runtime.run_parallel(list(tasks))


#: the memory layout of the fp32 backbones and their inputs: oneDNN's depthwise and pointwise
#: convolutions run faster on it (a Kodak map 0.186 → 0.171 CPU-s on one AVX2 thread,
#: 2026-12-07), with the same labels at every map position of the 24 Kodak images, 6 BSDS500
#: val photos and 6 CamVid val frames
CHANNELS_LAST = torch.channels_last

# a network → (its weights' version counters, its copy with BatchNorm folded)
_INFERENCE: weakref.WeakKeyDictionary[SegNet, tuple[tuple[int, ...], SegNet]] = (
    weakref.WeakKeyDictionary()
)


def inference_form(seg: SegNet) -> SegNet:
    """The network to run for fp32 labels: in eval mode, a copy with its BatchNorms folded
    into the convolutions (``fold_batchnorm``: 0.20 → 0.185 CPU-s of a Kodak map on one
    AVX2 thread, the same labels) and its backbones' weights channels-last (CHANNELS_LAST),
    made again whenever its weights change in place (a training's evaluation); a network in
    training mode as it is."""
    if seg.training:
        return seg
    version = tuple(t._version for t in chain(seg.parameters(), seg.buffers()))
    hit = _INFERENCE.get(seg)
    if hit is None or hit[0] != version:
        folded = copy.deepcopy(seg)
        fold_batchnorm(folded)
        for branch in (folded.rgb, folded.gray):
            branch.backbone.to(memory_format=CHANNELS_LAST)
        hit = _INFERENCE[seg] = (version, folded)
    return hit[1]


@torch.no_grad()
def class_scores(
    seg: SegNet,
    rgb: np.ndarray,
    bf16: bool | None = None,
    tiling: Tiling = DEFAULT_TILING,
    run: Runner = _side_by_side,
) -> torch.Tensor:
    """Fused class scores (1, C, H/8, W/8), float32, of a padded (H,W,3) uint8 image.

    Tiled images: the convolutional backbones run tile by tile, but the recurrent head (ReNet
    GRUs sweeping whole rows and columns, coordinate channels) runs once on the stitched
    1/8-resolution features, as in an untiled run. Above SEG_HEAD_MAX map positions the whole
    network runs per tile. ``run`` executes a list of independent pieces (the encoder's
    fixed split of work); bf16=None follows runtime.bf16_decision.
    """
    bf16 = runtime.bf16_decision().use if bf16 is None else bool(bf16)
    seg = seg if bf16 else inference_form(seg)  # in bf16 folding saves nothing, moves labels
    ph, pw = rgb.shape[:2]
    mh, mw = ph // MULTIPLE, pw // MULTIPLE
    regions = [r.blocks() for r in tiling.regions(ph, pw)]
    branches = (seg.rgb, seg.gray)

    def branch_input(r: Region, i: int) -> torch.Tensor:
        x = seg.branch_inputs(context_pixels(rgb, r))[i]
        return x if bf16 else x.contiguous(memory_format=CHANNELS_LAST)

    def backbone(branch: Branch, r: Region, i: int) -> Callable[[], torch.Tensor]:
        def go() -> torch.Tensor:
            with torch.no_grad(), runtime.bf16_autocast(bf16):
                return branch.backbone(branch_input(r, i))

        return go

    def head(branch: Branch, f: torch.Tensor) -> Callable[[], torch.Tensor]:
        def go() -> torch.Tensor:
            with torch.no_grad(), runtime.bf16_autocast(bf16):
                return branch.head(f).float()

        return go

    def whole_branch(branch: Branch, i: int) -> Callable[[], torch.Tensor]:
        def go() -> torch.Tensor:
            with torch.no_grad(), runtime.bf16_autocast(bf16):
                return branch(branch_input(regions[0], i)).float()

        return go

    if len(regions) == 1:
        a, b = run([whole_branch(br, i) for i, br in enumerate(branches)], "")
        # inputs under MIN_SIDE were grown by edge replication: crop back to the map
        return seg.fuse(a, b)[:, :, :mh, :mw]
    if mh * mw > SEG_HEAD_MAX:  # bounded memory: the whole network per tile, in turn
        scores = torch.empty((1, seg.cfg.num_classes, mh, mw))
        for r in regions:
            a, b = run([backbone(br, r, i) for i, br in enumerate(branches)], "")
            a, b = run([head(seg.rgb, a), head(seg.gray, b)], "")
            paste(scores, r, seg.fuse(a, b))
        return scores
    parts = run([backbone(br, r, i) for i, br in enumerate(branches) for r in regions], "segment")
    feats = []
    for i in range(len(branches)):
        mine = parts[i * len(regions) : (i + 1) * len(regions)]
        whole = torch.empty((1, mine[0].shape[1], mh, mw), dtype=mine[0].dtype)
        for r, f in zip(regions, mine, strict=True):
            paste(whole, r, f)
        feats.append(whole)
    del parts
    a, b = run([head(seg.rgb, feats[0]), head(seg.gray, feats[1])], "")
    return seg.fuse(a, b)


def working_size(seg: SegNet, h: int, w: int) -> tuple[int, int]:
    """The size an (h, w) image is segmented at: toward the scale the network was trained at
    (SegConfig.work_side, the long side), never larger than the image nor MAX_DOWNSCALE smaller."""
    side = seg.cfg.work_side
    if side <= 0 or max(h, w) <= side:
        return h, w
    s = max(side / max(h, w), 1.0 / MAX_DOWNSCALE)
    return max(1, round(h * s)), max(1, round(w * s))


def _working_input(
    seg: SegNet, rgb: np.ndarray
) -> tuple[np.ndarray, Callable[[torch.Tensor], torch.Tensor]]:
    """The padded image the network sees (at working_size), and what turns its class scores
    into those of the image's map grid, (ceil(H/8), ceil(W/8)): a crop and a bilinear resize."""
    h, w = rgb.shape[:2]
    sh, sw = working_size(seg, h, w)
    if (sh, sw) == (h, w):
        return pad_rgb(rgb), lambda scores: scores
    small = np.asarray(Image.fromarray(rgb).resize((sw, sh), Image.Resampling.BILINEAR))
    grid = (-(-h // MULTIPLE), -(-w // MULTIPLE))

    def to_grid(scores: torch.Tensor) -> torch.Tensor:
        scores = scores[:, :, : -(-sh // MULTIPLE), : -(-sw // MULTIPLE)]
        return F.interpolate(scores, size=grid, mode="bilinear", align_corners=False)

    return pad_rgb(small), to_grid


def label_map(
    seg: SegNet,
    rgb: np.ndarray,
    bf16: bool | None = None,
    tiling: Tiling = DEFAULT_TILING,
    run: Runner = _side_by_side,
) -> np.ndarray:
    """uint8 labels (ceil(H/8), ceil(W/8)) of an (H,W,3) uint8 image: what the encoder stores."""
    x, to_grid = _working_input(seg, rgb)
    scores = to_grid(class_scores(seg, x, bf16, tiling, run))
    return labels_of(scores[0], seg.cfg.unknown_below, seg.cfg.class_bias).astype(np.uint8)


def labels_of(
    scores: torch.Tensor, unknown_below: float, class_bias: tuple[float, ...] = ()
) -> np.ndarray:
    """Class ids of (C, h, w) scores plus the network's class offsets: the argmax, UNKNOWN
    where its probability is below the network's threshold (a map that says it is unsure
    instead of guessing)."""
    if class_bias:
        scores = scores + torch.tensor(class_bias, dtype=scores.dtype)[:, None, None]
    labels = scores.argmax(0).numpy()
    if unknown_below > 0:
        top = torch.softmax(scores.float(), 0).amax(0).numpy()
        labels = np.where(top < unknown_below, UNKNOWN, labels)
    return labels


def full_resolution_labels(seg: SegNet, rgb: np.ndarray, bf16: bool | None = None) -> np.ndarray:
    """int64 (H,W) labels: the 1/8 class scores upsampled bilinearly (`semcodec segment`, and
    the mIoU of `eval seg`, which CamVid's full-resolution labels need)."""
    h, w = rgb.shape[:2]
    x, to_grid = _working_input(seg, rgb)
    scores = to_grid(class_scores(seg, x, bf16))
    grid = scores.shape[-2] * MULTIPLE, scores.shape[-1] * MULTIPLE
    scores = F.interpolate(scores, size=grid, mode="bilinear", align_corners=False)
    cfg = seg.cfg
    return labels_of(scores[0, :, :h, :w], cfg.unknown_below, cfg.class_bias).astype(np.int64)
