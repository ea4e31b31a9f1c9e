"""The predictions the residual is coded against: the candidates, the gating choice and the
gating and compact layers each candidate's file carries (A4–A6; the chooser is gating.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from semcodec.decoder import prediction as predict
from semcodec.encoder import gating
from semcodec.encoder.analysis import Analysis
from semcodec.encoder.compact import compact_layer
from semcodec.encoder.options import EncodeOptions
from semcodec.format.compact import encode_compact
from semcodec.format.container import LayerKind
from semcodec.format.gating import BASE, GEN, NONE, GatingPlan, encode_gating

# symbols, labels, (h, w) -> the generator's uint8 (h, w, 3) reconstruction
Reconstruct = Callable[[np.ndarray, np.ndarray, tuple[int, int]], np.ndarray]
Candidate = tuple[np.ndarray, Any]  # a prediction and its gate (None: ungated)

# The encoder looks for a prediction only below SEARCH_QUALITY; from it up, every tile codes
# the image itself without running CompNet or the generator. On 40 BSDS500 training photos at
# effort 5 with the full search, at qualities 10, 25, 40, 55, 70, 85 and 95 one image took the
# generator everywhere (at 70) and at most 0.16 % of the tiles took the base (mean over images,
# at 70); at quality 5 one image took the generator everywhere. At AV1 speed 2 the search and
# the 4:2:0 trial at every quality (effort 9 until 2026-12-07) made a held-out picture's encode
# 7.5 CPU-s instead of 2.4 for 0.5 points of PSNR BD-rate gained and 0.8 / 0.7 lost in MS-SSIM
# dB and SSIMULACRA 2 (4 BSDS500 val photos, 4 CamVid val frames), so no effort searches at
# every quality
SEARCH_QUALITY = 10


@dataclass(frozen=True)
class PredictionParts:
    """The model parts a prediction needs: the symbols' levels and table, and the generator."""

    levels: int
    compact_table: np.ndarray
    reconstruct: Reconstruct


def searches(opts: EncodeOptions) -> bool:
    """Whether this encode looks for a prediction (and so runs CompNet and the generator):
    always for the base layer alone and without gating, otherwise below SEARCH_QUALITY."""
    cfg = opts.gating
    if opts.quality == 0 or not cfg.enabled or NONE not in cfg.modes:
        return True
    return opts.quality < SEARCH_QUALITY


def candidates(analysis: Analysis, parts: PredictionParts, opts: EncodeOptions) -> list[Candidate]:
    """Predictions to code the residual against, each with its gate (None: the generator
    everywhere, the ungated layout); the chooser's pick first.

    Two plans are costed with the rate proxy (gating.choose_modes). With the generator:
    every compact symbol is sent (the generator sees the true symbols, so its
    reconstruction is the one already made) and each tile takes the generator, the base or
    nothing. Without it: only tiles that take the base send their symbols, the others
    take nothing. The cheaper plan is the pick; the other extreme (no prediction anywhere,
    or the generator everywhere) follows for the check with the real coder (residual.py).
    """
    cfg, quality = opts.gating, opts.quality
    recon = analysis.reconstruction
    if not cfg.enabled or quality == 0:
        return [(recon, None)]
    img, symbols, levels = analysis.img, analysis.symbols, parts.levels
    h, w = img.rgb.shape[:2]
    _, mh, mw = symbols.shape
    th, tw = predict.tile_shape(mh, mw, cfg.tile_blocks)
    preds: dict[int, np.ndarray | int] = {GEN: recon, NONE: predict.FLAT}
    if BASE in cfg.modes:
        preds[BASE] = predict.base_pixels(symbols, levels, (h, w))
    cbits = gating.compact_tile_bits(symbols, parts.compact_table, cfg.tile_blocks)
    plans = []
    if GEN in cfg.modes:
        with_gen = {m: p for m, p in preds.items() if m in cfg.modes}
        modes, cost = gating.choose_modes(img.rgb, with_gen, None, quality, cfg.tile_blocks)
        plans.append((cost + float(cbits.sum()), modes, True))
    without = {m: p for m, p in preds.items() if m in cfg.modes and m != GEN}
    if without:
        modes, cost = gating.choose_modes(img.rgb, without, cbits, quality, cfg.tile_blocks)
        plans.append((cost, modes, False))
    _, modes, all_symbols = min(plans, key=lambda p: p[0])
    if (modes == GEN).all():
        pick = (recon, None)
    else:
        pick = gated(analysis, parts, cfg, modes, all_symbols)
    out = [pick]
    if pick[1] is not None and (modes != NONE).any() and NONE in cfg.modes:
        out.append(flat(analysis, parts, cfg))
    elif pick[1] is not None and GEN in cfg.modes:
        out.append((recon, None))
    elif pick[1] is None and NONE in cfg.modes:
        out.append(flat(analysis, parts, cfg))
    return out


def gated(
    analysis: Analysis,
    parts: PredictionParts,
    cfg: gating.GatingConfig,
    modes: np.ndarray,
    all_symbols: bool,
) -> tuple[np.ndarray, GatingPlan]:
    """The blended prediction of given tile modes, from the symbols the decoder will have
    (none, and no CompNet run, where no tile uses the base)."""
    levels = parts.levels
    h, w = analysis.img.rgb.shape[:2]
    mh, mw = analysis.labels.shape
    used = predict.used_blocks(modes, mh, mw, cfg.tile_blocks, all_symbols)
    if used.any():
        filled = predict.fill_symbols(analysis.symbols, used, levels)
    final: dict[int, np.ndarray | int] = {}
    if (modes == GEN).any():
        if used.all():
            final[GEN] = analysis.reconstruction
        else:  # not written by this encoder's plans, but a valid file: decode what it says
            final[GEN] = parts.reconstruct(filled, analysis.labels, (h, w))
    if (modes == BASE).any():
        final[BASE] = predict.base_pixels(filled, levels, (h, w))
    if (modes == NONE).any():
        final[NONE] = predict.FLAT
    pred = predict.blend(final, modes, (h, w), cfg.tile_blocks, cfg.radius)
    return pred, GatingPlan(cfg.tile_blocks, cfg.radius, modes, all_symbols)


def flat(analysis: Analysis, parts: PredictionParts, cfg: gating.GatingConfig) -> Candidate:
    """No prediction in any tile: the residual layer codes the image itself, and the file
    has no compact layer (no CompNet needed)."""
    th, tw = predict.tile_shape(*analysis.labels.shape, cfg.tile_blocks)
    return gated(analysis, parts, cfg, np.full((th, tw), NONE, np.int64), False)


def side_layers(
    analysis: Analysis, table: np.ndarray, gate: GatingPlan | None
) -> dict[LayerKind, bytes]:
    """The gating and compact layers a candidate's file carries."""
    if gate is None:
        return {LayerKind.COMPACT: compact_layer(analysis, table)}
    used = predict.used_by(gate, *analysis.labels.shape)
    if not used.any() and (gate.modes == NONE).all():
        return {}  # no prediction: the file needs neither layer (format version 5)
    out = {LayerKind.GATING: encode_gating(gate)}
    if gate.all_symbols:
        out[LayerKind.COMPACT] = compact_layer(analysis, table)
    elif used.any():
        out[LayerKind.COMPACT] = encode_compact(analysis.symbols, table, used)
    return out
