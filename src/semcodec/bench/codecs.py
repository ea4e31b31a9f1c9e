"""Codec adapters for the benchmark: one interface over Pillow, imagecodecs and semcodec.

Every adapter maps ``encode(rgb, setting) -> bytes`` and ``decode(bytes) -> rgb`` where ``rgb``
is an ``(H, W, 3)`` uint8 array, and ``bytes`` is a complete file (container included) so that
``bpp = 8 · len(bytes) / (W · H)`` counts everything a user would store.  Each adapter has a
default list of settings spanning roughly 0.05–1.5 bpp on Kodak; the low end is set by what
each codec can do (JPEG q=3 and WebP q=0 give about 0.1 bpp, JPEG XL's largest distance, 25,
about 0.13 bpp).  Classic codecs run single-threaded by default so encode and
decode times are comparable and the benchmark shares a machine politely.

Settings per codec (the value passed to ``encode``):

* ``jpeg`` — Pillow/libjpeg ``quality`` 1–95, 4:2:0, ``optimize=True`` (Huffman tables
  optimised), baseline.
* ``webp`` — Pillow/libwebp lossy ``quality`` 0–100, ``method=6`` (slowest, best).
* ``jpeg2000`` — Pillow/OpenJPEG compression *ratio* (``quality_mode="rates"``,
  ``quality_layers=[ratio]``), 9/7 irreversible wavelet, ``mct=1`` (RGB→YCbCr), JP2 file.
  A ratio targets ``24 / ratio`` bpp, so rates mode gives a precise, even spread.
* ``avif`` — Pillow/libavif ``quality`` 0–100, 4:2:0, ``speed=6`` (libavif's default speed;
  lower is slower and slightly better), default encoder (libaom where available).
* ``jxl`` — imagecodecs/libjxl Butteraugli ``distance`` (lower is better), ``effort=7``
  (libjxl's default).  Optional: unavailable without ``imagecodecs``.
* ``semcodec`` — semcodec ``quality`` (0–100) with the configured residual backend.
* ``semcodec-420`` — the same with the AVIF residual in 4:2:0 (``--chroma 420``).
* ``semcodec-base`` — the base layer alone: one setting, quality 0 (the file then has no
  residual layer: header + semantic map + compact layer), decoded with ``layer="base"``.

The semcodec adapters also report bytes per layer (``layer_bytes``: map, compact, residual and
container overhead) from ``Codec.encode_with_stats``, or by splitting the file with
``semcodec.format.container.unpack`` when the codec has no stats.
"""

from __future__ import annotations

import io
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from semcodec.defaults import DEFAULT_CHROMA, DEFAULT_EFFORT

__all__ = [
    "CodecAdapter",
    "CodecUnavailable",
    "register_codec",
    "make_adapter",
    "codec_names",
    "CLASSIC_CODECS",
    "DEFAULT_CODECS",
    "Setting",
]

Setting = int | float | str

#: Codecs that need no trained model.
CLASSIC_CODECS: tuple[str, ...] = ("jpeg", "webp", "jpeg2000", "avif", "jxl")
#: What ``semcodec bench`` runs by default (semcodec ones are skipped while no model loads).
DEFAULT_CODECS: tuple[str, ...] = ("semcodec", "semcodec-base", *CLASSIC_CODECS)


class CodecUnavailable(RuntimeError):
    """The codec's library is missing: the benchmark skips it and records why."""


class CodecAdapter(ABC):
    """Common interface so the benchmark loop never special-cases a codec."""

    name: str = ""
    description: str = ""
    setting_name: str = "quality"
    default_settings: tuple[Setting, ...] = ()

    def unavailable_reason(self) -> str | None:
        """None when the codec can run here, else why not (checked once, before the loop)."""
        return None

    @abstractmethod
    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Compress an (H, W, 3) uint8 image into a complete file."""

    @abstractmethod
    def decode(self, data: bytes) -> np.ndarray:
        """Decompress a file produced by ``encode`` back to (H, W, 3) uint8."""

    def layer_bytes(self, data: bytes) -> dict[str, int] | None:
        """Bytes per layer of a file from ``encode`` (layered codecs only; None otherwise)."""
        return None

    def info(self) -> dict[str, Any]:
        """What the JSON report records about this codec, so runs can be reproduced."""
        return {
            "description": self.description,
            "setting": self.setting_name,
            "default_settings": list(self.default_settings),
        }


def _rgb_image(rgb: np.ndarray) -> Image.Image:
    """Validate the array contract once for all Pillow-based adapters."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
    return Image.fromarray(np.ascontiguousarray(rgb), "RGB")


