"""The decoder: container → map → compact → generator → residual → image, from integers only.

It needs a release's decoder parts (parts.py) and its integer generator: numpy's
(intgrid/generator.py), or torch's when torch is already loaded (the same pixels, faster on
large images). Nothing here imports torch, so ``semcodec decode`` of a small file does not pay
torch's import. ``--layer map`` reads the header and the map layer alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from semcodec.decoder import prediction
from semcodec.decoder.maplayer import map_shape
from semcodec.decoder.parts import DecoderParts, find_parts
from semcodec.errors import CorruptData, ModelError
from semcodec.format import container
from semcodec.format.alpha import decode_alpha
from semcodec.format.compact import check_payload_size as check_compact_size
from semcodec.format.compact import decode_compact
from semcodec.format.container import Header, LayerKind, Limits, pil_pixel_limit
from semcodec.format.enhance import Adjust, decode_adjust
from semcodec.format.gating import GatingPlan, read_plan
from semcodec.format.map import check_payload_size as check_map_size
from semcodec.format.map import decode_map as _decode_map_payload
from semcodec.format.metadata import Metadata, decode_metadata
from semcodec.format.residual import backend_by_code
from semcodec.format.roi import decode_roi
from semcodec.format.tiling import (
    DEFAULT_TILING,
    MAP_SCALE,
    MIN_SIDE,
    MULTIPLE,
    Tiling,
    blocks,
    grow,
)
from semcodec.intgrid.enhancer import IntEnhancer
from semcodec.stages import Clock, StageTimes, TileProgress

# the generator as the decoder calls it: (symbols (C,h,w) int64, labels (h,w) int64) → uint8
# (8h, 8w, 3); the integer generator's forward, numpy's or torch's
GeneratorFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class DecodeResult:
    """A decoded file: the image plus the layers a caller may want to look at."""

    image: Image.Image
    header: Header
    semantic_map: np.ndarray  # labels at 1/map_scale resolution
    layer_bytes: dict[str, int] = field(default_factory=dict)
    base: np.ndarray | None = None  # the prediction (H,W,3) before the residual, if asked for
    metadata: Metadata = field(default_factory=Metadata)  # ICC profile, EXIF, XMP of the input
    modes: np.ndarray | None = None  # gated files: each tile's prediction mode
    adjust: Adjust | None = None  # files with an ENHANCE layer: what it says
    enhanced: bool = False  # whether the enhancement network ran on this picture
    pixels: np.ndarray | None = field(default=None, repr=False)  # RGB (H,W,3) before the mode
    times: StageTimes = field(default_factory=StageTimes)  # this decode's seconds per stage


def numpy_generator(parts: DecoderParts) -> GeneratorFn:
    """numpy's integer generator (the decoder without torch)."""
    return parts.integer_generator().forward


def auto_generator(parts: DecoderParts) -> GeneratorFn:
    """torch's integer generator when torch is already imported (faster), else numpy's."""
    if "torch" in sys.modules and parts.generator is not None:
        from semcodec.intgrid.generator_torch import from_table

        return from_table(parts.generator).forward_numpy
    return numpy_generator(parts)


def auto_enhancer(parts: DecoderParts, use_torch: bool = True) -> IntEnhancer | None:
    """The enhancement network on torch's convolutions when torch is already imported (faster
    on large pictures, the same pixels) and ``use_torch``, else on numpy's; None for a release
    without one."""
    enh = parts.int_enhancer()
    if enh is not None and use_torch and "torch" in sys.modules:
        from semcodec.intgrid.enhancer_torch import torch_band_kernel

        enh.kernel = torch_band_kernel(enh)
    return enh


def deferred_generator(make: Callable[[], GeneratorFn]) -> GeneratorFn:
    """A generator made on its first tile: decoding (or the encoder's check of) a file that
    codes the image itself never builds it."""
    made: list[GeneratorFn] = []

    def run(symbols: np.ndarray, labels: np.ndarray) -> np.ndarray:
        if not made:
            made.append(make())
        return made[0](symbols, labels)

    return run


