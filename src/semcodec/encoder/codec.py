"""The pipeline (A1–A6): image → map → compact → base → residual → enhancement → file.

Floating-point networks only produce what is then stored losslessly (the map, the compact
symbols) or what both ends recompute identically from decoded integers (the base: the
generator's picture, on an integer grid). Entropy coders see integers only. This module only
orchestrates (the model, its caches, the stage clock, the calls in order): tiles come from
tiling.py, the map from segment.py, the symbols and compact layer from compact.py, the
predictions and their side layers from prediction.py, the residual from residual.py, the
ENHANCE layer from enhance.py, each layer's coder from format/.
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
from semcodec.decoder.pipeline import DecodeResult
from semcodec.defaults import DEFAULT_MODEL
from semcodec.encoder import enhance, prediction, roi, segment
from semcodec.encoder.analysis import Analysis, EncodeStats
from semcodec.encoder.compact import compact_layer, compact_symbols
from semcodec.encoder.options import ANALYSIS_FIELDS, EncodeOptions
from semcodec.encoder.refine import RefineConfig
from semcodec.encoder.residual import code_residual
from semcodec.errors import ModelError, UnsupportedInput
from semcodec.format import container
from semcodec.format.alpha import encode_alpha
from semcodec.format.container import Header, LayerKind, Limits
from semcodec.format.map import encode_map
from semcodec.format.metadata import encode_metadata
from semcodec.format.residual import get_backend
from semcodec.format.tiling import DEFAULT_TILING, MULTIPLE, Tiling, pad_rgb
from semcodec.imageio import LoadedImage, from_pil, load_image
from semcodec.models.compnet import dequantize
from semcodec.models.generator import pixels
from semcodec.stages import Clock, TileProgress
from semcodec.zoo import bundles as zoo
from semcodec.zoo import registry
from semcodec.zoo.bundles import ModelBundle, load_bundle

T = TypeVar("T")


def _resolve_model(model: str) -> str:
    """Refuse model names that are neither registered nor a '.pt' weights file, e.g. '/proc/kcore'."""
    if model in registry.REGISTRY:
        return model
    path = Path(model)
    if path.suffix == ".pt" and path.is_file():
        return model
    known = ", ".join(sorted(registry.REGISTRY))
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

    def _runner(self, progress: TileProgress | None) -> segment.Runner:
        """Encoder work: a fixed split on one thread per piece, or plain intra-op threads;
        tiled stages report each finished piece to ``progress``."""

        def run(tasks: list[Callable[[], T]], stage: str = "") -> list[T]:
            tasks = _ticking(progress, stage, tasks) if stage else tasks
            if self.deterministic:
                return runtime.run_parallel(list(tasks))
            return [t() for t in tasks]

        return run

    # ----- encoder -------------------------------------------------------------------------
    def semantic_map(self, rgb: np.ndarray, progress: TileProgress | None = None) -> np.ndarray:
        """A1: the 1/8-resolution label map of a padded (H,W,3) uint8 image (segment.py)."""
        with runtime.network_heap():
            run = self._runner(progress)
            return segment.label_map(self.bundle.seg, rgb, self.bf16, self.tiling, run)

    def compact(
        self,
        rgb: np.ndarray,
        labels: np.ndarray,
        refine: RefineConfig | None = None,
        progress: TileProgress | None = None,
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
        progress: TileProgress | None = None,
    ) -> np.ndarray:
        """A4: the base (the generator's picture), uint8 (h,w,3), from decoded integers (tiled).

        The integer generator (intgrid/generator_torch.py) gives the same pixels on every CPU
        and thread count, so it uses all of torch's threads; a bundle without one (e.g. the
        ``paper`` configuration) runs its float generator on one thread.
        """
        return decoder.reconstruct(symbols, labels, crop, self.generator, self.tiling, progress)

    @property
    def generator(self) -> decoder.GeneratorFn:
        """The generator the encoder and the in-process decoder share: the bundle's integer
        generator, or its float generator where it has none."""
        if self.bundle.integer_generator is not None:
            return self.bundle.integer_generator.forward_numpy

        def run(sym: np.ndarray, lab: np.ndarray) -> np.ndarray:
            size = (sym.shape[-2] * MULTIPLE, sym.shape[-1] * MULTIPLE)
            s, la = torch.from_numpy(sym)[None], torch.from_numpy(lab)[None]
            return self._float_generator(s, la, size).permute(1, 2, 0).numpy()

        return run

    @property
    def prediction_parts(self) -> prediction.PredictionParts:
        """What the prediction stages need of the model (prediction.py)."""
        return prediction.PredictionParts(
            self.bundle.levels, self.bundle.compact_table, self.reconstruct
        )

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
        progress: TileProgress | None = None,
        **settings: Any,
    ) -> bytes:
        """Encode an image into a complete .sem file with ``options`` (default EncodeOptions()),
        any EncodeOptions field given by keyword changed, e.g. ``encode(img, quality=60)``."""
        return self.encode_with_stats(image, options, progress, **settings)[0]

    def encode_with_stats(
        self,
        image: Image.Image | np.ndarray | LoadedImage | str | bytes,
        options: EncodeOptions | None = None,
        progress: TileProgress | None = None,
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
        progress: TileProgress | None = None,
        **settings: Any,
    ) -> Analysis:
        """Run what every quality shares (map, compact layer, their payloads) once.

        Rate control encodes one image at several qualities: with an Analysis the networks run
        once and each further quality costs only the residual coder (``finish``). Of the
        options, ``refine``, ``metadata`` (the input metadata kinds the file keeps) and ``roi``
        are fixed here for every quality of this analysis.
        """
        opts = _options(options, EncodeOptions(), settings)
        clock = Clock()
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

    def _prepare_base(
        self, analysis: Analysis, clock: Clock, progress: TileProgress | None
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

    def finish(
        self,
        analysis: Analysis,
        options: EncodeOptions | None = None,
        progress: TileProgress | None = None,
        **settings: Any,
    ) -> tuple[bytes, EncodeStats]:
        """The .sem file of an analysed image (residual, alpha, container) with ``options``
        (default: those of the analysis), e.g. ``finish(analysis, quality=q)`` in rate control;
        refine, metadata and roi must be the analysis's."""
        opts = _options(options, analysis.options, settings)
        _check_analysis(analysis, opts)
        quality = opts.quality
        times = analysis.times.copy()  # a file's stage times include the shared stages
        clock = Clock(times)
        img = analysis.img
        h, w = img.rgb.shape[:2]
        layers = dict(analysis.layers)
        backend_code = 0
        predicts = prediction.searches(opts)
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
                plans = prediction.candidates(analysis, self.prediction_parts, opts)
            else:
                plans = [prediction.flat(analysis, self.prediction_parts, opts.gating)]
            _began(progress, "residual")
            table = self.bundle.compact_table
            chosen, gate = code_residual(analysis, opts, backend, plans, table)
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
            data, layers = enhance.enhanced_file(
                self.decoder, data, header, layers, img.rgb, opts, clock
            )
        sizes = {k.name.lower(): len(v) for k, v in layers.items()}
        clock("pack")
        return data, EncodeStats(layer_bytes=sizes, total_bytes=len(data), times=times)

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
        """The decoder of this bundle's files, on the encoder's generator (made once)."""
        with self._decoder_lock:
            if self._decoder is None:
                parts = zoo.decoder_parts(self.bundle, with_generator=False)
                gen = decoder.deferred_generator(lambda: self.generator)
                self._decoder = decoder.Decoder(parts, gen, self.limits, self.tiling)
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
        progress: TileProgress | None = None,
    ) -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the generator's reconstruction only).

        keep_base also returns the generator output before the residual (one decode, both
        layers); the result carries the decode's stage times.
        """
        self.check_model(container.read_header(data))
        return self.decoder.decode(data, layer, keep_base, progress)


def _began(progress: TileProgress | None, stage: str) -> None:
    """Tell ``progress`` a stage began (total 0: no tiles), so a single file's encode on a
    terminal says what it is doing."""
    if progress is not None:
        progress(stage, 0, 0)


def _ticking(
    progress: TileProgress | None, stage: str, tasks: list[Callable[[], T]]
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


_DEFAULT: dict[str, Codec] = {}
_DEFAULT_LOCK = threading.Lock()


def get_codec(model: str = DEFAULT_MODEL) -> Codec:
    """A process-wide Codec per model, so models load once (also when threads ask at once)."""
    with _DEFAULT_LOCK:
        if model not in _DEFAULT:
            _DEFAULT[model] = Codec(model)
        return _DEFAULT[model]
