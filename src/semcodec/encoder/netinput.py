"""Pixels as the networks' input tensors: the encoder's side of ``tiling`` (torch), kept apart
so that the decoder's tiling names no torch."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.format.tiling import MIN_SIDE, MULTIPLE, Region


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """(h,w,3) uint8 → (1,3,h,w) float in [0,1], grown to MIN_SIDE by edge replication."""
    # A copy: image arrays are often read-only views, which torch.from_numpy warns about.
    x = torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).float().div(255.0)[None]
    h, w = x.shape[-2:]
    ph, pw = max(0, MIN_SIDE - h), max(0, MIN_SIDE - w)
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x


def context_pixels(rgb: np.ndarray, r: Region) -> torch.Tensor:
    """The network input of a region given in 1/8 units: its context's pixels as a tensor."""
    cy0, cy1, cx0, cx1 = r.ctx
    return to_tensor(rgb[cy0 * MULTIPLE : cy1 * MULTIPLE, cx0 * MULTIPLE : cx1 * MULTIPLE])
