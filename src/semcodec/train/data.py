"""Training data: CamVid frames + labels and photo folders, preloaded and augmented in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec.imageio import list_images
from semcodec.models.segmentation import VOID


def read_split(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Load a CamVid split listed in <split>.txt as uint8 arrays (N,H,W,3) and (N,H,W)."""
    images, labels = [], []
    for line in (root / f"{split}.txt").read_text().split("\n"):
        if not line.strip():
            continue
        img_rel, lab_rel = line.split()
        images.append(np.asarray(Image.open(root / img_rel).convert("RGB")))
        labels.append(np.asarray(Image.open(root / lab_rel)))
    return np.stack(images), np.stack(labels)


def read_photos(folder: Path, limit: int | None = None) -> list[np.ndarray]:
    """Load every image in a folder as RGB uint8 arrays (sizes may differ)."""
    return read_images(list_images(folder)[:limit])


def read_images(paths: list[Path]) -> list[np.ndarray]:
    """Load the given image files as RGB uint8 arrays."""
    return [np.asarray(Image.open(p).convert("RGB")) for p in paths]


def synthetic_segmentation(n: int, h: int, w: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tiny learnable data set for tests: coloured rectangles whose colour gives the class."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, h, w, 3), np.uint8)
    labels = np.zeros((n, h, w), np.uint8)
    colours = rng.integers(0, 256, (11, 3))
    for k in range(n):
        for _ in range(4):
            c = int(rng.integers(0, 11))
            y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
            y1, x1 = y0 + rng.integers(h // 4, h // 2 + 1), x0 + rng.integers(w // 4, w // 2 + 1)
            images[k, y0:y1, x0:x1] = colours[c]
            labels[k, y0:y1, x0:x1] = c
    return images, labels


#: sigma range (pixels) of the optional Gaussian blur of a training crop (recipe C)
BLUR_SIGMA = (0.5, 1.5)


class SegAugment:
    """B1's augmentation: random scale (and aspect), crop, flip, blur and colour jitter on
    (image, label) pairs."""

    def __init__(
        self,
        crop: tuple[int, int],
        scale: tuple[float, float] = (0.6, 1.4),
        seed: int = 0,
        aspect: float = 0.0,
        blur: float = 0.0,
        camera: float = 0.0,
    ):
        self.crop, self.scale, self.aspect, self.blur = crop, scale, aspect, blur
        self.camera = camera
        self.rng = np.random.default_rng(seed)

    def __call__(
        self, images: np.ndarray, labels: np.ndarray, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw one augmented batch: x float (B,3,h,w) in [0,1], y long (B,h,w)."""
        xs, ys = [], []
        for _ in range(batch):
            k = int(self.rng.integers(0, len(images)))
            x, y = augment_frame(
                torch.from_numpy(images[k]),
                torch.from_numpy(labels[k].astype(np.int64)),
                self.crop,
                self.scale,
                self.aspect,
                self.blur,
                self.rng,
                self.camera,
            )
            xs.append(x)
            ys.append(y)
        return torch.cat(xs), torch.cat(ys)


def augment_frame(
    img: torch.Tensor,
    lab: torch.Tensor,
    crop: tuple[int, int],
    scale: tuple[float, float],
    aspect: float,
    blur: float,
    rng: np.random.Generator,
    camera: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One augmented crop of an (H,W,3) uint8 frame and its (H,W) labels, on their device:
    x (1,3,h,w) in [0,1], y (1,h,w) long. The CPU and the GPU trainer both draw through it;
    aspect 0 and blur 0 draw nothing for them (the draws of the plain recipe stay as they were)."""
    ch, cw = crop
    x = img.permute(2, 0, 1).float().div(255)[None]
    y = lab.float()[None, None]
    s = float(rng.uniform(*scale))
    a = aspect_factor(rng, aspect)
    h, w = max(ch, round(x.shape[-2] * s)), max(cw, round(x.shape[-1] * s * a))
    x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    y = F.interpolate(y, size=(h, w), mode="nearest")
    top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    x, y = x[..., top : top + ch, left : left + cw], y[..., top : top + ch, left : left + cw]
    if rng.random() < 0.5:
        x, y = x.flip(-1), y.flip(-1)
    x = maybe_blur(x, blur, rng)
    x = jitter(x, rng).clamp(0, 1)
    if camera and rng.random() < camera:  # no draw when off: the plain recipe's draws stay
        x = camera_shift(x, rng)
    return x, y[:, 0].long()


def aspect_factor(rng: np.random.Generator, aspect: float) -> float:
    """Width stretch exp(U(-aspect, aspect)) (log-uniform, so wider and narrower are alike);
    1 without a draw when aspect is 0."""
    return float(np.exp(rng.uniform(-aspect, aspect))) if aspect else 1.0


def maybe_blur(x: torch.Tensor, p: float, rng: np.random.Generator) -> torch.Tensor:
    """With probability p a Gaussian blur of sigma U(BLUR_SIGMA) (soft, defocused frames);
    no draw when p is 0."""
    if p and rng.random() < p:
        return gaussian_blur(x, float(rng.uniform(*BLUR_SIGMA)))
    return x


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of (B,3,H,W), radius 3 sigma, edges replicated."""
    r = max(1, int(3 * sigma))
    t = torch.arange(-r, r + 1, device=x.device, dtype=x.dtype)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    x = F.conv2d(
        F.pad(x, (r, r, 0, 0), mode="replicate"), k.view(1, 1, 1, -1).repeat(3, 1, 1, 1), groups=3
    )
    return F.conv2d(
        F.pad(x, (0, 0, r, r), mode="replicate"), k.view(1, 1, -1, 1).repeat(3, 1, 1, 1), groups=3
    )


def jitter(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Brightness, contrast and saturation jitter of +-25 %."""
    b, c, s = (float(rng.uniform(0.75, 1.25)) for _ in range(3))
    x = x * b
    m = x.mean()
    x = (x - m) * c + m
    g = x.mean(1, keepdim=True)
    return (x - g) * s + g


def camera_shift(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """What differs between cameras, drawn at random on (B,3,H,W) in [0,1]: exposure and
    tone curve, white balance, resolution (down and up again), sensor noise and JPEG."""
    x = x.clamp(0, 1) ** float(np.exp(rng.uniform(-0.4, 0.4)))  # tone curve
    x = x * float(2.0 ** rng.uniform(-1.0, 0.8))  # exposure, +-1 stop
    gains = torch.tensor(np.exp(rng.uniform(-0.2, 0.2, 3)), dtype=x.dtype).view(1, 3, 1, 1)
    x = (x * gains).clamp(0, 1)  # white balance
    if rng.random() < 0.5:  # a sensor of lower resolution, upscaled
        f = float(rng.uniform(0.35, 0.9))
        h, w = x.shape[-2:]
        small = (max(8, round(h * f)), max(8, round(w * f)))
        x = F.interpolate(x, size=small, mode="bilinear", align_corners=False, antialias=True)
        x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    if rng.random() < 0.5:  # sensor noise
        noise = torch.from_numpy(rng.standard_normal(tuple(x.shape)).astype(np.float32))
        x = x + float(rng.uniform(0.005, 0.04)) * noise.to(x.dtype)
    x = x.clamp(0, 1)
    if rng.random() < 0.5:
        x = jpeg_roundtrip(x, int(rng.integers(20, 90)))
    return x


def jpeg_roundtrip(x: torch.Tensor, quality: int) -> torch.Tensor:
    """(B,3,H,W) in [0,1] through a JPEG of the given quality."""
    import io

    out = []
    for img in x:
        arr = (img.permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
        back = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
        out.append(torch.from_numpy(back.copy()).permute(2, 0, 1).float().div(255))
    return torch.stack(out).to(x.dtype)


def class_weights(labels: np.ndarray, num_classes: int, power: float = 0.5) -> torch.Tensor:
    """Median-frequency balancing, softened by `power`, so rare classes (poles, cyclists) count."""
    counts = np.bincount(labels[labels != VOID].ravel(), minlength=num_classes)[
        :num_classes
    ].astype(np.float64)
    freq = counts / counts.sum()
    w = (np.median(freq) / np.maximum(freq, 1e-8)) ** power
    return torch.tensor(w, dtype=torch.float32)