def _pil_decode(data: bytes) -> np.ndarray:
    """Decode any Pillow-readable file to RGB uint8."""
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


def _pil_encode(rgb: np.ndarray, fmt: str, **params: Any) -> bytes:
    """Save through Pillow into memory: the returned bytes are the whole file."""
    buf = io.BytesIO()
    _rgb_image(rgb).save(buf, format=fmt, **params)
    return buf.getvalue()


def _pil_feature_reason(feature: str, label: str) -> str | None:
    """Pillow may be built without a codec; report that instead of failing mid-run."""
    from PIL import features

    try:
        return None if features.check(feature) else f"Pillow built without {label} support"
    except ValueError:
        return f"this Pillow does not know the {label} feature"


class JpegAdapter(CodecAdapter):
    """Baseline JPEG: the anchor every BD-rate is measured against by default."""

    name = "jpeg"
    description = "JPEG (Pillow/libjpeg), 4:2:0, optimize=True, setting = quality"
    default_settings = (3, 5, 8, 12, 18, 25, 35, 50, 65, 75, 80)

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Encode with optimised Huffman tables so JPEG is not handicapped by defaults."""
        return _pil_encode(rgb, "JPEG", quality=int(setting), subsampling="4:2:0", optimize=True)

    def decode(self, data: bytes) -> np.ndarray:
        """Pillow decode to RGB."""
        return _pil_decode(data)


class WebpAdapter(CodecAdapter):
    """Lossy WebP (VP8 intra) at its slowest, best method."""

    name = "webp"
    description = "WebP lossy (Pillow/libwebp), method=6, setting = quality"
    default_settings = (0, 5, 10, 20, 30, 40, 50, 60, 70, 80, 85)

    def unavailable_reason(self) -> str | None:
        """Pillow can be built without libwebp."""
        return _pil_feature_reason("webp", "WebP")

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """method=6 is the strongest rate–distortion search libwebp offers."""
        return _pil_encode(rgb, "WEBP", quality=float(setting), method=6, lossless=False)

    def decode(self, data: bytes) -> np.ndarray:
        """Pillow decode to RGB."""
        return _pil_decode(data)


class Jpeg2000Adapter(CodecAdapter):
    """JPEG 2000 with rate targeting, the usual way it is benchmarked."""

    name = "jpeg2000"
    description = (
        "JPEG 2000 (Pillow/OpenJPEG), 9/7 irreversible, mct=1, JP2 file, "
        "quality_mode=rates, setting = compression ratio (target bpp = 24/ratio)"
    )
    setting_name = "ratio"
    # target bpp 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.25, 1.5
    default_settings = (480, 320, 240, 160, 120, 80, 60, 48, 32, 24, 19.2, 16)

    def unavailable_reason(self) -> str | None:
        """Pillow can be built without OpenJPEG."""
        return _pil_feature_reason("jpg_2000", "JPEG 2000")

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Rates mode hits the target size; fewer wavelet levels for tiny images."""
        levels = max(1, min(6, int(math.log2(max(1, min(rgb.shape[:2])))) - 1))
        return _pil_encode(
            rgb,
            "JPEG2000",
            quality_mode="rates",
            quality_layers=[float(setting)],
            irreversible=True,
            mct=1,
            num_resolutions=levels,
        )

    def decode(self, data: bytes) -> np.ndarray:
        """Pillow decode to RGB."""
        return _pil_decode(data)


