"""Outlier exposure for the map network: objects outside the 11 classes pasted into street crops.

The objects are cut from BSDS500 photos with the data set's own human segmentations: the
public repository ``BIDS/BSDS500`` (commit a04b7c6c3a9f0ace74bf205c72a43d32e1c72722) holds
``BSDS500/data/groundTruth/{train,val,test}/<id>.mat`` beside the photos that
``shared/data/photos`` (train, val) and ``shared/data/bsds500-test`` hold. The label files are
a training and evaluation input only: fetched into a folder outside the tree, checked against
OUTLIER_GT_SHA256, never committed.

Which photos give objects was decided by looking at them: those whose main subject is none of
the map's classes (animals, flowers, food, boats, planes, objects), none with a person, a
vehicle, a building or a street. Train photos give the training objects, val photos the
objects of the threshold's choice on CamVid val, test photos the anomaly benchmark's objects
(`eval seg --anomaly`): no object of the benchmark is ever trained on.

Pasted pixels carry the training label OUTLIER. Their loss is the cross-entropy to the uniform
distribution (outlier exposure), so the largest class probability there falls and the map's
UNKNOWN test (``unknown_below``) fires on things the classes do not name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec.format.classes import VOID

OUTLIER = VOID + 2  # training label only: "none of the classes" (VOID + 1 is NOT_PERSON)
OUTLIER_GT_COMMIT = "a04b7c6c3a9f0ace74bf205c72a43d32e1c72722"

# BSDS500 ids of the photos whose main subject is outside the classes, by split
OUTLIER_PHOTOS: dict[str, tuple[str, ...]] = {
    "train": tuple(
        "100075 100080 100098 103041 105019 105053 106020 106025 108041 108073 109034 112082 "
        "113009 113016 113044 118020 12003 12074 124084 130034 134008 134052 135037 135069 "
        "138032 138078 140075 15088 159029 159045 159091 16052 163014 163062 164074 169012 "
        "172032 173036 183055 183087 187039 188091 196015 207056 209070 236017 242078 247085 "
        "25098 253036 268002 28075 309004 311068 314016 317080 326038 35008 35010 35058 35070 "
        "35091 353013 41004 41025 42044 42078 43070 43083 45077 65132 66039 66075 80099 8049 "
        "8143 87065 94079".split()
    ),
    "val": tuple(
        "101085 103070 105025 106024 108005 108070 108082 109053 12084 123074 130026 134035 "
        "159008 160068 16077 163085 175032 175043 19021 196073 197017 208001 210088 227092 "
        "236037 253027 253055 296059 304034 304074 306005 3096 38082 38092 41033 41069 42049 "
        "43074 58060 66053 69015 69020 69040 8023 86068 87046".split()
    ),
    "test": tuple(
        "100007 100039 100099 10081 101027 101084 103006 103029 103078 104010 104055 105027 "
        "106005 106047 107014 107045 107072 108004 108036 108069 109055 112056 112090 123057 "
        "130014 130066 134049 134067 141012 141048 159022 160006 160067 16068 163004 163096 "
        "168084 175083 183066 185092 196027 196040 196062 196088 2018 208078 209021 232076 "
        "247003 253016 253092 268048 268074 289011 306051 306052 3063 317043 326025 326085 "
        "335088 335094 347031 35028 35049 41006 41029 41085 41096 43033 43051 45000 49024 51084 "
        "6046 69022 70011 70090 71076 8068 87015 94095".split()
    ),
}

# an object is one human segment covering this share of its photo, touching the border little
OBJECT_AREA = (0.02, 0.45)
OBJECT_BORDER = 0.12  # at most this share of the photo's border pixels


@dataclass(frozen=True)
class OutlierObject:
    """One object: its RGB pixels (h, w, 3) uint8 in its bounding box and its mask (h, w)."""

    rgb: np.ndarray
    mask: np.ndarray
    name: str


def photo_path(photos: Path, split: str, ident: str) -> Path:
    """Where the shared data keeps a BSDS500 photo of a split."""
    if split == "test":
        return photos / f"{ident}.jpg"
    return photos / f"bsds500-{split}_{ident}.jpg"


def gt_files(gt_root: Path, split: str) -> list[Path]:
    """The human segmentation files of the chosen photos of a split."""
    return [gt_root / split / f"{i}.mat" for i in OUTLIER_PHOTOS[split]]


def gt_hash(gt_root: Path) -> str:
    """One SHA-256 over the chosen photos' segmentation files of every split (pins the fetch)."""
    lines = []
    for split in ("train", "val", "test"):
        for p in gt_files(gt_root, split):
            lines.append(f"{split}/{p.name} {hashlib.sha256(p.read_bytes()).hexdigest()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def read_segmentations(path: Path) -> list[np.ndarray]:
    """The human segmentations (label maps) of one BSDS500 ground-truth file."""
    from scipy.io import loadmat  # training input only: scipy comes with the [dev] extra

    gt = loadmat(str(path))["groundTruth"]
    return [np.asarray(gt[0, k]["Segmentation"][0, 0]) for k in range(gt.shape[1])]


def object_mask(segmentations: list[np.ndarray]) -> np.ndarray | None:
    """The object of a photo: of the coarsest segmentation, the largest segment of
    OBJECT_AREA that touches at most OBJECT_BORDER of the photo's border (a subject, not the
    background around it); None when no segment qualifies."""
    seg = min(segmentations, key=lambda s: int(s.max()))
    border = np.concatenate([seg[0], seg[-1], seg[1:-1, 0], seg[1:-1, -1]])
    best, best_area = None, 0
    for label in np.unique(seg):
        m = seg == label
        area = float(m.mean())
        if not OBJECT_AREA[0] <= area <= OBJECT_AREA[1]:
            continue
        if float((border == label).mean()) > OBJECT_BORDER or area <= best_area:
            continue
        best, best_area = m, area
    return best


def cut_object(rgb: np.ndarray, mask: np.ndarray, name: str) -> OutlierObject:
    """The object's bounding box of pixels and mask."""
    rows, cols = np.nonzero(mask)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    return OutlierObject(rgb[r0:r1, c0:c1].copy(), mask[r0:r1, c0:c1].copy(), name)


def read_objects(gt_root: Path, photos: Path, split: str) -> list[OutlierObject]:
    """The objects of one split's chosen photos (photos without a qualifying segment skipped)."""
    objects = []
    for ident in OUTLIER_PHOTOS[split]:
        mask = object_mask(read_segmentations(gt_root / split / f"{ident}.mat"))
        if mask is None:
            continue
        rgb = np.asarray(Image.open(photo_path(photos, split, ident)).convert("RGB"))
        if rgb.shape[:2] != mask.shape:  # a portrait photo whose label map is stored turned
            mask = mask.T if rgb.shape[:2] == mask.T.shape else None
        if mask is not None:
            objects.append(cut_object(rgb, mask, ident))
    return objects


# the pasted object's mask covers this share of the crop (log-uniform)
PASTE_AREA = (0.01, 0.15)


def paste_object(
    x: torch.Tensor, y: torch.Tensor, obj: OutlierObject, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (1,3,h,w) in [0,1] and ``y`` (1,h,w) with ``obj`` pasted at a random scale and
    place (flipped half the time); its pixels labelled OUTLIER. A copy: the inputs stay."""
    h, w = x.shape[-2:]
    want = float(np.exp(rng.uniform(np.log(PASTE_AREA[0]), np.log(PASTE_AREA[1]))))
    s = np.sqrt(want * h * w / max(1, int(obj.mask.sum())))
    oh = int(np.clip(round(obj.mask.shape[0] * s), 4, h))
    ow = int(np.clip(round(obj.mask.shape[1] * s), 4, w))
    rgb = torch.from_numpy(obj.rgb).permute(2, 0, 1).float().div(255)[None]
    rgb = F.interpolate(rgb, size=(oh, ow), mode="bilinear", align_corners=False)
    m = torch.from_numpy(obj.mask.astype(np.float32))[None, None]
    m = F.interpolate(m, size=(oh, ow), mode="bilinear", align_corners=False)[0, 0] > 0.5
    if rng.random() < 0.5:
        rgb, m = rgb.flip(-1), m.flip(-1)
    top, left = int(rng.integers(0, h - oh + 1)), int(rng.integers(0, w - ow + 1))
    x, y = x.clone(), y.clone()
    region = x[..., top : top + oh, left : left + ow]
    x[..., top : top + oh, left : left + ow] = torch.where(m, rgb.to(x.dtype), region)
    y[:, top : top + oh, left : left + ow][:, m] = OUTLIER
    return x, y


class OutlierPaste:
    """Pastes one object into a share of the crops of a batch (its own generator: a resumed
    run draws what the uninterrupted one would)."""

    def __init__(self, objects: list[OutlierObject], share: float, seed: int = 0):
        self.objects, self.share = objects, share
        self.rng = np.random.default_rng(seed)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch (B,3,h,w), (B,h,w) with objects pasted into about ``share`` of its crops."""
        xs, ys = [], []
        for i in range(len(x)):
            xi, yi = x[i : i + 1], y[i : i + 1]
            if self.objects and self.rng.random() < self.share:
                obj = self.objects[int(self.rng.integers(0, len(self.objects)))]
                xi, yi = paste_object(xi, yi, obj, self.rng)
            xs.append(xi)
            ys.append(yi)
        return torch.cat(xs), torch.cat(ys)


def uniform_ce(logits: torch.Tensor) -> torch.Tensor:
    """Per pixel (B,H,W): the cross-entropy of (B,C,H,W) scores to the uniform distribution
    over the classes, lowest where every class is equally likely."""
    return torch.logsumexp(logits, 1) - logits.mean(1)
