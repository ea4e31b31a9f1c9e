"""The residual coding of the prediction candidates: each coded with the real coder, the one of
least rate-distortion cost kept with its gating and compact layers (A5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from semcodec import runtime
from semcodec.encoder.analysis import Analysis
from semcodec.encoder.options import EncodeOptions
from semcodec.encoder.prediction import Candidate, predicts_nothing, side_layers
from semcodec.encoder.rdcost import rd_cost
from semcodec.format import container
from semcodec.format.container import LayerKind

VERIFY_EFFORT = 4  # from this effort on, the encoder codes two candidates and keeps the cheaper
# from this effort on, each candidate is also coded in the residual coder's other layouts
# (AVIF: 4:2:0 where the residual is the image itself). On 12 held-out BSDS500 training photos
# that moved the BD-rate against AVIF from +0.6 to -0.5 % PSNR and from -1.3 to -1.0 % MS-SSIM
# dB: the choice is made by PSNR and trades some MS-SSIM for it, so the default leaves it out;
# and it codes the image twice, so only the top effort spends that CPU (docs/benchmarks.md,
# the stage ledger)
LAYOUT_EFFORT = 9


def code_residual(
    analysis: Analysis,
    opts: EncodeOptions,
    backend: Any,
    plans: list[Candidate],
    table: np.ndarray,
) -> tuple[dict[LayerKind, bytes], Any]:
    """The residual, gating and compact layers of the chosen plan, and its gate.

    With more than one candidate (effort >= VERIFY_EFFORT) each is coded with the real
    residual coder (from effort LAYOUT_EFFORT in each layout the backend offers for it,
    AVIF: 4:2:0 as well where the residual is the image itself; every candidate in the one
    layout ``opts.chroma`` names when it is not the default), and the one of least
    rate–distortion cost (rdcost.rd_cost) is kept.
    """
    quality, effort = opts.quality, opts.effort
    rgb = analysis.img.rgb
    plan = analysis.roi_plan()
    target, guide = plan if plan is not None else (rgb, None)
    extra = {} if guide is None else {"guide": guide}
    layout = opts.layout()
    if effort < VERIFY_EFFORT:
        cands: list[tuple[np.ndarray, Any, str | None]] = [(*plans[0], layout)]
    elif effort < LAYOUT_EFFORT or layout is not None:
        cands = [(pred, gate, layout) for pred, gate in plans]
    else:  # each candidate in every payload layout the backend offers for it
        cands = [
            (pred, gate, layout)
            for pred, gate in plans
            for layout in backend.layouts(predicts_nothing(gate))
        ]

    def code(pred: np.ndarray, layout: str | None) -> Callable[[], bytes]:
        def run() -> bytes:
            res = target.astype(np.int16)
            res -= pred
            return backend.encode(res, quality, effort, layout, **extra)

        return run

    # libaom runs one thread per encode: the candidates side by side give the same bytes
    payloads = runtime.run_parallel([code(pred, layout) for pred, _, layout in cands])
    best: tuple[float, dict[LayerKind, bytes], Any] | None = None
    for (pred, gate, _), payload in zip(cands, payloads, strict=True):
        layers = side_layers(analysis, table, gate)
        layers[LayerKind.RESIDUAL] = payload
        if len(cands) == 1:
            return layers, gate
        h, w = rgb.shape[:2]
        dec = backend.picture(payload, h, w, pred).astype(np.int16)
        mse = float(np.mean((dec - rgb.astype(np.int16)) ** 2.0))
        bits = 8.0 * file_size(analysis, layers)
        cost = rd_cost(bits, mse, quality)
        if best is None or cost < best[0]:
            best = (cost, layers, gate)
    assert best is not None
    return best[1], best[2]


def file_size(analysis: Analysis, layers: dict[LayerKind, bytes]) -> int:
    """The size estimate a candidate's cost uses: its layers, the map and the container's
    fixed estimate (container.ESTIMATED_HEADER: files' bytes depend on its value)."""
    fixed = len(analysis.layers[LayerKind.SEMANTIC_MAP]) + container.ESTIMATED_HEADER
    return fixed + sum(len(v) for v in layers.values())
