"""The residual coding of the prediction candidates: each coded with the real coder, the one of
least rate-distortion cost kept with its gating and compact layers (A5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from semcodec import runtime
from semcodec.encoder.analysis import Analysis
from semcodec.encoder.options import EncodeOptions
from semcodec.encoder.prediction import Candidate, side_layers
from semcodec.encoder.rdcost import rd_cost
from semcodec.format import container
from semcodec.format.container import LayerKind

VERIFY_EFFORT = 4  # from this effort on, the encoder codes two candidates and keeps the cheaper


def code_residual(
    analysis: Analysis,
    opts: EncodeOptions,
    backend: Any,
    plans: list[Candidate],
    table: np.ndarray,
) -> tuple[dict[LayerKind, bytes], Any]:
    """The residual, gating and compact layers of the chosen plan, and its gate.

    With more than one candidate (effort >= VERIFY_EFFORT) each is coded with the real
    residual coder (in the layout ``opts.chroma`` names), and the one of least rate–distortion
    cost (rdcost.rd_cost) is kept.
    """
    quality, effort = opts.quality, opts.effort
    rgb = analysis.img.rgb
    plan = analysis.roi_plan()
    target, guide = plan if plan is not None else (rgb, None)
    extra = {} if guide is None else {"guide": guide}
    layout = opts.layout()
    cands = plans[:1] if effort < VERIFY_EFFORT else plans

    def code(pred: np.ndarray) -> Callable[[], bytes]:
        def run() -> bytes:
            res = target.astype(np.int16)
            res -= pred
            return backend.encode(res, quality, effort, layout, **extra)

        return run

    # libaom runs one thread per encode: the candidates side by side give the same bytes
    payloads = runtime.run_parallel([code(pred) for pred, _ in cands])
    best: tuple[float, dict[LayerKind, bytes], Any] | None = None
    for (pred, gate), payload in zip(cands, payloads, strict=True):
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