class AvifAdapter(CodecAdapter):
    """AVIF (AV1 intra) through Pillow's libavif binding."""

    name = "avif"
    description = "AVIF (Pillow/libavif), 4:2:0, speed=6, setting = quality"
    default_settings = (0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75)

    def __init__(
        self,
        speed: int = 6,
        threads: int = 1,
        subsampling: str = "4:2:0",
        advanced: Mapping[str, str] | None = None,
    ) -> None:
        self.speed = speed
        self.threads = threads
        self.subsampling = subsampling
        self.advanced = dict(advanced or {})
        extra = "".join(f", {k}={v}" for k, v in self.advanced.items())
        self.description = (
            f"AVIF (Pillow/libavif), {subsampling}, speed={speed}{extra}, setting = quality"
        )

    def unavailable_reason(self) -> str | None:
        """Pillow < 11.3 or a build without libavif has no AVIF."""
        return _pil_feature_reason("avif", "AVIF")

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Fixed speed so the curve is one encoder configuration, not a mix."""
        return _pil_encode(
            rgb,
            "AVIF",
            quality=int(setting),
            speed=self.speed,
            subsampling=self.subsampling,
            max_threads=self.threads,
            **({"advanced": self.advanced} if self.advanced else {}),
        )

    def decode(self, data: bytes) -> np.ndarray:
        """Pillow decode to RGB."""
        return _pil_decode(data)

    def info(self) -> dict[str, Any]:
        """Record the speed, the libaom options and the AV1 encoder libavif used."""
        d = super().info()
        d["speed"] = self.speed
        d["subsampling"] = self.subsampling
        if self.advanced:
            d["advanced"] = dict(self.advanced)
        try:
            from PIL import _avif

            d["codec_versions"] = _avif.codec_versions()
        except Exception:  # noqa: BLE001 - informative only
            pass
        return d


class JxlAdapter(CodecAdapter):
    """JPEG XL through imagecodecs (optional dependency)."""

    name = "jxl"
    description = "JPEG XL (imagecodecs/libjxl), effort=7, setting = Butteraugli distance"
    setting_name = "distance"
    default_settings = (25.0, 15.0, 10.0, 7.0, 5.0, 4.0, 3.0, 2.5, 2.0, 1.5, 1.25)

    def __init__(self, effort: int = 7, threads: int = 1) -> None:
        self.effort = effort
        self.threads = threads
        self.description = (
            f"JPEG XL (imagecodecs/libjxl), effort={effort}, setting = Butteraugli distance"
        )

    def unavailable_reason(self) -> str | None:
        """imagecodecs is an optional extra (``pip install semcodec[jxl]``)."""
        try:
            import imagecodecs
        except ImportError:
            return "imagecodecs not installed (pip install imagecodecs)"
        if not getattr(imagecodecs, "JPEGXL", None) or not imagecodecs.JPEGXL.available:
            return "imagecodecs built without JPEG XL"
        return None

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Distance is libjxl's native rate knob; effort fixed like AVIF's speed."""
        import imagecodecs

        _rgb_image(rgb)  # validate
        return bytes(
            imagecodecs.jpegxl_encode(
                np.ascontiguousarray(rgb),
                distance=float(setting),
                effort=self.effort,
                numthreads=self.threads,
            )
        )

    def decode(self, data: bytes) -> np.ndarray:
        """imagecodecs decode; JXL of 8-bit RGB input decodes to uint8 RGB."""
        import imagecodecs

        out = np.asarray(imagecodecs.jpegxl_decode(data, numthreads=self.threads))
        if out.dtype != np.uint8:
            raise ValueError(f"unexpected JPEG XL output dtype {out.dtype}")
        return out[..., :3].copy()

    def info(self) -> dict[str, Any]:
        """Record effort and the libjxl version."""
        d = super().info()
        d["effort"] = self.effort
        try:
            import imagecodecs

            d["libjxl"] = imagecodecs.jpegxl_version()
        except Exception:  # noqa: BLE001 - informative only
            pass
        return d


