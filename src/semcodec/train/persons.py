"""People at close range for the segmentation network: Clothing Co-Parsing's person masks.

The public repository ``bearpaw/clothing-co-parsing`` (commit fe34fb77721a9973fbae92c05f7f12b664d10110,
Apache-2.0) labels 1,004 photos pixel by pixel with clothing, skin and hair; the union of those
labels is a person mask. Its files are a training input only: fetched into a folder outside the
tree, checked against PERSON_DATA_SHA256, never committed. Pixels outside a mask are known not
to be a person but are unlabelled for every other class, so they carry NOT_PERSON: the loss
there is -log(1 - p(pedestrian)) (train.seg.seg_loss), never a CamVid class.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec.format.classes import CLASSES, VOID

PERSON = CLASSES.index("pedestrian")
NOT_PERSON = VOID + 1  # training label only: "any class but pedestrian"
PERSON_DATA_COMMIT = "fe34fb77721a9973fbae92c05f7f12b664d10110"
# SHA-256 over the sorted (name, file SHA-256) lines of the 1,004 labelled photos and their
# annotations/pixel-level/*.mat files (person_data_hash)
PERSON_DATA_SHA256 = "23979a71a187dfb6f5ff5f48cf80086e4d92b6e75ccab41b8a7c7fee672cf981"
HELD_OUT = 100  # the last 100 labelled photos (by number) are the report's, never trained on


@dataclass(frozen=True)
class PersonSet:
    """Photos (RGB uint8, sizes may differ) and their person masks (bool)."""

    images: list[np.ndarray]
    masks: list[np.ndarray]
    names: list[str]


def labelled_names(root: Path) -> list[str]:
    """The stems of the photos with pixel-level labels, sorted."""
    return sorted(p.stem for p in (root / "annotations" / "pixel-level").glob("*.mat"))


def person_data_hash(root: Path) -> str:
    """One SHA-256 over the labelled photos and their label files (pins the fetched data)."""
    lines = []
    for stem in labelled_names(root):
        for rel in (f"photos/{stem}.jpg", f"annotations/pixel-level/{stem}.mat"):
            lines.append(f"{rel} {hashlib.sha256((root / rel).read_bytes()).hexdigest()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def read_mask(path: Path) -> np.ndarray:
    """The person mask of one pixel-level label file: every labelled part (clothing, skin, hair)."""
    from scipy.io import loadmat  # training input only: scipy comes with the [dev] extra

    groundtruth = loadmat(str(path))["groundtruth"]
    return np.asarray(groundtruth) > 0


def read_person_set(root: Path, split: str = "train", check: bool = True) -> PersonSet:
    """The training photos (all but the last HELD_OUT) or the held-out ones ('test')."""
    if check:
        found = person_data_hash(root)
        if found != PERSON_DATA_SHA256:
            raise ValueError(
                f"{root}: person data hash {found[:16]}… is not the pinned "
                f"{PERSON_DATA_SHA256[:16]}… (commit {PERSON_DATA_COMMIT})"
            )
    names = labelled_names(root)
    names = names[:-HELD_OUT] if split == "train" else names[-HELD_OUT:]
    images = [np.asarray(Image.open(root / "photos" / f"{n}.jpg").convert("RGB")) for n in names]
    masks = [read_mask(root / "annotations" / "pixel-level" / f"{n}.mat") for n in names]
    return PersonSet(images, masks, names)


class PersonAugment:
    """Person photos at a random scale inside a crop of the CamVid crop's size.

    The scale is log-uniform relative to the photo fitting the crop: from a third of the crop's
    height (padded with grey pixels and VOID labels) to a close-up three times larger.
    """

    def __init__(
        self, crop: tuple[int, int], scale: tuple[float, float] = (0.35, 3.0), seed: int = 0
    ):
        self.crop, self.scale = crop, scale
        self.rng = np.random.default_rng(seed)

    def sample(self, data: PersonSet) -> tuple[torch.Tensor, torch.Tensor]:
        """One sample: x float (1,3,h,w) in [0,1], y long (1,h,w) with PERSON / NOT_PERSON / VOID."""
        from semcodec.train.data import jitter

        k = int(self.rng.integers(0, len(data.images)))
        ch, cw = self.crop
        x = torch.from_numpy(data.images[k].copy()).permute(2, 0, 1).float().div(255)[None]
        m = torch.from_numpy(data.masks[k].astype(np.float32))[None, None]
        fit = min(ch / x.shape[-2], cw / x.shape[-1])  # whole photo inside the crop at 1.0
        s = fit * float(np.exp(self.rng.uniform(np.log(self.scale[0]), np.log(self.scale[1]))))
        h, w = max(8, round(x.shape[-2] * s)), max(8, round(x.shape[-1] * s))
        x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
        m = F.interpolate(m, size=(h, w), mode="bilinear", align_corners=False)[0, 0] > 0.5
        y = torch.where(m, PERSON, NOT_PERSON).long()
        canvas = torch.full((1, 3, max(h, ch), max(w, cw)), 0.5)
        labels = torch.full(canvas.shape[-2:], VOID, dtype=torch.long)
        top = int(self.rng.integers(0, canvas.shape[-2] - h + 1))
        left = int(self.rng.integers(0, canvas.shape[-1] - w + 1))
        canvas[..., top : top + h, left : left + w] = x
        labels[top : top + h, left : left + w] = y
        t = int(self.rng.integers(0, canvas.shape[-2] - ch + 1))
        lft = int(self.rng.integers(0, canvas.shape[-1] - cw + 1))
        x, y = canvas[..., t : t + ch, lft : lft + cw], labels[t : t + ch, lft : lft + cw]
        if self.rng.random() < 0.5:
            x, y = x.flip(-1), y.flip(-1)
        return jitter(x, self.rng).clamp(0, 1), y[None]
