"""The pipeline (A1–A6): image → map → compact → base → enhanced reconstruction → residual → file.

Floating-point networks only produce what is then stored losslessly (the map, the compact
symbols) or what both ends recompute identically from decoded integers (the enhanced
reconstruction, on an integer grid). Entropy coders see integers only. This module only
orchestrates: tiles come from tiling.py, the map from segment.py, each layer's coder from
entropy/.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from PIL import Image

from semcodec import runtime
from semcodec.decoder import pipeline as decoder
from semcodec.decoder.pipeline import DecodeResult, Progress
from semcodec.defaults import DEFAULT_MODEL
from semcodec.encoder import enhance, gating, roi, segment
from semcodec.encoder.analysis import Analysis, EncodeStats
from semcodec.encoder.compact import compact_layer, compact_symbols
from semcodec.encoder.options import ANALYSIS_FIELDS, EncodeOptions
from semcodec.encoder.refine import RefineConfig
from semcodec.errors import ModelError, UnsupportedInput
from semcodec.format import container
from semcodec.format.alpha import encode_alpha
from semcodec.format.compact import encode_compact
from semcodec.format.container import Header, LayerKind, Limits
from semcodec.format.enhance import encode_adjust
from semcodec.format.gating import GatingPlan, encode_gating
from semcodec.format.map import encode_map
from semcodec.format.metadata import encode_metadata
from semcodec.format.residual import get_backend
from semcodec.format.tiling import DEFAULT_TILING, MULTIPLE, Tiling, pad_rgb
from semcodec.imageio import LoadedImage, from_pil, load_image
from semcodec.intgrid import generator_torch as fixed
from semcodec.models.compnet import dequantize
from semcodec.models.generator import pixels
from semcodec.zoo import bundles as zoo
from semcodec.zoo.bundles import ModelBundle, load_bundle

T = TypeVar("T")


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
    """Encoder and decoder bound to one model bundle (loaded once, reused for every image).

    It holds the model only (networks, bf16 choice, tiling, caches): each call's settings come
    as an ``EncodeOptions``, so threads may encode with different settings at the same time.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        bf16: bool | None = None,
        limits: Limits | None = None,
        tiling: Tiling | None = None,
        deterministic: bool = True,
    ):
        """bf16=None autocasts the encoder networks to bf16 only where that is native and
        faster (runtime.bf16_decision). deterministic=False lets the encoder networks use
        torch's intra-op threads instead of the fixed split of work (runtime.run_parallel):
        files may then differ between thread counts."""
        runtime.return_large_frees()
        self.bundle: ModelBundle = load_bundle(_resolve_model(model))
        self.deterministic = deterministic
        self.bf16 = runtime.bf16_decision().use if bf16 is None else bool(bf16)
        self.limits = limits or Limits()
        self.tiling = tiling or DEFAULT_TILING
        self._decoder: decoder.Decoder | None = None
        self._decoder_lock = threading.Lock()

    def _runner(self, progress: Progress | None) -> segment.Runner:
        """Encoder work: a fixed split on one thread per piece, or plain intra-op threads;
        tiled stages report each finished piece to ``progress``."""

        def run(tasks: list[Callable[[], T]], stage: str = "") -> list[T]:
            tasks = _ticking(progress, stage, tasks) if stage else tasks
            if self.deterministic:
                return runtime.run_parallel(list(tasks))
            return [t() for t in tasks]

        return run

    # ----- encoder -------------------------------------------------------------------------
    def semantic_map(self, rgb: np.ndarray, progress: Progress | None = None) -> np.ndarray:
        """A1: the 1/8-resolution label map of a padded (H,W,3) uint8 image (segment.py)."""
        with runtime.network_heap():
            run = self._runner(progress)
            return segment.label_map(self.bundle.seg, rgb, self.bf16, self.tiling, run)

    def compact(
        self,
        rgb: np.ndarray,
        labels: np.ndarray,
        refine: RefineConfig | None = None,
        progress: Progress | None = None,
    ) -> np.ndarray:
        """A2/A3: integer compact symbols (C,h,w) of a padded uint8 image and its map
        (compact.py: CompNet per tile in row bands; ``refine`` None: off)."""
        run = self._runner(progress)
        return compact_symbols(self.bundle, rgb, labels, refine, self.bf16, self.tiling, run)

    @torch.no_grad()
    def reconstruct(
        self,
        symbols: np.ndarray,
        labels: np.ndarray,
        crop: tuple[int, int],
        progress: Progress | None = None,
    ) -> np.ndarray:
        """A4: the enhanced reconstruction, uint8 (h,w,3), from decoded integers only (tiled).

        The integer-grid generator (models/fixed.py) gives the same pixels on every CPU and
        thread count, so it uses all of torch's threads; a bundle without one (e.g. the
        ``paper`` configuration) runs its float generator on one thread.
        """
        return decoder.reconstruct(symbols, labels, crop, self.kernel, self.tiling, progress)

    @property
    def kernel(self) -> decoder.GeneratorKernel:
        """The generator kernel the encoder and the in-process decoder share."""
        if self.bundle.fixed is not None:
            return fixed.kernel_of(self.bundle.fixed)

        def run(sym: np.ndarray, lab: np.ndarray) -> np.ndarray:
            size = (sym.shape[-2] * MULTIPLE, sym.shape[-1] * MULTIPLE)
            s, la = torch.from_numpy(sym)[None], torch.from_numpy(lab)[None]
            return self._float_generator(s, la, size).permute(1, 2, 0).numpy()

        return run

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
        options: EncodeOptions | None = None,
        progress: Progress | None = None,
        **settings: Any,
    ) -> bytes:
        """Encode an image into a complete .sem file with ``options`` (default EncodeOptions()),
        any EncodeOptions field given by keyword changed, e.g. ``encode(img, quality=60)``."""
        return self.encode_with_stats(image, options, progress, **settings)[0]

    def encode_with_stats(
        self,
        image: Image.Image | np.ndarray | LoadedImage | str | bytes,
        options: EncodeOptions | None = None,
        progress: Progress | None = None,
        **settings: Any,
    ) -> tuple[bytes, EncodeStats]:
        """Encode and report bytes per layer and seconds per stage (``encode``'s arguments)."""
        opts = _options(options, EncodeOptions(), settings)
        analysis = self.analyse(image, opts, progress)
        return self.finish(analysis, opts, progress)

    def analyse(
        self,
        image: Image.Image | np.ndarray | LoadedImage | str | bytes,
        options: EncodeOptions | None = None,
        progress: Progress | None = None,
        **settings: Any,
    ) -> Analysis:
        """Run what every quality shares (map, compact layer, their payloads) once.

        Rate control encodes one image at several qualities: with an Analysis the networks run
        once and each further quality costs only the residual coder (``finish``). Of the
        options, ``refine``, ``metadata`` (the input metadata kinds the file keeps) and ``roi``
        are fixed here for every quality of this analysis.
        """
        opts = _options(options, EncodeOptions(), settings)
        clock = decoder.Clock()
        img = self._load(image)
        clock("load")
        h, w = img.rgb.shape[:2]
        problem = self.limits.check(w, h)
        if problem:
            raise UnsupportedInput(problem)
        rgb = pad_rgb(img.rgb)
        _began(progress, "segment")
        labels = self.semantic_map(rgb, progress)
        clock("segment")
        layers = {LayerKind.SEMANTIC_MAP: encode_map(labels, self.bundle.map_symbols)}
        clock("map_coder")
        kept = img.metadata.keep(opts.metadata)
        if kept:
            layers[LayerKind.METADATA] = encode_metadata(kept)
        return Analysis(
            img=img,
            labels=labels,
            make_symbols=lambda: self.compact(rgb, labels, opts.refine, progress),
            layers=layers,
            options=opts,
            times=clock.times,
            metadata=kept,
        )

    def _candidates(self, analysis: Analysis, opts: EncodeOptions) -> list[tuple[np.ndarray, Any]]:
        """Predictions to code the residual against, each with its gate (None: the generator
        everywhere, the ungated layout); the chooser's pick first.

        Two plans are costed with the rate proxy (gating.choose_modes). With the generator:
        every compact symbol is sent (the generator sees the true symbols, so its
        reconstruction is the one already made) and each tile takes the generator, the base or
        nothing. Without it: only tiles that take the base send their symbols, the others
        take nothing. The cheaper plan is the pick; the other extreme (no prediction anywhere,
        or the generator everywhere) follows for the check with the real coder (``_residual``).
        """
        cfg, quality = opts.gating, opts.quality
        recon = analysis.reconstruction
        if not cfg.enabled or quality == 0:
            return [(recon, None)]
        img, symbols, levels = analysis.img, analysis.symbols, self.bundle.levels
        h, w = img.rgb.shape[:2]
        _, mh, mw = symbols.shape
        th, tw = gating.tile_shape(mh, mw, cfg.tile_blocks)
        preds: dict[int, np.ndarray | int] = {gating.GEN: recon, gating.NONE: gating.FLAT}
        if gating.BASE in cfg.modes:
            preds[gating.BASE] = gating.base_pixels(symbols, levels, (h, w))
        cbits = gating.compact_tile_bits(symbols, self.bundle.compact_table, cfg.tile_blocks)
        plans = []
        if gating.GEN in cfg.modes:
            with_gen = {m: p for m, p in preds.items() if m in cfg.modes}
            modes, cost = gating.choose_modes(img.rgb, with_gen, None, quality, cfg.tile_blocks)
            plans.append((cost + float(cbits.sum()), modes, True))
        without = {m: p for m, p in preds.items() if m in cfg.modes and m != gating.GEN}
        if without:
            modes, cost = gating.choose_modes(img.rgb, without, cbits, quality, cfg.tile_blocks)
            plans.append((cost, modes, False))
        _, modes, all_symbols = min(plans, key=lambda p: p[0])
        if (modes == gating.GEN).all():
            pick = (recon, None)
        else:
            pick = self._gated(analysis, cfg, modes, all_symbols)
        out = [pick]
        if pick[1] is not None and (modes != gating.NONE).any() and gating.NONE in cfg.modes:
            out.append(self._flat(analysis, cfg))
        elif pick[1] is not None and gating.GEN in cfg.modes:
            out.append((recon, None))
        elif pick[1] is None and gating.NONE in cfg.modes:
            out.append(self._flat(analysis, cfg))
        return out

    def _gated(
        self,
        analysis: Analysis,
        cfg: gating.GatingConfig,
        modes: np.ndarray,
        all_symbols: bool,
    ) -> tuple[np.ndarray, GatingPlan]:
        """The blended prediction of given tile modes, from the symbols the decoder will have
        (none, and no CompNet run, where no tile uses the base)."""
        levels = self.bundle.levels
        h, w = analysis.img.rgb.shape[:2]
        mh, mw = analysis.labels.shape
        used = gating.used_blocks(modes, mh, mw, cfg.tile_blocks, all_symbols)
        if used.any():
            filled = gating.fill_symbols(analysis.symbols, used, levels)
        final: dict[int, np.ndarray | int] = {}
        if (modes == gating.GEN).any():
            if used.all():
                final[gating.GEN] = analysis.reconstruction
            else:  # not written by this encoder's plans, but a valid file: decode what it says
                final[gating.GEN] = self.reconstruct(filled, analysis.labels, (h, w))
        if (modes == gating.BASE).any():
            final[gating.BASE] = gating.base_pixels(filled, levels, (h, w))
        if (modes == gating.NONE).any():
            final[gating.NONE] = gating.FLAT
        pred = gating.blend(final, modes, (h, w), cfg.tile_blocks, cfg.radius)
        return pred, GatingPlan(cfg.tile_blocks, cfg.radius, modes, all_symbols)

    def _side_layers(self, analysis: Analysis, gate: GatingPlan | None) -> dict[LayerKind, bytes]:
        """The gating and compact layers a candidate's file carries."""
        if gate is None:
            return {LayerKind.COMPACT: compact_layer(analysis, self.bundle.compact_table)}
        used = gating.used_by(gate, *analysis.labels.shape)
        out = {LayerKind.GATING: encode_gating(gate)}
        if gate.all_symbols:
            out[LayerKind.COMPACT] = compact_layer(analysis, self.bundle.compact_table)
        elif used.any():
            out[LayerKind.COMPACT] = encode_compact(
                analysis.symbols, self.bundle.compact_table, used
            )
        return out

    def _prepare_base(
        self, analysis: Analysis, clock: decoder.Clock, progress: Progress | None
    ) -> None:
        """CompNet and the compact layer, run and timed once per analysis."""
        if analysis.compact_layer is not None:
            return
        _began(progress, "compnet")
        _ = analysis.symbols  # CompNet
        clock("compnet")
        compact_layer(analysis, self.bundle.compact_table)
        clock("compact_coder")
        for stage in ("compnet", "compact_coder"):  # later qualities report the shared stages
            analysis.times.wall[stage] = clock.times.wall[stage]
            analysis.times.cpu[stage] = clock.times.cpu[stage]

    def _flat(self, analysis: Analysis, cfg: gating.GatingConfig) -> tuple[np.ndarray, Any]:
        """No prediction in any tile: the residual layer codes the image itself, and the file
        has no compact layer (no CompNet needed)."""
        th, tw = gating.tile_shape(*analysis.labels.shape, cfg.tile_blocks)
        return self._gated(analysis, cfg, np.full((th, tw), gating.NONE, np.int64), False)

    def _residual(
        self,
        analysis: Analysis,
        opts: EncodeOptions,
        backend: Any,
        plans: list[tuple[np.ndarray, Any]],
    ) -> tuple[dict[LayerKind, bytes], Any]:
        """The residual, gating and compact layers of the chosen plan, and its gate.

        With more than one candidate (effort >= VERIFY_EFFORT) each is coded with the real
        residual coder (from effort LAYOUT_EFFORT in each layout the backend offers for it,
        AVIF: 4:2:0 as well where the residual is the image itself), and the one of least cost log2(bits) − PSNR / slope(q) is kept
        (gating.rd_slope: the residual coder's own dB per doubling of rate at that quality).
        """
        quality, effort = opts.quality, opts.effort
        rgb = analysis.img.rgb
        plan = analysis.roi_plan()
        target, guide = plan if plan is not None else (rgb, None)
        extra = {} if guide is None else {"guide": guide}
        if effort < gating.VERIFY_EFFORT:
            cands: list[tuple[np.ndarray, Any, str | None]] = [(*plans[0], None)]
        elif effort < gating.LAYOUT_EFFORT:
            cands = [(pred, gate, None) for pred, gate in plans]
        else:  # each candidate in every payload layout the backend offers for it
            cands = [
                (pred, gate, layout)
                for pred, gate in plans
                for layout in backend.layouts(_predicts_nothing(gate))
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
            layers = self._side_layers(analysis, gate)
            layers[LayerKind.RESIDUAL] = payload
            if len(cands) == 1:
                return layers, gate
            h, w = rgb.shape[:2]
            dec = backend.decode(payload, h, w) + pred
            mse = float(np.mean((np.clip(dec, 0, 255) - rgb.astype(np.int16)) ** 2.0))
            bits = 8.0 * self._file_size(analysis, layers)
            cost = gating.rd_cost(bits, mse, quality)
            if best is None or cost < best[0]:
                best = (cost, layers, gate)
        assert best is not None
        return best[1], best[2]

    def _file_size(self, analysis: Analysis, layers: dict[LayerKind, bytes]) -> int:
        """The size estimate a candidate's cost uses: its layers, the map and the container's
        fixed estimate (container.ESTIMATED_HEADER: files' bytes depend on its value)."""
        fixed = len(analysis.layers[LayerKind.SEMANTIC_MAP]) + container.ESTIMATED_HEADER
        return fixed + sum(len(v) for v in layers.values())

    def finish(
        self,
        analysis: Analysis,
        options: EncodeOptions | None = None,
        progress: Progress | None = None,
        **settings: Any,
    ) -> tuple[bytes, EncodeStats]:
        """The .sem file of an analysed image (residual, alpha, container) with ``options``
        (default: those of the analysis), e.g. ``finish(analysis, quality=q)`` in rate control;
        refine, metadata and roi must be the analysis's."""
        opts = _options(options, analysis.options, settings)
        _check_analysis(analysis, opts)
        quality = opts.quality
        times = analysis.times.copy()  # a file's stage times include the shared stages
        clock = decoder.Clock(times)
        img = analysis.img
        h, w = img.rgb.shape[:2]
        layers = dict(analysis.layers)
        backend_code = 0
        predicts = _searches(opts)
        if predicts:
            self._prepare_base(analysis, clock, progress)
        if quality == 0:
            layers[LayerKind.COMPACT] = compact_layer(analysis, self.bundle.compact_table)
        else:
            backend = get_backend(opts.residual)
            if predicts:
                if analysis.reconstruction is None:
                    _began(progress, "generator")
                    analysis.reconstruction = self.reconstruct(
                        analysis.symbols, analysis.labels, (h, w), progress
                    )
                clock("generator")
                plans = self._candidates(analysis, opts)
            else:
                plans = [self._flat(analysis, opts.gating)]
            _began(progress, "residual")
            chosen, gate = self._residual(analysis, opts, backend, plans)
            layers.update(chosen)
            analysis.modes[quality] = None if gate is None else gate.modes
            if analysis.roi is not None:
                layers[LayerKind.ROI] = roi.encode_roi(analysis.roi)
            clock("residual")
            backend_code = backend.code
        if img.alpha is not None:
            layers[LayerKind.ALPHA] = encode_alpha(img.alpha)
            clock("alpha")
        header = Header(
            width=w,
            height=h,
            mode=img.mode,
            model_name=self.bundle.name,
            model_hash=self.bundle.hash,
            quality=quality,
            residual_backend=backend_code,
            map_scale=MULTIPLE,
            compact_levels=self.bundle.levels,
        )
        data = container.pack(header, layers)
        if opts.enhance and self.bundle.enh_table is not None:
            _began(progress, "enhance")
            data, layers = self._enhanced(data, header, layers, img.rgb, opts)
            clock("enhance")
        sizes = {k.name.lower(): len(v) for k, v in layers.items()}
        clock("pack")
        return data, EncodeStats(layer_bytes=sizes, total_bytes=len(data), times=times)

    def _enhanced(
        self,
        data: bytes,
        header: Header,
        layers: dict[LayerKind, bytes],
        original: np.ndarray,
        opts: EncodeOptions,
    ) -> tuple[bytes, dict[LayerKind, bytes]]:
        """The file with an ENHANCE layer fitted to the original, where that lowers its cost."""
        dec = self.decoder
        result = dec.decode(data)
        assert dec.enhancer is not None and result.pixels is not None
        choice = enhance.choose(
            dec.enhancer, original, result.pixels, result.semantic_map, opts.quality, opts.effort
        )
        layer = encode_adjust(choice.adjust)
        enhanced = len(data) + len(layer) + container.ESTIMATED_ENTRY
        if not enhance.pays(choice, len(data), enhanced, opts.quality):
            return data, layers
        layers = {**layers, LayerKind.ENHANCE: layer}
        return container.pack(header, layers), layers

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
    @property
    def decoder(self) -> decoder.Decoder:
        """The decoder of this bundle's files, on the encoder's generator kernel (made once)."""
        with self._decoder_lock:
            if self._decoder is None:
                parts = zoo.decoder_parts(self.bundle, with_generator=False)
                kernel = decoder.deferred_kernel(lambda: self.kernel)
                self._decoder = decoder.Decoder(parts, kernel, self.limits, self.tiling)
            return self._decoder

    def check_model(self, header: Header) -> None:
        """Refuse a file made with another model or other weights."""
        if header.model_name != self.bundle.name:
            raise ModelError(
                f"file was encoded with model {header.model_name!r}, decoder has {self.bundle.name!r}"
            )
        self.decoder.check_model(header)

    def decode(
        self,
        data: bytes,
        layer: str = "full",
        keep_base: bool = False,
        progress: Progress | None = None,
    ) -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the generator's reconstruction only).

        keep_base also returns the generator output before the residual (one decode, both
        layers); the result carries the decode's stage times.
        """
        self.check_model(container.read_header(data))
        return self.decoder.decode(data, layer, keep_base, progress)


def _began(progress: Progress | None, stage: str) -> None:
    """Tell ``progress`` a stage began (total 0: no tiles), so a single file's encode on a
    terminal says what it is doing."""
    if progress is not None:
        progress(stage, 0, 0)


def _ticking(
    progress: Progress | None, stage: str, tasks: list[Callable[[], T]]
) -> list[Callable[[], T]]:
    """Tasks that report each finished piece to ``progress`` (tiled images only)."""
    if progress is None or len(tasks) < 2:
        return tasks
    done = [0]
    lock = threading.Lock()

    def wrap(task: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            out = task()
            with lock:
                done[0] += 1
                progress(stage, done[0], len(tasks))
            return out

        return run

    return [wrap(t) for t in tasks]


def _searches(opts: EncodeOptions) -> bool:
    """Whether this encode looks for a prediction (and so runs CompNet and the generator):
    always for the base layer alone and without gating, otherwise gating.searches."""
    cfg = opts.gating
    if opts.quality == 0 or not cfg.enabled or gating.NONE not in cfg.modes:
        return True
    return gating.searches(opts.effort, opts.quality)


def _options(
    options: EncodeOptions | None, default: EncodeOptions, settings: dict[str, Any]
) -> EncodeOptions:
    """The call's options (``default`` if none) with the keyword settings changed; a quality
    given by position instead of by keyword is refused, not taken for options."""
    if options is not None and not isinstance(options, EncodeOptions):
        raise TypeError(
            f"options must be an EncodeOptions, got {type(options).__name__}: give settings by "
            "keyword, e.g. encode(image, quality=60)"
        )
    return (options or default).but(**settings)


def _check_analysis(analysis: Analysis, opts: EncodeOptions) -> None:
    """Refuse to finish an analysis with options it was not made with (refine, metadata, roi)."""
    if opts.analysis_key() != analysis.options.analysis_key():
        names = ", ".join(ANALYSIS_FIELDS)
        raise ValueError(f"finish: {names} must be those the image was analysed with")


def _predicts_nothing(gate: GatingPlan | None) -> bool:
    """Whether a candidate's residual is the image itself: every tile in mode 'none'."""
    return gate is not None and bool((gate.modes == gating.NONE).all())


_DEFAULT: dict[str, Codec] = {}
_DEFAULT_LOCK = threading.Lock()


def get_codec(model: str = DEFAULT_MODEL) -> Codec:
    """A process-wide Codec per model, so models load once (also when threads ask at once)."""
    with _DEFAULT_LOCK:
        if model not in _DEFAULT:
            _DEFAULT[model] = Codec(model)
        return _DEFAULT[model]