class SemcodecAdapter(CodecAdapter):
    """The codec under test, imported lazily so the benchmark works without a model.

    ``layer=None`` is the full codec (base + residual) at ``quality``; ``layer="base"`` is the
    base layer alone: encoded with quality 0 (no residual layer, so the file holds only the
    header, the semantic map and the compact layer) and decoded with ``layer="base"``.
    """

    name = "semcodec"
    description = "semcodec (learned), setting = quality"
    # Kodak with the shipped model: 0.19-2.1 bpp, four points inside JPEG's 27-35 dB range
    # (the BD integral's span) and two above it; override with --qualities.
    default_settings: tuple[Setting, ...] = (10, 25, 40, 55, 70, 85)

    def __init__(
        self,
        model: str = "default",
        residual: str = "avif",
        layer: str | None = None,
        effort: int = DEFAULT_EFFORT,
        gating: Any = None,
        chroma: str = DEFAULT_CHROMA,
    ):
        self.model = model
        self.chroma = chroma
        self.residual = residual
        self.layer = layer
        self.effort = effort
        self.gating = gating  # True/False or a gating.GatingConfig, None: the codec's default
        self._codec: Any = None
        self._last: tuple[bytes, dict[str, int]] | None = None
        if layer == "base":
            self.name = "semcodec-base"
            self.default_settings = (0,)  # the base layer has no rate knob of its own
            self.description = (
                f"semcodec model={model}, base layer alone (quality 0: header + map + compact, "
                "no residual), decoded layer=base; single setting 0"
            )
        else:
            self.description = (
                f"semcodec model={model} residual={residual} effort={effort} chroma={chroma}, "
                "setting = quality"
            )

    def unavailable_reason(self) -> str | None:
        """The pipeline may not import, or its model may be missing (no trained weights yet)."""
        try:
            import semcodec.encoder.codec  # noqa: F401
        except Exception as e:  # noqa: BLE001 - any import failure means "skip"
            return f"semcodec.encoder.codec not importable: {type(e).__name__}: {e}"
        try:
            self._get()
        except Exception as e:  # noqa: BLE001 - e.g. ModelError: unknown model / missing weights
            return f"semcodec model {self.model!r} cannot be loaded: {type(e).__name__}: {e}"
        return None

    def _get(self) -> Any:
        """Build the Codec once: loading the model dominates otherwise."""
        if self._codec is None:
            from semcodec.encoder.codec import Codec

            self._codec = Codec(model=self.model)
        return self._codec

    def _options(self, quality: int) -> Any:
        """This adapter's EncodeOptions at one quality, through the path every entry point takes
        (``EncodeOptions.from_kwargs``: the same names, values and checks; None: the default)."""
        from semcodec.encoder.options import EncodeOptions

        return EncodeOptions.from_kwargs(
            quality=quality,
            effort=self.effort,
            residual=self.residual,
            chroma=self.chroma,
            gating=self.gating,
        )

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        """Encode the array through the public API (no PNG round trip billed to encode_s)."""
        _rgb_image(rgb)  # validate the array contract
        quality = int(setting)
        if self.layer == "base" and quality != 0:
            raise ValueError(f"semcodec-base has the single setting 0, got {setting!r}")
        codec = self._get()
        arr = np.ascontiguousarray(rgb)
        if hasattr(codec, "encode_with_stats"):
            data, stats = codec.encode_with_stats(arr, self._options(quality))
            data = bytes(data)
            self._last = (data, _layer_sizes(stats.layer_bytes, len(data)))
        else:
            data = bytes(codec.encode(arr, self._options(quality)))
            self._last = None
        return data

    def decode(self, data: bytes) -> np.ndarray:
        """Decode the full reconstruction, or only the base layer for ``semcodec-base``."""
        codec = self._get()
        result = codec.decode(data) if self.layer is None else codec.decode(data, layer=self.layer)
        return np.asarray(result.image.convert("RGB"), dtype=np.uint8).copy()

    def enhances(self) -> bool:
        """Whether this adapter's files may carry an ENHANCE layer (full decode, a bundle with an
        enhancement network): the benchmark then also scores them without it."""
        return self.layer is None and self._get().bundle.enh_table is not None

    def plain(self, data: bytes) -> tuple[int, np.ndarray, np.ndarray, float] | None:
        """The same file without its ENHANCE layer: its size, its picture, the map (at image
        size) and the share of tiles the layer enhances; None for a file without the layer."""
        from semcodec.decoder.maplayer import decode_map
        from semcodec.decoder.pipeline import Decoder
        from semcodec.format import container
        from semcodec.format.container import LayerKind

        header, layers = container.unpack(data)
        if LayerKind.ENHANCE not in layers or self.layer is not None:
            return None
        rest = {k: v for k, v in layers.items() if k != LayerKind.ENHANCE}
        codec = self._get()
        dec = Decoder(
            codec.decoder.parts, codec.generator, codec.limits, codec.tiling, enhance=False
        )
        out = np.asarray(dec.decode(data).image.convert("RGB"), dtype=np.uint8).copy()
        from semcodec.decoder.info import _enhance_info

        share = _enhance_info(layers[LayerKind.ENHANCE], header)["tiles_on"]
        return len(container.pack(header, rest)), out, decode_map(data), share

    def layer_bytes(self, data: bytes) -> dict[str, int] | None:
        """Bytes per layer of a file this adapter made: the encoder's stats, else the container."""
        if self._last is not None and self._last[0] == data:
            return dict(self._last[1])
        try:
            from semcodec.format import container

            _, layers = container.unpack(data)
        except Exception:  # noqa: BLE001 - not a .sem file (e.g. a stub codec): nothing to split
            return None
        return _layer_sizes({k.name.lower(): len(v) for k, v in layers.items()}, len(data))

    def tile_shares(self, data: bytes) -> dict[str, float] | None:
        """Share of tiles per prediction mode of a file (the generator everywhere if ungated)."""
        from semcodec.decoder.maplayer import map_shape
        from semcodec.format import container
        from semcodec.format.gating import mode_shares, read_plan

        gating, compact = container.LayerKind.GATING, container.LayerKind.COMPACT
        header, layers = container.unpack_layers(data, (gating, compact))  # the small layers
        plan = read_plan(layers.get(gating), compact in layers, *map_shape(header))
        if plan is None:
            return {"generator": 1.0, "base": 0.0, "none": 0.0} if header.quality else None
        return mode_shares(plan.modes)

    def info(self) -> dict[str, Any]:
        """Record model and residual so runs with different models are distinguishable."""
        d = super().info()
        d.update(
            model=self.model,
            residual=None if self.layer == "base" else self.residual,
            chroma=None if self.layer == "base" else self.chroma,
            layer=self.layer,
        )
        if self._codec is not None:
            bundle = getattr(self._codec, "bundle", None)
            d["model_hash"] = getattr(bundle, "hash", None)
        return d


