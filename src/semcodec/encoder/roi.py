"""Semantic regions of interest: the map decides where the residual's bits go.

Why: every file already carries the semantic map, so a user can name the classes that matter
(``--roi car,pedestrian``) and the encoder spends the bytes there. Both means are encoder-only
(the decoder needs nothing beyond the file, and decodes ROI files as any other):

* a **rate guide** for libaom's all-intra delta-q (``deltaq-mode=3`` with
  ``enable-rate-guide-deltaq``): per 16-pixel block, a rate that is ``GUIDE_BASE ** weight``
  inside the ROI and 1 outside, so AV1 lowers the quantiser on the ROI and raises it elsewhere;
* a **pre-filter** of the background: a Gaussian blur of ``SIGMA_PER_STRENGTH * strength``
  pixels outside the ROI, blended in across the ROI's border, which removes the fine texture the
  residual coder would otherwise spend bits on.

The ROI is the map's blocks of the named classes grown by ``margin`` blocks (the map is 1/8 of
the image and object edges matter). Which means and what defaults: docs/roi.md, measured on
CamVid train/val. The ROI layer (kind 7) records the classes, weights, strength and margin so
that ``info`` can show them; decoding never reads it for pixels.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageFilter

from semcodec.errors import CorruptData
from semcodec.format.classes import CLASSES

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_STRENGTH",
    "RoiConfig",
    "RoiError",
    "block_weights",
    "coverage",
    "decode_roi",
    "encode_roi",
    "guide_file",
    "parse_roi",
    "prefilter",
    "rate_guide",
]

DEFAULT_STRENGTH = 1.0  # background blur of 0.5 px: ROI-PSNR BD-rate -35 % on CamVid val
MAX_STRENGTH = 4.0
DEFAULT_MARGIN = 1  # map blocks (8 px) around the ROI classes
MAX_MARGIN = 8
MAX_WEIGHT = 4.0
SIGMA_PER_STRENGTH = 0.5  # background blur (pixels) per unit of strength
GUIDE_BASE = 100.0  # rate-guide ratio of an ROI block of weight 1 to a background block
GUIDE_BLOCK = 16  # libaom's rate-distribution block side
_VERSION = 1
_HEAD = struct.Struct("<BBBB")  # version, strength x10, margin, class count


class RoiError(ValueError):
    """A bad ROI specification (unknown class, bad weight or strength): a usage error."""


@dataclass(frozen=True)
class RoiConfig:
    """Which classes are the ROI, their weights, the background's strength and the margin."""

    weights: dict[int, float] = field(default_factory=dict)  # class id -> weight (0.1..4)
    strength: float = DEFAULT_STRENGTH  # 0 (rate guide only) .. 4
    margin: int = DEFAULT_MARGIN  # map blocks

    def __post_init__(self) -> None:
        """Refuse values the ROI layer cannot record (tenths, bytes)."""
        if not self.weights:
            raise RoiError("--roi needs at least one class")
        for cid, w in self.weights.items():
            if not 0 <= cid < len(CLASSES):
                raise RoiError(f"ROI class id {cid} out of range 0..{len(CLASSES) - 1}")
            if not 0.1 <= w <= MAX_WEIGHT or round(w * 10) != w * 10:
                raise RoiError(
                    f"ROI weight of {CLASSES[cid]} must be 0.1..{MAX_WEIGHT:g} in tenths"
                )
        if (
            not 0 <= self.strength <= MAX_STRENGTH
            or round(self.strength * 10) != self.strength * 10
        ):
            raise RoiError(
                f"ROI strength must be 0..{MAX_STRENGTH:g} in tenths, got {self.strength}"
            )
        if not 0 <= self.margin <= MAX_MARGIN:
            raise RoiError(f"ROI margin must be 0..{MAX_MARGIN} blocks, got {self.margin}")

    @property
    def names(self) -> dict[str, float]:
        """Class name -> weight, in class order (for reports)."""
        return {CLASSES[c]: w for c, w in sorted(self.weights.items())}

    @property
    def sigma(self) -> float:
        """The background blur in pixels."""
        return SIGMA_PER_STRENGTH * self.strength


def _class_id(name: str) -> int:
    """A class name's id; the one-line error lists the valid names."""
    key = name.strip().lower()
    if key not in CLASSES:
        raise RoiError(f"unknown ROI class {name.strip()!r}; valid classes: {', '.join(CLASSES)}")
    return CLASSES.index(key)


def _weight(text: str, name: str) -> float:
    """A per-class weight from 'name:W'."""
    try:
        w = float(text)
    except ValueError:
        raise RoiError(f"ROI weight of {name!r} is not a number: {text!r}") from None
    return round(w, 1)


def _entries(spec: str | Iterable[str] | Mapping[str, float]) -> Iterator[tuple[str, float]]:
    """(name, weight) pairs of 'car,pedestrian:2', a list of such items or a dict."""
    if isinstance(spec, Mapping):
        yield from ((str(k), float(v)) for k, v in spec.items())
        return
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    for item in items:
        name, sep, w = str(item).partition(":")
        if not name.strip():
            raise RoiError(f"empty ROI class name in {spec!r}; valid classes: {', '.join(CLASSES)}")
        yield name, (_weight(w, name) if sep else 1.0)


