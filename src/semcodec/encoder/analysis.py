"""The quality-independent part of an encode (map, symbols, reconstruction) and what an encode reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from semcodec.encoder import roi
from semcodec.encoder.options import EncodeOptions
from semcodec.format.container import LayerKind
from semcodec.format.metadata import Metadata
from semcodec.imageio import LoadedImage
from semcodec.stages import StageTimes


@dataclass
class EncodeStats:
    """What an encode produced, for reporting (bytes per layer, seconds per stage)."""

    layer_bytes: dict[str, int]
    total_bytes: int
    times: StageTimes = field(default_factory=StageTimes)  # this file's stages, shared ones too


@dataclass
class Analysis:
    """The quality-independent part of an encode (``Codec.analyse``), reusable across qualities.

    It caches what later qualities reuse (CompNet's symbols, the reconstruction), so it
    belongs to one caller at a time.
    """

    img: LoadedImage
    labels: np.ndarray
    make_symbols: Callable[[], np.ndarray] = field(repr=False)  # CompNet, run on first need
    layers: dict[LayerKind, bytes]  # semantic map (and metadata) payloads
    options: EncodeOptions  # the options analysed with: refine, metadata and roi are fixed here
    times: StageTimes = field(default_factory=StageTimes)  # the shared stages' seconds
    reconstruction: np.ndarray | None = None  # the generator's output, made on first need
    metadata: Metadata = field(default_factory=Metadata)  # what the file will keep of the input's
    modes: dict[int, np.ndarray | None] = field(default_factory=dict)  # per quality: tile modes
    _symbols: np.ndarray | None = field(default=None, repr=False)
    compact_layer: bytes | None = None  # the compact payload with every symbol, made on first need
    _roi_plan: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def roi(self) -> roi.RoiConfig | None:
        """The classes whose pixels get the residual's bits (None: no ROI)."""
        return self.options.roi

    def roi_plan(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The image the residual codes (background pre-filtered) and the rate guide, made once
        per analysis (rate control reuses them at every quality); None without an ROI."""
        if self.roi is None:
            return None
        if self._roi_plan is None:
            h, w = self.img.rgb.shape[:2]
            weights = roi.block_weights(self.labels, self.roi)
            target = roi.prefilter(self.img.rgb, weights, self.roi.sigma)
            self._roi_plan = (target, roi.rate_guide(weights, h, w))
        return self._roi_plan

    @property
    def symbols(self) -> np.ndarray:
        """The compact symbols (C, H/8, W/8): CompNet runs only for files that use the base."""
        if self._symbols is None:
            self._symbols = self.make_symbols()
        return self._symbols