class ResidualCoderAdapter(CodecAdapter):
    """semcodec's residual coder on the image itself: the reference of the prediction value.

    The residual layer codes x − prediction (+128 in its 8-bit mapping); with a flat
    prediction of 128 it codes the image itself, with the same quality mapping, effort, 4:4:4
    and thread count as inside semcodec. Bytes are the residual payload alone, so comparing
    them with semcodec's residual bytes at equal quality tells what the base layer saves the
    residual coder (``results.prediction_value``).
    """

    name = "residual-coder"
    default_settings = SemcodecAdapter.default_settings

    def __init__(self, residual: str = "avif", effort: int = DEFAULT_EFFORT):
        self.residual = residual
        self.effort = effort
        self._shape: tuple[int, int] = (0, 0)
        self.description = (
            f"semcodec's {residual} residual coder on the image itself (prediction 128), "
            f"effort {effort}, setting = quality; bytes = residual payload only"
        )

    def _backend(self) -> Any:
        from semcodec.format.residual import get_backend

        return get_backend(self.residual)

    def unavailable_reason(self) -> str | None:
        try:
            self._backend()
        except Exception as e:  # noqa: BLE001 - e.g. Pillow without AVIF
            return f"{type(e).__name__}: {e}"
        return None

    def encode(self, rgb: np.ndarray, setting: Setting) -> bytes:
        x = np.asarray(rgb, dtype=np.int16) - 128
        self._shape = x.shape[:2]
        return self._backend().encode(x, int(setting), self.effort)

    def decode(self, data: bytes) -> np.ndarray:
        """The payload does not carry the image size (the container does): the size of the
        image last encoded is used, as the benchmark decodes each file right after encoding."""
        h, w = self._shape
        r = self._backend().decode(data, h, w).astype(np.int32) + 128
        return np.clip(r, 0, 255).astype(np.uint8)

    def info(self) -> dict[str, Any]:
        d = super().info()
        d.update(residual=self.residual, effort=self.effort)
        return d


