"""`train codec`'s data: photos cropped to the map grid, 1/8 label maps, A7's aligned crops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from semcodec.encoder.segment import label_map
from semcodec.format.tiling import MAP_SCALE
from semcodec.models.segmentation import SegNet
from semcodec.train.data import read_photos, read_split


def compute_maps(seg: SegNet, images: list[np.ndarray], bf16: bool = True) -> list[np.ndarray]:
    """1/8-resolution label maps of whole images, exactly as the encoder computes them."""
    seg.eval()
    return [label_map(seg, img, None if bf16 else False) for img in images]


def hold_out(images: list, maps: list, n: int, photos: int) -> tuple[tuple, tuple]:
    """(training, held-out) pairs of (images, maps): the last n photos are held out."""
    keep = [i for i in range(len(images)) if not photos - n <= i < photos]
    held = range(max(0, photos - n), photos) if n else range(0)
    return (
        ([images[i] for i in keep], [maps[i] for i in keep]),
        ([images[i] for i in held], [maps[i] for i in held]),
    )


def crop8(images: list[np.ndarray]) -> list[np.ndarray]:
    """Crop every image to a multiple of 8 so the 1/8 map aligns with pixels."""
    s = MAP_SCALE
    return [im[: im.shape[0] // s * s, : im.shape[1] // s * s] for im in images]


class CropSampler:
    """A7's random sub-blocks: aligned crops of (image, 1/8 map) pairs with flips."""

    def __init__(self, images: list[np.ndarray], maps: list[np.ndarray], crop: int, seed: int):
        self.images, self.maps, self.crop = images, maps, crop
        self.rng = np.random.default_rng(seed)

    def __call__(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        c, m = self.crop, self.crop // MAP_SCALE
        xs, ls = [], []
        for _ in range(batch):
            k = int(self.rng.integers(0, len(self.images)))
            img, mp = self.images[k], self.maps[k]
            i = int(self.rng.integers(0, mp.shape[0] - m + 1))
            j = int(self.rng.integers(0, mp.shape[1] - m + 1))
            x = img[i * MAP_SCALE : i * MAP_SCALE + c, j * MAP_SCALE : j * MAP_SCALE + c]
            lab = mp[i : i + m, j : j + m]
            if self.rng.random() < 0.5:
                x, lab = x[:, ::-1], lab[:, ::-1]
            xs.append(torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1))
            ls.append(torch.from_numpy(np.ascontiguousarray(lab)))
        return torch.stack(xs).float().div(255), torch.stack(ls).long()


def synthetic_images() -> list[np.ndarray]:
    """Four 64x64 pictures of 8x8 flat blocks: smoke tests without a data folder."""
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(4)]
    return [np.repeat(np.repeat(im[::8, ::8], 8, 0), 8, 1) for im in images]


def training_images(photos: Path | None, camvid: Path | None) -> list[np.ndarray]:
    """Photos, then CamVid's train and val frames, each cropped to the map grid."""
    images: list[np.ndarray] = []
    if photos is not None:
        images += read_photos(photos)
    if camvid is not None:
        for split in ("train", "val"):
            images += list(read_split(camvid, split)[0])
    return crop8(images)


def cached_maps(
    seg: SegNet, images: list[np.ndarray], cache: Path, write: bool
) -> list[np.ndarray]:
    """The images' maps from the run folder's cache, else computed (and cached when `write`)."""
    if cache.exists():
        z = np.load(cache)
        return [z[f"m{i}"] for i in range(len(images))]
    maps = compute_maps(seg, images)
    if write:
        np.savez_compressed(cache, **{f"m{i}": m for i, m in enumerate(maps)})
    return maps


def training_set(
    seg: SegNet, photos: Path | None, camvid: Path | None, out: Path, synthetic: bool, rank: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Images and their 1/8 maps; maps are cached per segmentation weights in the run folder."""
    if synthetic:
        images = synthetic_images()
        return images, compute_maps(seg, images, bf16=False)
    images = training_images(photos, camvid)
    return images, cached_maps(seg, images, out / "maps.npz", write=rank == 0)
