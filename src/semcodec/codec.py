"""The pipeline (A1–A6): image → map → compact → base → enhanced reconstruction → residual → file.

Floating-point networks only produce what is then stored losslessly (the map, the compact
symbols) or what both ends recompute identically from decoded integers (the enhanced
reconstruction, on an integer grid). Entropy coders see integers only. This module only
orchestrates: tiles come from tiling.py, the map from segment.py, each layer's coder from
entropy/.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from PIL import Image

from . import container, runtime, segment, zoo
from .container import Header, LayerKind, Limits
from .defaults import DEFAULT_EFFORT, DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL, EFFORTS
from .entropy.alpha import decode_alpha, encode_alpha
from .entropy.compact import check_payload_size as check_compact_size
from .entropy.compact import decode_compact, encode_compact
from .entropy.residual import backend_by_code, get_backend
from .entropy.semantic_map import check_payload_size as check_map_size
from .entropy.semantic_map import decode_map, encode_map
from .errors import CorruptData, ModelError, UnsupportedInput
from .imageio import LoadedImage, from_pil, load_image, pil_pixel_limit
from .metadata import KINDS as METADATA_KINDS
from .metadata import Metadata, decode_metadata, encode_metadata
from .models.compnet import dequantize, quantize
from .models.generator import pixels
from .refine import RefineConfig, refine_latents
from .tiling import (
    DEFAULT_TILING,
    MIN_SIDE,
    MULTIPLE,
    Region,
    Tiling,
    blocks,
    context_pixels,
    grow,
    pad_rgb,
    paste,
)
from .zoo import ModelBundle, load_bundle

T = TypeVar("T")

COMPNET_MARGIN = 6  # blocks of context around a CompNet band (48 px > its 34 px reach)
# core blocks (x64 pixels) from which CompNet runs in 2 / 4 bands
BANDS_2, BANDS_4 = 1 << 11, 1 << 14


@dataclass
class DecodeResult:
    """A decoded file: the image plus the layers a caller may want to look at."""

    image: Image.Image
    header: Header
    semantic_map: np.ndarray  # labels at 1/map_scale resolution
    layer_bytes: dict[str, int] = field(default_factory=dict)
    base: np.ndarray | None = None  # generator output (H,W,3) before the residual, if asked for
    metadata: Metadata = field(default_factory=Metadata)  # ICC profile, EXIF, XMP of the input


@dataclass
class EncodeStats:
    """What an encode produced, for reporting (bytes per layer)."""

    layer_bytes: dict[str, int]
    total_bytes: int


@dataclass
class Analysis:
    """The quality-independent part of an encode (``Codec.analyse``), reusable across qualities."""

    img: LoadedImage
    labels: np.ndarray
    symbols: np.ndarray
    layers: dict[LayerKind, bytes]  # semantic map and compact payloads
    timings: dict[str, float]
    cpu_timings: dict[str, float]
    reconstruction: np.ndarray | None = None  # the generator's output, made on first need
    metadata: Metadata = field(default_factory=Metadata)  # what the file will keep of the input's


def _check_quality(quality: int) -> None:
    """Qualities are 0 (base layer only) to 100."""
    if not 0 <= int(quality) <= 100:
        raise ValueError(f"quality must be 0..100, got {quality}")


def _bands(region: Region) -> list[Region]:
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


def _resolve_model(model: str) -> str:
    """Refuse model names that are neither registered nor a '.pt' weights file, e.g. '/proc/kcore'."""
    if model in zoo.REGISTRY:
        return model
    path = Path(model)
    if path.suffix == ".pt" and path.is_file():
        return model
    known = ", ".join(sorted(zoo.REGISTRY))
    raise ModelError(f"unknown model {model!r} (known: {known}; or a path to a .pt bundle)")


class Codec:
    """Encoder and decoder bound to one model bundle (loaded once, reused for every image)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        bf16: bool | None = None,
        limits: Limits | None = None,
        tiling: Tiling | None = None,
        deterministic: bool = True,
        refine: RefineConfig | None = None,
        effort: int = DEFAULT_EFFORT,
    ):
        """bf16=None autocasts the encoder networks to bf16 only where that is native and
        faster (runtime.bf16_decision). deterministic=False lets the encoder networks use
        torch's intra-op threads instead of the fixed split of work (runtime.run_parallel):
        files may then differ between thread counts. refine sets the encoder's latent
        refinement (see refine.py); the default is off. effort (1..9, default 5) is the
        encoder's time/bytes trade-off (the AVIF residual's speed); decoding never depends on it."""
        if effort not in EFFORTS:
            raise ValueError(f"effort must be 1..9, got {effort}")
        self.effort = int(effort)
        # called as progress(stage, done, total) after each tile of a tiled image (CLI bar)
        self.progress: Callable[[str, int, int], None] | None = None
        runtime.return_large_frees()
        self.bundle: ModelBundle = load_bundle(_resolve_model(model))
        self.refine = refine if refine is not None else RefineConfig()
        self.deterministic = deterministic
        self.bf16 = runtime.bf16_decision().use if bf16 is None else bool(bf16)
        self.limits = limits or Limits()
        self.tiling = tiling or DEFAULT_TILING
        self.timings: dict[str, float] = {}  # wall seconds per stage of the last encode/decode
        self.cpu_timings: dict[str, float] = {}  # CPU seconds (all threads) per stage, likewise

    def _ticking(self, stage: str, tasks: list[Callable[[], T]]) -> list[Callable[[], T]]:
        """Tasks that report each finished piece to ``progress`` (tiled images only)."""
        report = self.progress
        if report is None or len(tasks) < 2:
            return tasks
        done = [0]
        lock = threading.Lock()

        def wrap(task: Callable[[], T]) -> Callable[[], T]:
            def run() -> T:
                out = task()
                with lock:
                    done[0] += 1
                    report(stage, done[0], len(tasks))
                return out

            return run

        return [wrap(t) for t in tasks]

    def _run(self, tasks: list[Callable[[], T]], stage: str = "") -> list[T]:
        """Encoder work: a fixed split on one thread per piece, or plain intra-op threads."""
        tasks = self._ticking(stage, tasks) if stage else tasks
        if self.deterministic:
            return runtime.run_parallel(list(tasks))
        return [t() for t in tasks]

    # ----- encoder -------------------------------------------------------------------------
    def semantic_map(self, rgb: np.ndarray) -> np.ndarray:
        """A1: the 1/8-resolution label map of a padded (H,W,3) uint8 image (segment.py)."""
        return segment.label_map(self.bundle.seg, rgb, self.bf16, self.tiling, self._run)

    @torch.no_grad()
    def compact(
        self, rgb: np.ndarray, labels: np.ndarray, refine: RefineConfig | None = None
    ) -> np.ndarray:
        """A2/A3: integer compact symbols (C,h,w) of a padded uint8 image and its map.

        CompNet runs per tile and, within a tile, in row bands (``_bands``) side by side.
        """
        refine = refine if refine is not None else self.refine
        ph, pw = rgb.shape[:2]
        c = self.bundle.comp.cfg.out_channels
        symbols = np.empty((c, ph // MULTIPLE, pw // MULTIPLE), np.int64)
        regions = self.tiling.regions(ph, pw)
        pieces = [band for r in regions for band in _bands(r.blocks())]
        bundle, bf16 = self.bundle, self.bf16

        def piece(r: Region) -> Callable[[], np.ndarray]:
            def run() -> np.ndarray:
                cy0, cy1, cx0, cx1 = r.ctx
                x = context_pixels(rgb, r)
                lab = grow(
                    labels[cy0:cy1, cx0:cx1], x.shape[-2] // MULTIPLE, x.shape[-1] // MULTIPLE
                )
                lab_t = torch.from_numpy(lab.astype(np.int64))[None]
                with torch.no_grad(), runtime.bf16_autocast(bf16):
                    t = bundle.comp(x, lab_t).float()
                t = refine_latents(t, x, lab_t, bundle.gen, bundle.compact_table, refine)
                return quantize(t, bundle.levels)[0].numpy()

            return run

        results = self._run([piece(r) for r in pieces], "compnet" if len(regions) > 1 else "")
        for r, q in zip(pieces, results, strict=True):
            paste(symbols, r, q)
        return symbols

    @torch.no_grad()
    def reconstruct(
        self, symbols: np.ndarray, labels: np.ndarray, crop: tuple[int, int]
    ) -> np.ndarray:
        """A4: the enhanced reconstruction, uint8 (h,w,3), from decoded integers only (tiled).

        The integer-grid generator (models/fixed.py) gives the same pixels on every CPU and
        thread count, so it uses all of torch's threads; a bundle without one (e.g. the
        ``paper`` configuration) runs its float generator on one thread.
        """
        _, mh, mw = symbols.shape
        h, w = crop
        out = np.empty((h, w, 3), np.uint8)
        fixed_gen = self.bundle.fixed
        regions = self.tiling.regions(mh * MULTIPLE, mw * MULTIPLE)
        for n, r in enumerate(regions, 1):
            if self.progress is not None and len(regions) > 1:
                self.progress("generator", n, len(regions))
            (y0, y1, x0, x1), (cy0, cy1, cx0, cx1) = blocks(r.core), blocks(r.ctx)
            if y0 * MULTIPLE >= h or x0 * MULTIPLE >= w:
                continue  # a core made only of padding
            gh, gw = max(cy1 - cy0, MIN_SIDE // MULTIPLE), max(cx1 - cx0, MIN_SIDE // MULTIPLE)
            sym = torch.from_numpy(grow(symbols[:, cy0:cy1, cx0:cx1], gh, gw).astype(np.int64))
            lab_t = torch.from_numpy(grow(labels[cy0:cy1, cx0:cx1], gh, gw).astype(np.int64))
            if fixed_gen is not None:
                with runtime.generator_heap():
                    v = fixed_gen.forward(sym[None], lab_t[None])[0]
            else:
                v = self._float_generator(sym[None], lab_t[None], (gh * MULTIPLE, gw * MULTIPLE))
            oy0, ox0 = y0 * MULTIPLE, x0 * MULTIPLE
            oy1, ox1 = min(y1 * MULTIPLE, h), min(x1 * MULTIPLE, w)
            ty, tx = oy0 - cy0 * MULTIPLE, ox0 - cx0 * MULTIPLE
            v = v[:, ty : ty + oy1 - oy0, tx : tx + ox1 - ox0]
            out[oy0:oy1, ox0:ox1] = v.permute(1, 2, 0).numpy()
        return out

    def _float_generator(
        self, sym: torch.Tensor, lab: torch.Tensor, size: tuple[int, int]
    ) -> torch.Tensor:
        """uint8 (3,H,W) of a float generator, on one thread (reproducible on one machine only)."""
        with runtime.single_thread():
            v, _base = self.bundle.gen(dequantize(sym, self.bundle.levels), lab, size)
        return pixels(v[0])

    def encode(
        self,
        image: Image.Image | np.ndarray | LoadedImage | str | bytes,
        quality: int = DEFAULT_QUALITY,
        residual: str = DEFAULT_RESIDUAL,
        metadata: Iterable[str] = METADATA_KINDS,
    ) -> bytes:
        """Encode an image into a complete .sem file, keeping the metadata kinds named."""
        return self.encode_with_stats(image, quality, residual, metadata)[0]

    def encode_with_stats(
        self,
        image,
        quality: int = DEFAULT_QUALITY,
        residual: str = DEFAULT_RESIDUAL,
        metadata: Iterable[str] = METADATA_KINDS,
    ) -> tuple[bytes, EncodeStats]:
        """Encode and report bytes per layer."""
        _check_quality(quality)
        return self.finish(self.analyse(image, metadata=metadata), quality, residual)

    def analyse(
        self,
        image,
        refine: RefineConfig | None = None,
        metadata: Iterable[str] = METADATA_KINDS,
    ) -> Analysis:
        """Run what every quality shares (map, compact layer, their payloads) once.

        Rate control encodes one image at several qualities: with an Analysis the networks run
        once and each further quality costs only the residual coder (``finish``). ``refine``
        overrides the Codec's latent refinement for this image; ``metadata`` names the kinds
        of the input's metadata (icc, exif, xmp) the file keeps.
        """
        clock = _Clock(self.timings, self.cpu_timings)
        img = self._load(image)
        clock("load")
        h, w = img.rgb.shape[:2]
        problem = self.limits.check(w, h)
        if problem:
            raise UnsupportedInput(problem)
        rgb = pad_rgb(img.rgb)
        labels = self.semantic_map(rgb)
        clock("segment")
        symbols = self.compact(rgb, labels, refine)
        clock("compnet")
        del rgb
        layers = {LayerKind.SEMANTIC_MAP: encode_map(labels, self.bundle.num_classes)}
        clock("map_coder")
        layers[LayerKind.COMPACT] = encode_compact(symbols, self.bundle.compact_table)
        clock("compact_coder")
        kept = img.metadata.keep(frozenset(metadata))
        if kept:
            layers[LayerKind.METADATA] = encode_metadata(kept)
        return Analysis(
            img, labels, symbols, layers, dict(self.timings), dict(self.cpu_timings), None, kept
        )

    def finish(
        self, analysis: Analysis, quality: int = DEFAULT_QUALITY, residual: str = DEFAULT_RESIDUAL
    ) -> tuple[bytes, EncodeStats]:
        """The .sem file of an analysed image at one quality (residual, alpha, container)."""
        _check_quality(quality)
        clock = _Clock(self.timings, self.cpu_timings)
        self.timings.update(analysis.timings)  # a file's stage times include the shared stages
        self.cpu_timings.update(analysis.cpu_timings)
        img = analysis.img
        h, w = img.rgb.shape[:2]
        layers = dict(analysis.layers)
        backend_code = 0
        if quality > 0:
            backend = get_backend(residual)
            if analysis.reconstruction is None:
                analysis.reconstruction = self.reconstruct(
                    analysis.symbols, analysis.labels, (h, w)
                )
            clock("generator")
            res = img.rgb.astype(np.int16)
            res -= analysis.reconstruction
            layers[LayerKind.RESIDUAL] = backend.encode(res, int(quality), self.effort)
            clock("residual")
            backend_code = backend.code
            del res
        if img.alpha is not None:
            layers[LayerKind.ALPHA] = encode_alpha(img.alpha)
            clock("alpha")
        header = Header(
            width=w,
            height=h,
            mode=img.mode,
            model_name=self.bundle.name,
            model_hash=self.bundle.hash,
            quality=int(quality),
            residual_backend=backend_code,
            map_scale=MULTIPLE,
            compact_levels=self.bundle.levels,
        )
        data = container.pack(header, layers)
        stats = EncodeStats({k.name.lower(): len(v) for k, v in layers.items()}, len(data))
        clock("pack")
        return data, stats

    def _load(self, image) -> LoadedImage:
        """Accept a PIL image, an RGB array, a LoadedImage, a path or encoded bytes."""
        if isinstance(image, LoadedImage):
            return image
        if isinstance(image, np.ndarray):
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise UnsupportedInput("array input must be uint8 of shape (H, W, 3)")
            return LoadedImage(rgb=image, mode="RGB")
        if isinstance(image, Image.Image):
            return from_pil(image, self.limits)
        return load_image(image, self.limits)

    # ----- decoder -------------------------------------------------------------------------
    def check_model(self, header: Header) -> None:
        """Refuse a file made with another model or other weights."""
        if header.model_name != self.bundle.name:
            raise ModelError(
                f"file was encoded with model {header.model_name!r}, decoder has {self.bundle.name!r}"
            )
        if header.model_hash != self.bundle.hash:
            raise ModelError(
                f"model {header.model_name!r} weights hash mismatch: file {header.model_hash}, "
                f"installed {self.bundle.hash}"
            )
        if header.compact_levels != self.bundle.levels or header.map_scale != MULTIPLE:
            raise CorruptData("header's compact levels or map scale do not match the model")

    def check_payloads(self, header: Header, layers: dict[LayerKind, bytes]) -> None:
        """Refuse layers too short for the declared size, before any per-symbol loop or buffer."""
        mh, mw = -(-header.height // MULTIPLE), -(-header.width // MULTIPLE)
        size = f"a {header.width}x{header.height} image"
        nsym = self.bundle.comp.cfg.out_channels * mh * mw
        check_compact_size(layers[LayerKind.COMPACT], self.bundle.compact_table, nsym, size)
        check_map_size(layers[LayerKind.SEMANTIC_MAP], mh, mw, size)

    def decode(self, data: bytes, layer: str = "full", keep_base: bool = False) -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the generator's reconstruction only).

        keep_base also returns the generator output before the residual (one decode, both layers).
        """
        if layer not in ("full", "base"):
            raise ValueError(f"layer must be 'full' or 'base', got {layer!r}")
        clock = _Clock(self.timings, self.cpu_timings)
        header, layers = container.unpack(data, self.limits)
        self.check_model(header)
        self.check_payloads(header, layers)
        meta = Metadata()
        if LayerKind.METADATA in layers:
            meta = decode_metadata(layers[LayerKind.METADATA])
        clock("unpack")
        h, w = header.height, header.width
        mh, mw = -(-h // MULTIPLE), -(-w // MULTIPLE)
        labels = decode_map(layers[LayerKind.SEMANTIC_MAP], mh, mw, self.bundle.num_classes)
        clock("map_coder")
        c = self.bundle.comp.cfg.out_channels
        symbols = decode_compact(layers[LayerKind.COMPACT], (c, mh, mw), self.bundle.compact_table)
        clock("compact_coder")
        out = base = self.reconstruct(symbols, labels, (h, w))
        clock("generator")
        if layer == "full" and header.residual_backend:
            backend = backend_by_code(header.residual_backend)
            with pil_pixel_limit(self.limits):
                res = backend.decode(layers[LayerKind.RESIDUAL], h, w)
            res += out
            out = np.clip(res, 0, 255).astype(np.uint8)
            del res
            clock("residual")
        img = _assemble(out, header, layers.get(LayerKind.ALPHA), self.limits)
        clock("assemble")
        sizes = {k.name.lower(): len(v) for k, v in layers.items()}
        return DecodeResult(img, header, labels, sizes, base if keep_base else None, meta)


class _Clock:
    """Records wall and CPU seconds since the previous call under a stage name (benchmarks)."""

    def __init__(self, wall: dict[str, float], cpu: dict[str, float]):
        wall.clear()
        cpu.clear()
        self.wall, self.cpu = wall, cpu
        self.t, self.c = time.perf_counter(), time.process_time()

    def __call__(self, stage: str) -> None:
        """Close the current stage."""
        t, c = time.perf_counter(), time.process_time()
        self.wall[stage] = self.wall.get(stage, 0.0) + t - self.t
        self.cpu[stage] = self.cpu.get(stage, 0.0) + c - self.c
        self.t, self.c = t, c


def _assemble(
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


_DEFAULT: dict[str, Codec] = {}


def get_codec(model: str = DEFAULT_MODEL) -> Codec:
    """A process-wide Codec per model, so models load once."""
    if model not in _DEFAULT:
        _DEFAULT[model] = Codec(model)
    return _DEFAULT[model]


def encode(
    image,
    quality: int = DEFAULT_QUALITY,
    model: str = DEFAULT_MODEL,
    residual: str = DEFAULT_RESIDUAL,
    metadata: Iterable[str] = METADATA_KINDS,
) -> bytes:
    """Encode a PIL image (or array/path/bytes) into .sem bytes, keeping its metadata."""
    return get_codec(model).encode(image, quality=quality, residual=residual, metadata=metadata)


def decode(data: bytes, layer: str = "full", model: str | None = None) -> Image.Image:
    """Decode .sem bytes into a PIL image; the model is taken from the file unless given."""
    if model is None:
        model = container.read_header(data).model_name
    return get_codec(model).decode(data, layer=layer).image
