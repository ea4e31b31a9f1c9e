"""CompNet over row bands of each tile → the integer compact symbols, and their compact layer (A2/A3)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from semcodec import runtime
from semcodec.encoder import segment
from semcodec.encoder.analysis import Analysis
from semcodec.encoder.netinput import context_pixels
from semcodec.encoder.refine import RefineConfig, refine_latents
from semcodec.format.compact import encode_compact
from semcodec.format.tiling import MULTIPLE, Region, Tiling, grow, paste
from semcodec.models.compnet import quantize
from semcodec.zoo.bundles import ModelBundle

COMPNET_MARGIN = 6  # blocks of context around a CompNet band (48 px > its 34 px reach)
# core blocks (x64 pixels) from which CompNet runs in 2 / 4 bands
BANDS_2, BANDS_4 = 1 << 11, 1 << 14


def bands(region: Region) -> list[Region]:
    """Cut a region (1/8 units) into row bands for parallel CompNet runs; by size alone.

    Each band keeps COMPNET_MARGIN blocks of context above and below (CompNet sees 34 pixels
    around each symbol), so its symbols are those of the whole region up to float rounding.
    """
    (y0, y1, x0, x1), ctx = region.core, region.ctx
    area = (y1 - y0) * (x1 - x0)
    parts = 4 if area >= BANDS_4 else 2 if area >= BANDS_2 else 1
    parts = min(parts, max(1, (y1 - y0) // (2 * COMPNET_MARGIN)))
    cuts = [y0 + (y1 - y0) * i // parts for i in range(parts + 1)]
    return [
        Region(
            (a, b, x0, x1),
            (max(ctx[0], a - COMPNET_MARGIN), min(ctx[1], b + COMPNET_MARGIN), ctx[2], ctx[3]),
        )
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]


@torch.no_grad()
def compact_symbols(
    bundle: ModelBundle,
    rgb: np.ndarray,
    labels: np.ndarray,
    refine: RefineConfig | None,
    bf16: bool,
    tiling: Tiling,
    run: segment.Runner,
) -> np.ndarray:
    """A2/A3: integer compact symbols (C,h,w) of a padded uint8 image and its map.

    CompNet runs per tile and, within a tile, in row bands (``bands``) side by side on
    ``run``; ``refine`` (None: off) refines the latents before quantisation (refine.py).
    """
    refine = refine if refine is not None else RefineConfig()
    ph, pw = rgb.shape[:2]
    c = bundle.comp.cfg.out_channels
    symbols = np.empty((c, ph // MULTIPLE, pw // MULTIPLE), np.int64)
    regions = tiling.regions(ph, pw)
    pieces = [band for r in regions for band in bands(r.blocks())]

    def piece(r: Region) -> Callable[[], np.ndarray]:
        def run_piece() -> np.ndarray:
            cy0, cy1, cx0, cx1 = r.ctx
            x = context_pixels(rgb, r)
            lab = grow(labels[cy0:cy1, cx0:cx1], x.shape[-2] // MULTIPLE, x.shape[-1] // MULTIPLE)
            lab_t = torch.from_numpy(lab.astype(np.int64))[None]
            with torch.no_grad(), runtime.bf16_autocast(bf16):
                t = bundle.comp(x, lab_t).float()
            if refine.steps:  # the float generator is built only to refine
                t = refine_latents(t, x, lab_t, bundle.gen, bundle.compact_table, refine)
            return quantize(t, bundle.levels)[0].numpy()

        return run_piece

    stage = "compnet" if len(regions) > 1 else ""
    results = run([piece(r) for r in pieces], stage)
    for r, q in zip(pieces, results, strict=True):
        paste(symbols, r, q)
    return symbols


def compact_layer(analysis: Analysis, table: np.ndarray) -> bytes:
    """The compact layer with every symbol (made once per analysis)."""
    if analysis.compact_layer is None:
        analysis.compact_layer = encode_compact(analysis.symbols, table)
    return analysis.compact_layer