#: Container layer names (``LayerKind`` lower-cased) → the short names the report uses.
_LAYER_NAMES = {"semantic_map": "map", "compact": "compact", "residual": "residual"}


def _layer_sizes(by_kind: dict[str, int], total: int) -> dict[str, int]:
    """{map, compact, residual, container} bytes; container = header, layer table, CRCs, alpha."""
    out = {short: int(by_kind.get(kind, 0)) for kind, short in _LAYER_NAMES.items()}
    out["container"] = int(total) - sum(out.values())
    return out


_REGISTRY: dict[str, Callable[..., CodecAdapter]] = {}


def register_codec(name: str, factory: Callable[..., CodecAdapter]) -> None:
    """Add a codec so new backends plug into the CLI without editing the loop."""
    _REGISTRY[name] = factory


def codec_names() -> list[str]:
    """Registered codec names in registration order (the CLI's help text uses this)."""
    return list(_REGISTRY)


def make_adapter(
    name: str,
    *,
    model: str = "default",
    residual: str = "avif",
    threads: int = 1,
    effort: int = DEFAULT_EFFORT,
) -> CodecAdapter:
    """The benchmark adapter of a codec by name, with the options that apply to it."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown codec {name!r}; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[name](model=model, residual=residual, threads=threads, effort=effort)


def _simple(cls: type[CodecAdapter]) -> Callable[..., CodecAdapter]:
    """Factory for adapters without options: ignore the ones that do not apply."""
    return lambda **_: cls()


register_codec("jpeg", _simple(JpegAdapter))
register_codec("webp", _simple(WebpAdapter))
register_codec("jpeg2000", _simple(Jpeg2000Adapter))
register_codec("avif", lambda threads=1, **_: AvifAdapter(threads=threads))


# AVIF at the libaom speed and options semcodec's effort uses (residual_avif.speed_for,
# aom_options): so that a slower residual search alone does not count as semcodec's gain at
# high effort
def _avif_effort(threads: int = 1, effort: int = DEFAULT_EFFORT, **_: Any) -> AvifAdapter:
    """AVIF (4:2:0) at the speed and libaom options of semcodec's residual at this effort."""
    from semcodec.format.residual_avif import aom_options, speed_for

    return AvifAdapter(speed=speed_for(effort), threads=threads, advanced=aom_options(effort))


register_codec("avif-effort", _avif_effort)
register_codec("jxl", lambda threads=1, **_: JxlAdapter(threads=threads))
register_codec(
    "semcodec",
    lambda model="default", residual="avif", effort=DEFAULT_EFFORT, **_: SemcodecAdapter(
        model=model, residual=residual, effort=effort
    ),
)


def _ungated(model: str = "default", residual: str = "avif", effort: int = DEFAULT_EFFORT, **_):
    """semcodec with the generator's prediction in every tile (the codec before gating)."""
    a = SemcodecAdapter(model=model, residual=residual, effort=effort, gating=False)
    a.name = "semcodec-ungated"
    a.description += ", gating off"
    return a


register_codec("semcodec-ungated", _ungated)


def _chroma420(model: str = "default", residual: str = "avif", effort: int = DEFAULT_EFFORT, **_):
    """semcodec with its AVIF residual in 4:2:0 (``--chroma 420``) against the default 4:4:4."""
    a = SemcodecAdapter(model=model, residual=residual, effort=effort, chroma="420")
    a.name = "semcodec-420"
    return a


register_codec("semcodec-420", _chroma420)
register_codec(
    "semcodec-base",
    lambda model="default", residual="avif", **_: SemcodecAdapter(
        model=model, residual=residual, layer="base"
    ),
)

register_codec(
    "residual-coder",
    lambda residual="avif", effort=DEFAULT_EFFORT, **_: ResidualCoderAdapter(residual, effort),
)


def settings_or_default(adapter: CodecAdapter, settings: Sequence[Setting] | None) -> list:
    """The user's settings if given, else the adapter's defaults."""
    return list(settings) if settings else list(adapter.default_settings)