def parse_roi(
    spec: str | Iterable[str] | Mapping[str, float] | RoiConfig | None,
    strength: float | None = None,
    margin: int | None = None,
) -> RoiConfig | None:
    """The RoiConfig of a user's specification ('car,pedestrian:2'); None stays None."""
    if spec is None:
        if strength is not None:
            raise RoiError("--roi-strength needs --roi")
        return None
    if isinstance(spec, RoiConfig):
        base = spec
    else:
        weights: dict[int, float] = {}
        for name, w in _entries(spec):
            weights[_class_id(name)] = w
        base = RoiConfig(weights)
    return RoiConfig(
        dict(base.weights),
        base.strength if strength is None else round(float(strength), 1),
        base.margin if margin is None else int(margin),
    )


# ----- the layer ----------------------------------------------------------------------------
def encode_roi(cfg: RoiConfig) -> bytes:
    """The ROI layer: u8 version, u8 strength x10, u8 margin, u8 n, n x (u8 class, u8 weight x10)."""
    items = sorted(cfg.weights.items())
    head = _HEAD.pack(_VERSION, round(cfg.strength * 10), cfg.margin, len(items))
    return head + b"".join(bytes([c, round(w * 10)]) for c, w in items)


def decode_roi(data: bytes) -> RoiConfig:
    """Parse an ROI layer; CorruptData on anything encode_roi would not write."""
    data = bytes(data)
    if len(data) < _HEAD.size:
        raise CorruptData("roi layer: truncated")
    version, strength, margin, n = _HEAD.unpack_from(data)
    if version != _VERSION:
        raise CorruptData(f"roi layer: unknown version {version}")
    if len(data) != _HEAD.size + 2 * n:
        raise CorruptData(f"roi layer: {len(data)} bytes for {n} classes")
    pairs = [(data[_HEAD.size + 2 * i], data[_HEAD.size + 2 * i + 1]) for i in range(n)]
    ids = [c for c, _ in pairs]
    if ids != sorted(set(ids)):
        raise CorruptData("roi layer: classes not in strictly ascending order")
    try:
        return RoiConfig({c: w / 10 for c, w in pairs}, strength / 10, margin)
    except RoiError as exc:
        raise CorruptData(f"roi layer: {exc}") from None


# ----- where the ROI is ---------------------------------------------------------------------
def _grow(w: np.ndarray, margin: int) -> np.ndarray:
    """Max filter of (2m+1)² blocks: each block takes the largest weight within the margin."""
    out = w.copy()
    h, wd = w.shape
    padded = np.pad(w, margin)
    for dy in range(2 * margin + 1):
        for dx in range(2 * margin + 1):
            np.maximum(out, padded[dy : dy + h, dx : dx + wd], out=out)
    return out


def block_weights(labels: np.ndarray, cfg: RoiConfig) -> np.ndarray:
    """Per map block, the ROI weight (0 = background), the margin included."""
    lut = np.zeros(max(len(CLASSES), int(labels.max(initial=0)) + 1), np.float64)
    for cid, w in cfg.weights.items():
        lut[cid] = w
    return _grow(lut[labels], cfg.margin)


def coverage(labels: np.ndarray, cfg: RoiConfig) -> float:
    """Share of map blocks in the ROI (with the margin), for reports."""
    return float((block_weights(labels, cfg) > 0).mean()) if labels.size else 0.0


def rate_guide(weights: np.ndarray, height: int, width: int) -> np.ndarray:
    """libaom's rate distribution per 16-pixel block of a height x width frame."""
    rows, cols = -(-height // GUIDE_BLOCK), -(-width // GUIDE_BLOCK)
    per = GUIDE_BLOCK // 8  # map blocks per guide block side
    grid = np.zeros((rows * per, cols * per))
    mh, mw = min(weights.shape[0], rows * per), min(weights.shape[1], cols * per)
    grid[:mh, :mw] = weights[:mh, :mw]
    peak = grid.reshape(rows, per, cols, per).max(axis=(1, 3))
    return np.where(peak > 0, GUIDE_BASE**peak, 1.0)


@contextmanager
def guide_file(guide: np.ndarray) -> Iterator[str]:
    """A temporary text file of the guide's rows (libaom reads the rates from a path)."""
    fd, path = tempfile.mkstemp(prefix="semcodec-roi-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            for row in guide:
                f.write(" ".join(f"{v:.1f}" for v in row) + "\n")
        yield path
    finally:
        os.unlink(path)


def _alpha(weights: np.ndarray, height: int, width: int) -> np.ndarray:
    """Per pixel, 1 inside the ROI and 0 in the background, ramped over one block at borders."""
    inside = (weights > 0).astype(np.float32)
    mh, mw = inside.shape
    up = Image.fromarray(inside, "F").resize((mw * 8, mh * 8), Image.Resampling.BILINEAR)
    return np.asarray(up, np.float32)[:height, :width]


def prefilter(rgb: np.ndarray, weights: np.ndarray, sigma: float) -> np.ndarray:
    """The image with its background blurred by ``sigma`` pixels (uint8, same shape)."""
    if sigma <= 0 or (weights > 0).all():
        return rgb
    h, w = rgb.shape[:2]
    blurred = np.asarray(Image.fromarray(rgb, "RGB").filter(ImageFilter.GaussianBlur(sigma)))
    a = _alpha(weights, h, w)[..., None]
    out = a * rgb.astype(np.float32) + (1.0 - a) * blurred.astype(np.float32)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)
