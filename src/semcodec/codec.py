"""The pipeline (A1–A6): image → map → compact → base → enhanced reconstruction → residual → file.

Floating-point networks only produce what is then stored losslessly (the map, the compact
symbols) or what both ends recompute identically from decoded integers (the enhanced
reconstruction, in fp32 on both sides). Entropy coders see integers only.

Large images are processed in overlapping tiles (see ``Tiling``) so that memory stays bounded;
the tile grid is a function of the image size alone, so encoder and decoder run the generator on
exactly the same tiles and the encoder's residual is computed against the decoder's image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from . import container, runtime, zoo
from .container import Header, LayerKind, Limits
from .defaults import DEFAULT_EFFORT, DEFAULT_MODEL, DEFAULT_QUALITY, DEFAULT_RESIDUAL, EFFORTS
from .entropy.compact import decode_compact, encode_compact
from .entropy.residual import backend_by_code, get_backend
from .entropy.semantic_map import decode_map, encode_map
from .errors import CorruptData, ModelError, UnsupportedInput
from .imageio import _PIL_LIMIT_LOCK, LoadedImage, load_image
from .metadata import KINDS as METADATA_KINDS
from .metadata import Metadata, decode_metadata, encode_metadata, metadata_of
from .models.compnet import dequantize, quantize
from .models.generator import pixels
from .refine import RefineConfig, refine_latents
from .zoo import ModelBundle, load_bundle

T = TypeVar("T")

MULTIPLE = 8  # the networks' common size multiple (CompNet stride 8, segmentation output stride 8)
SEG_HEAD_MAX = 1 << 20  # map positions (64 Mpixel) up to which the segmentation head is global
MIN_SIDE = 32  # smallest network input side: CompNet's 7x7 reflection pad at 1/8 needs 4 positions

# A coded semantic map spends at least log2(2048/2047) bits per label (its most skewed adaptive
# table is halved at a total of 2048, see entropy/semantic_map.py); a range coder cannot write
# less than the information content, so shorter payloads cannot describe the declared size.
_MAP_MIN_BITS = math.log2(2048 / 2047)
_PLAUSIBLE = 0.5  # safety factor on those lower bounds (rounding, coder flush)
_MAP_MODE_CODED = 0x01
COMPNET_MARGIN = 6  # blocks of context around a CompNet band (48 px > its 34 px reach)
# core blocks (x64 pixels) from which CompNet runs in 2 / 4 bands
BANDS_2, BANDS_4 = 1 << 11, 1 << 14


@dataclass(frozen=True)
class Region:
    """One tile: the core rectangle it contributes and the larger context the networks see."""

    core: tuple[int, int, int, int]  # y0, y1, x0, x1 in padded-image pixels
    ctx: tuple[int, int, int, int]  # the core grown by the margin, clipped to the image


def _split(n: int, core: int) -> list[int]:
    """Cut n pixels (a multiple of 8) into the fewest near-equal parts of at most `core` pixels."""
    blocks = n // MULTIPLE
    parts = -(-n // core)
    return [MULTIPLE * (i * blocks // parts) for i in range(parts + 1)]


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


def _pad_rgb(rgb: np.ndarray) -> np.ndarray:
    """Edge-pad (H,W,3) uint8 to the networks' size multiple (cropped back after decoding)."""
    h, w = rgb.shape[:2]
    ph, pw = (-h) % MULTIPLE, (-w) % MULTIPLE
    return np.pad(rgb, ((0, ph), (0, pw), (0, 0)), mode="edge") if ph or pw else rgb


def _to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """(h,w,3) uint8 → (1,3,h,w) float in [0,1], grown to MIN_SIDE by edge replication."""
    # A copy: image arrays are often read-only views, which torch.from_numpy warns about.
    x = torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).float().div(255.0)[None]
    h, w = x.shape[-2:]
    ph, pw = max(0, MIN_SIDE - h), max(0, MIN_SIDE - w)
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x


def _grow(a: np.ndarray, h: int, w: int) -> np.ndarray:
    """Edge-pad the last two axes of a 1/8-resolution array to at least h x w."""
    ph, pw = max(0, h - a.shape[-2]), max(0, w - a.shape[-1])
    if not (ph or pw):
        return a
    return np.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, ph), (0, pw)], mode="edge")


