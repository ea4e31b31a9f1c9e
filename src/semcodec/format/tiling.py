"""How the networks see an image: padding to their size multiple and overlapping tiles.

Large images are processed in overlapping tiles so that memory stays bounded; the tile grid is
a function of the image size alone, so encoder and decoder run the generator on exactly the
same tiles and the encoder's residual is computed against the decoder's image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAP_SCALE = (
    8  # pixels per map position along each side: one map block per 8x8 pixels (header map_scale)
)
MULTIPLE = (
    MAP_SCALE  # the networks' size multiple: CompNet's and the segmentation's stride, a block
)
MIN_SIDE = 32  # smallest network input side: CompNet's 7x7 reflection pad at 1/8 needs 4 positions

Rect = tuple[int, int, int, int]  # y0, y1, x0, x1


@dataclass(frozen=True)
class Region:
    """One tile: the core rectangle it contributes and the larger context the networks see."""

    core: Rect  # in padded-image pixels (or 1/8 units, see ``blocks``)
    ctx: Rect  # the core grown by the margin, clipped to the image

    def blocks(self) -> Region:
        """The same region in 1/8-resolution units."""
        return Region(blocks(self.core), blocks(self.ctx))


def _split(n: int, core: int) -> list[int]:
    """Cut n pixels (a multiple of 8) into the fewest near-equal parts of at most `core` pixels."""
    count = n // MULTIPLE
    parts = -(-n // core)
    return [MULTIPLE * (i * count // parts) for i in range(parts + 1)]


@dataclass(frozen=True)
class Tiling:
    """How images above `threshold` padded pixels are cut into overlapping tiles.

    The decoder must use the encoder's tiling (the default for every file written by `semcodec`);
    it depends on the image size only, never on content, threads or machine.
    """

    core: int = 1024  # largest tile core side in pixels (multiple of 8)
    margin: int = 96  # context on every side (multiple of 8): covers the generator's 75 px reach
    threshold: int = 1 << 21  # padded pixels above which tiling is used (0: always tile)

    def __post_init__(self) -> None:
        """Refuse sizes that would misalign tiles with the 1/8-resolution layers."""
        if (
            self.core < MULTIPLE
            or self.core % MULTIPLE
            or self.margin < 0
            or self.margin % MULTIPLE
        ):
            raise ValueError(
                f"tile core and margin must be multiples of {MULTIPLE} (core >= {MULTIPLE}), "
                f"got core={self.core}, margin={self.margin}"
            )

    def regions(self, ph: int, pw: int) -> list[Region]:
        """Tiles of a padded ph x pw image in raster order (one tile when under the threshold)."""
        if ph * pw <= self.threshold:
            return [Region((0, ph, 0, pw), (0, ph, 0, pw))]
        m = self.margin
        out = []
        ys, xs = _split(ph, self.core), _split(pw, self.core)
        for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
            for x0, x1 in zip(xs[:-1], xs[1:], strict=True):
                ctx = (max(0, y0 - m), min(ph, y1 + m), max(0, x0 - m), min(pw, x1 + m))
                out.append(Region((y0, y1, x0, x1), ctx))
        return out


DEFAULT_TILING = Tiling()


def blocks(rect: Rect) -> Rect:
    """A pixel rectangle (multiples of 8) in 1/8-resolution units."""
    return tuple(v // MULTIPLE for v in rect)  # type: ignore[return-value]


def pad_rgb(rgb: np.ndarray) -> np.ndarray:
    """Edge-pad (H,W,3) uint8 to the networks' size multiple (cropped back after decoding)."""
    h, w = rgb.shape[:2]
    ph, pw = (-h) % MULTIPLE, (-w) % MULTIPLE
    return np.pad(rgb, ((0, ph), (0, pw), (0, 0)), mode="edge") if ph or pw else rgb


def grow(a: np.ndarray, h: int, w: int) -> np.ndarray:
    """Edge-pad the last two axes of a 1/8-resolution array to at least h x w."""
    ph, pw = max(0, h - a.shape[-2]), max(0, w - a.shape[-1])
    if not (ph or pw):
        return a
    return np.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, ph), (0, pw)], mode="edge")


def paste(out, r: Region, piece) -> None:
    """Copy the core of a piece computed on its region's context into the whole (last two axes)."""
    (y0, y1, x0, x1), (cy0, _, cx0, _) = r.core, r.ctx
    out[..., y0:y1, x0:x1] = piece[..., y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