def reconstruct(
    symbols: np.ndarray,
    labels: np.ndarray,
    crop: tuple[int, int],
    generator: GeneratorFn,
    tiling: Tiling = DEFAULT_TILING,
    progress: TileProgress | None = None,
) -> np.ndarray:
    """A4: the base (the generator's picture), uint8 (h,w,3), tile by tile as the encoder ran."""
    _, mh, mw = symbols.shape
    h, w = crop
    out = np.empty((h, w, 3), np.uint8)
    regions = tiling.regions(mh * MULTIPLE, mw * MULTIPLE)
    for n, r in enumerate(regions, 1):
        if progress is not None and len(regions) > 1:
            progress("generator", n, len(regions))
        (y0, y1, x0, x1), (cy0, cy1, cx0, cx1) = blocks(r.core), blocks(r.ctx)
        if y0 * MULTIPLE >= h or x0 * MULTIPLE >= w:
            continue  # a core made only of padding
        gh, gw = max(cy1 - cy0, MIN_SIDE // MULTIPLE), max(cx1 - cx0, MIN_SIDE // MULTIPLE)
        sym = grow(symbols[:, cy0:cy1, cx0:cx1], gh, gw).astype(np.int64)
        lab = grow(labels[cy0:cy1, cx0:cx1], gh, gw).astype(np.int64)
        v = generator(sym, lab)
        oy0, ox0 = y0 * MULTIPLE, x0 * MULTIPLE
        oy1, ox1 = min(y1 * MULTIPLE, h), min(x1 * MULTIPLE, w)
        ty, tx = oy0 - cy0 * MULTIPLE, ox0 - cx0 * MULTIPLE
        out[oy0:oy1, ox0:ox1] = v[ty : ty + oy1 - oy0, tx : tx + ox1 - ox0]
    return out


class Decoder:
    """Decodes files of one release with a given generator (default: its integer generator)."""

    def __init__(
        self,
        parts: DecoderParts,
        generator: GeneratorFn | None = None,
        limits: Limits | None = None,
        tiling: Tiling | None = None,
        enhance: bool = True,
        use_torch: bool = True,
    ):
        """``use_torch`` False: numpy's kernels even where torch is imported (what a decode
        without torch runs: benchmarks)."""
        self.parts = parts
        self.enhance = enhance  # False: leave out the ENHANCE layer (benchmarks: its gain)
        self.enhancer = auto_enhancer(parts, use_torch)
        if generator is None:
            make = (
                (lambda: auto_generator(parts)) if use_torch else (lambda: numpy_generator(parts))
            )
            generator = deferred_generator(make)
        self.generator = generator
        self.limits = limits or Limits()
        self.tiling = tiling or DEFAULT_TILING

    def check_model(self, header: Header) -> None:
        """Refuse a file made with other weights."""
        if header.model_hash != self.parts.hash:
            raise ModelError(
                f"model {header.model_name!r} weights hash mismatch: file {header.model_hash}, "
                f"decoder has {self.parts.hash} ({self.parts.release})"
            )
        if header.compact_levels != self.parts.levels or header.map_scale != MAP_SCALE:
            raise CorruptData("header's compact levels or map scale do not match the model")

    def check_payloads(
        self, header: Header, layers: dict[LayerKind, bytes], used: np.ndarray | None
    ) -> None:
        """Refuse layers too short for the declared size, before any per-symbol loop or buffer.

        ``used`` is the gating layer's map of blocks whose symbols are coded (None: all).
        """
        mh, mw = map_shape(header)
        size = f"a {header.width}x{header.height} image"
        blocks_coded = mh * mw if used is None else int(used.sum())
        compact = layers.get(LayerKind.COMPACT)
        if blocks_coded and compact is None:
            raise CorruptData("the gating layer uses the base, but the file has no COMPACT layer")
        if not blocks_coded and compact is not None:
            raise CorruptData("COMPACT layer present, but no tile of the gating layer uses it")
        if blocks_coded:
            nsym = self.parts.channels * blocks_coded
            check_compact_size(compact, self.parts.compact_table, nsym, size)
        check_map_size(layers[LayerKind.SEMANTIC_MAP], mh, mw, size)

    def adjustment(self, header: Header, layers: dict[LayerKind, bytes]) -> Adjust | None:
        """The ENHANCE layer's content (parsed before any pixel work), or None."""
        data = layers.get(LayerKind.ENHANCE)
        if data is None:
            return None
        if self.enhancer is None:
            raise CorruptData(
                f"ENHANCE layer present, but release {self.parts.release} has no enhancement network"
            )
        enh = self.enhancer
        adjust = decode_adjust(data, enh.classes, header.height, header.width, enh.width)
        if adjust.update is not None:
            try:
                enh.check_update(adjust.update)
            except ValueError as e:
                raise CorruptData(f"ENHANCE layer: {e}") from None
        return adjust

    def gating(self, header: Header, layers: dict[LayerKind, bytes]) -> GatingPlan | None:
        """The plan of a gated file, else None."""
        compact = LayerKind.COMPACT in layers
        return read_plan(layers.get(LayerKind.GATING), compact, *map_shape(header))

    def decode(
        self,
        data: bytes,
        layer: str = "full",
        keep_base: bool = False,
        progress: TileProgress | None = None,
    ) -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the generator's reconstruction only).

        keep_base also returns the generator output before the residual (one decode, both
        layers); ``progress`` hears of each generator tile of a tiled image.
        """
        if layer not in ("full", "base"):
            raise ValueError(f"layer must be 'full' or 'base', got {layer!r}")
        clock = Clock()
        header, layers = container.unpack(data, self.limits)
        self.check_model(header)
        gate = self.gating(header, layers)
        used = None if gate is None else prediction.used_by(gate, *map_shape(header))
        self.check_payloads(header, layers, used)
        adjust = self.adjustment(header, layers)
        meta = Metadata()
        if LayerKind.METADATA in layers:
            meta = decode_metadata(layers[LayerKind.METADATA])
        if LayerKind.ROI in layers:  # informative (what the encoder favoured), but well formed
            decode_roi(layers[LayerKind.ROI])
        clock("unpack")
        h, w = header.height, header.width
        mh, mw = map_shape(header)
        labels = _decode_map_payload(layers[LayerKind.SEMANTIC_MAP], mh, mw, self.parts.num_classes)
        clock("map_coder")
        shape = (self.parts.channels, mh, mw)
        table = self.parts.compact_table
        if gate is None:
            symbols = decode_compact(layers[LayerKind.COMPACT], shape, table)
            clock("compact_coder")
            pred = reconstruct(symbols, labels, (h, w), self.generator, self.tiling, progress)
            clock("generator")
        else:
            modes = gate.modes
            coded = decode_compact(layers.get(LayerKind.COMPACT, b""), shape, table, used)
            symbols = prediction.fill_symbols(coded, used, self.parts.levels)
            clock("compact_coder")
            preds: dict[int, np.ndarray | int] = {}
            if (modes == prediction.GEN).any():
                preds[prediction.GEN] = reconstruct(
                    symbols, labels, (h, w), self.generator, self.tiling, progress
                )
            clock("generator")
            if (modes == prediction.BASE).any():
                preds[prediction.BASE] = prediction.base_pixels(symbols, self.parts.levels, (h, w))
            if (modes == prediction.NONE).any():
                preds[prediction.NONE] = prediction.FLAT
            pred = prediction.blend(preds, modes, (h, w), gate.tile_blocks, gate.radius, True)
            clock("gating")
        base = prediction.as_picture(pred, (h, w)) if keep_base else None
        if layer == "full" and header.residual_backend:
            backend = backend_by_code(header.residual_backend)
            with pil_pixel_limit(self.limits):
                out = backend.picture(layers[LayerKind.RESIDUAL], h, w, pred)
            clock("residual")
        else:
            out = base if base is not None else prediction.as_picture(pred, (h, w))
        ran = False
        if adjust is not None and layer == "full" and self.enhance:
            assert self.enhancer is not None
            out = self.enhancer.enhance(out, labels, header.quality, adjust)
            ran = True
            clock("enhance")
        img = assemble(out, header, layers.get(LayerKind.ALPHA), self.limits)
        clock("assemble")
        sizes = {k.name.lower(): len(v) for k, v in layers.items()}
        modes = None if gate is None else gate.modes
        return DecodeResult(
            image=img,
            header=header,
            semantic_map=labels,
            layer_bytes=sizes,
            base=base,
            metadata=meta,
            modes=modes,
            adjust=adjust,
            enhanced=ran,
            pixels=out,
            times=clock.times,
        )


def decoder_for(header: Header, limits: Limits | None = None) -> Decoder | None:
    """A torch-free decoder for the release a file names, if its parts are installed."""
    parts = find_parts(header.model_hash)
    if parts is None or parts.generator is None:
        return None
    return Decoder(parts, limits=limits)


def assemble(
    rgb: np.ndarray, header: Header, alpha_data: bytes | None, limits: Limits
) -> Image.Image:
    """Give back the input's mode: L from RGB, RGBA with the lossless alpha layer."""
    img = Image.fromarray(rgb, "RGB")
    if header.mode == "L":
        return img.convert("L")
    if header.mode == "RGBA":
        alpha = decode_alpha(alpha_data or b"", header.width, header.height, limits)
        img.putalpha(Image.fromarray(alpha, "L"))
    return img