def _bf16(enabled: bool):
    """bf16 autocast for the networks whose outputs are stored losslessly."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


@contextlib.contextmanager
def _pil_pixel_limit(limits: Limits) -> Iterator[None]:
    """Let Pillow decode payloads up to our own limit (its default bomb check is lower)."""
    with _PIL_LIMIT_LOCK:
        previous = Image.MAX_IMAGE_PIXELS
        if previous is not None and previous < limits.max_pixels:
            Image.MAX_IMAGE_PIXELS = limits.max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = previous


def _bands(core: tuple[int, int, int, int], ctx: tuple[int, int, int, int]) -> list[Region]:
    """Cut a region (1/8 units) into row bands for parallel CompNet runs; by size alone.

    Each band keeps COMPNET_MARGIN blocks of context above and below (CompNet sees 34 pixels
    around each symbol), so its symbols are those of the whole region up to float rounding.
    """
    y0, y1, x0, x1 = core
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
        table = self.bundle.compact_table.astype(np.float64)
        # fewest bits any compact symbol can cost: bounds the payload a given image size needs
        self._compact_min_bits = float(-np.log2((table / table.sum(-1, keepdims=True)).max()))

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
            return runtime.run_parallel(tasks)
        return [t() for t in tasks]

    # ----- encoder -------------------------------------------------------------------------
    @torch.no_grad()
    def semantic_map(self, rgb: np.ndarray) -> np.ndarray:
        """A1: the 1/8-resolution label map of a padded (H,W,3) uint8 image.

        The RGB and grayscale branches run side by side. Tiled images: the convolutional
        backbones run tile by tile, but the recurrent head (ReNet GRUs sweeping whole rows and
        columns, coordinate channels) runs once on the stitched 1/8-resolution features, as in
        an untiled run. Above SEG_HEAD_MAX map positions the whole network runs per tile.
        """
        ph, pw = rgb.shape[:2]
        mh, mw = ph // MULTIPLE, pw // MULTIPLE
        regions = self.tiling.regions(ph, pw)
        seg = self.bundle.seg
        bf16 = self.bf16

        def tile(r: Region) -> torch.Tensor:
            (cy0, cy1, cx0, cx1) = _blocks(r.ctx)
            return _to_tensor(rgb[cy0 * MULTIPLE : cy1 * MULTIPLE, cx0 * MULTIPLE : cx1 * MULTIPLE])

        def backbone(branch: torch.nn.Module, r: Region, i: int) -> Callable[[], torch.Tensor]:
            def run() -> torch.Tensor:
                with torch.no_grad(), _bf16(bf16):
                    return branch.backbone(seg.branch_inputs(tile(r))[i])

            return run

        def head(branch: torch.nn.Module, f: torch.Tensor) -> Callable[[], torch.Tensor]:
            def run() -> torch.Tensor:
                with torch.no_grad(), _bf16(bf16):
                    return branch.head(f).float()

            return run

        def whole_branch(branch: torch.nn.Module, i: int) -> Callable[[], torch.Tensor]:
            def run() -> torch.Tensor:
                with torch.no_grad(), _bf16(bf16):
                    return branch(seg.branch_inputs(tile(regions[0]))[i]).float()

            return run

        branches = (seg.rgb, seg.gray)
        if len(regions) == 1:
            a, b = self._run([whole_branch(br, i) for i, br in enumerate(branches)])
            # inputs under MIN_SIDE were grown by edge replication: crop back to the map
            return seg.fuse(a, b)[0, :, :mh, :mw].argmax(0).numpy().astype(np.uint8)
        if mh * mw > SEG_HEAD_MAX:  # bounded memory: the whole network per tile, in turn
            labels = np.empty((mh, mw), np.uint8)
            for r in regions:
                (y0, y1, x0, x1), (cy0, _, cx0, _) = _blocks(r.core), _blocks(r.ctx)
                a, b = self._run([backbone(br, r, i) for i, br in enumerate(branches)])
                a, b = self._run([head(seg.rgb, a), head(seg.gray, b)])
                lab = seg.fuse(a, b)[0].argmax(0).numpy()
                labels[y0:y1, x0:x1] = lab[y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
            return labels
        parts = self._run(
            [backbone(br, r, i) for i, br in enumerate(branches) for r in regions], "segment"
        )
        feats = []
        for i in range(2):
            mine = parts[i * len(regions) : (i + 1) * len(regions)]
            whole = torch.empty((1, mine[0].shape[1], mh, mw), dtype=mine[0].dtype)
            for r, f in zip(regions, mine, strict=True):
                (y0, y1, x0, x1), (cy0, _, cx0, _) = _blocks(r.core), _blocks(r.ctx)
                whole[:, :, y0:y1, x0:x1] = f[:, :, y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
            feats.append(whole)
        del parts
        a, b = self._run([head(seg.rgb, feats[0]), head(seg.gray, feats[1])])
        del feats
        return seg.fuse(a, b)[0].argmax(0).numpy().astype(np.uint8)

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
        pieces = [band for r in regions for band in _bands(_blocks(r.core), _blocks(r.ctx))]
        bundle, bf16 = self.bundle, self.bf16

        def piece(r: Region) -> Callable[[], np.ndarray]:
            def run() -> np.ndarray:
                cy0, cy1, cx0, cx1 = r.ctx
                x = _to_tensor(
                    rgb[cy0 * MULTIPLE : cy1 * MULTIPLE, cx0 * MULTIPLE : cx1 * MULTIPLE]
                )
                lab = _grow(
                    labels[cy0:cy1, cx0:cx1], x.shape[-2] // MULTIPLE, x.shape[-1] // MULTIPLE
                )
                lab_t = torch.from_numpy(lab.astype(np.int64))[None]
                with torch.no_grad(), _bf16(bf16):
                    t = bundle.comp(x, lab_t).float()
                t = refine_latents(t, x, lab_t, bundle.gen, bundle.compact_table, refine)
                return quantize(t, bundle.levels)[0].numpy()

            return run

        results = self._run([piece(r) for r in pieces], "compnet" if len(regions) > 1 else "")
        for r, q in zip(pieces, results, strict=True):
            (y0, y1, x0, x1), (cy0, _, cx0, _) = r.core, r.ctx
            symbols[:, y0:y1, x0:x1] = q[:, y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
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
            (y0, y1, x0, x1), (cy0, cy1, cx0, cx1) = _blocks(r.core), _blocks(r.ctx)
            if y0 * MULTIPLE >= h or x0 * MULTIPLE >= w:
                continue  # a core made only of padding
            gh, gw = max(cy1 - cy0, MIN_SIDE // MULTIPLE), max(cx1 - cx0, MIN_SIDE // MULTIPLE)
            sym = torch.from_numpy(_grow(symbols[:, cy0:cy1, cx0:cx1], gh, gw).astype(np.int64))
            lab_t = torch.from_numpy(_grow(labels[cy0:cy1, cx0:cx1], gh, gw).astype(np.int64))
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
        rgb = _pad_rgb(img.rgb)
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
            layers[LayerKind.ALPHA] = _encode_alpha(img.alpha)
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
            buf = io.BytesIO()
            image.save(
                buf, "PNG" if image.mode not in ("CMYK", "YCbCr", "LAB", "I", "F") else "TIFF"
            )
            loaded = load_image(buf.getvalue(), self.limits)
            return dataclasses.replace(loaded, metadata=metadata_of(image))
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
        compact = layers[LayerKind.COMPACT]
        need = int(nsym * self._compact_min_bits * _PLAUSIBLE / 8) - 16
        if len(compact) < need:
            raise CorruptData(
                f"compact layer of {len(compact)} bytes is too short for {size} (needs >= {need})"
            )
        smap = layers[LayerKind.SEMANTIC_MAP]
        need = int(mh * mw * _MAP_MIN_BITS * _PLAUSIBLE / 8) - 16
        if smap[:1] == bytes([_MAP_MODE_CODED]) and len(smap) < need:
            raise CorruptData(
                f"semantic map layer of {len(smap)} bytes is too short for {size} (needs >= {need})"
            )

    def decode(self, data: bytes, layer: str = "full", keep_base: bool = False) -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the GAN reconstruction only).

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
            with _pil_pixel_limit(self.limits):
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


def _blocks(rect: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """A pixel rectangle (multiples of 8) in 1/8-resolution units."""
    return tuple(v // MULTIPLE for v in rect)  # type: ignore[return-value]


def _assemble(
    rgb: np.ndarray, header: Header, alpha_data: bytes | None, limits: Limits
) -> Image.Image:
    """Give back the input's mode: L from RGB, RGBA with the lossless alpha layer."""
    img = Image.fromarray(rgb, "RGB")
    if header.mode == "L":
        return img.convert("L")
    if header.mode == "RGBA":
        alpha = _decode_alpha(alpha_data or b"", header.width, header.height, limits)
        img.putalpha(Image.fromarray(alpha, "L"))
    return img


def _encode_alpha(alpha: np.ndarray) -> bytes:
    """Alpha plane, losslessly, as a PNG (good on the flat masks alpha usually is)."""
    buf = io.BytesIO()
    Image.fromarray(alpha, "L").save(buf, "PNG", optimize=True)
    return buf.getvalue()


def _decode_alpha(data: bytes, width: int, height: int, limits: Limits = Limits()) -> np.ndarray:
    """Decode and check the alpha layer; its declared size is checked before any pixel."""
    try:
        with _pil_pixel_limit(limits), warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=["PNG"]) as im:
                if im.size != (width, height) or im.mode != "L":
                    raise CorruptData("alpha layer has the wrong size or mode")
                return np.asarray(im.convert("L"))
    except CorruptData:
        raise
    except Exception as exc:  # noqa: BLE001 - any PIL failure on this payload is corruption
        raise CorruptData(f"alpha layer: {exc}") from None


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
